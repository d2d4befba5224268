"""Server-rendered HTML for the console. Every value from a call, a tool or the ledger goes through ``esc``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import urlencode

__all__ = ["Card", "asks_digest", "esc", "explain_page", "inbox_page", "page"]

_STYLE = """
body{font:14px system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#1d1d1f;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:baseline}
header a{color:#ddd;text-decoration:none}header a.on{color:#fff;font-weight:600}
main{padding:16px 20px}table{border-collapse:collapse;width:100%;background:#fff}
td,th{border-bottom:1px solid #e5e5e5;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}.ask{background:#fff;border:1px solid #ddd;border-radius:6px;padding:12px;margin:0 0 12px}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0}button{margin-right:6px}
.ok{color:#137333}.bad{color:#b3261e}.deny{color:#b3261e}.ask-d{color:#a15c00}
"""


def esc(value: Any) -> str:
    """``value`` as HTML text: markup in tool output stays text."""
    return escape("" if value is None else str(value), quote=True)


def page(title: str, active: str, token: str, body: str, *, data: Mapping[str, str] | None = None) -> str:
    """The frame every page shares: navigation carrying the token, then ``body`` (``data``: body attributes)."""
    q = urlencode({"token": token})
    nav = "".join(
        f'<a href="{href}?{q}"{" class=on" if name == active else ""}>{name}</a>'
        for name, href in (("Inbox", "/"), ("Ledger", "/ledger"), ("Explain", "/explain"))
    )
    attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in (data or {}).items())
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} · Aleph console</title>"
        f"<style>{_STYLE}</style></head><body{attrs}><header><strong>Aleph console</strong>{nav}</header>"
        f"<main>{body}</main></body></html>"
    )


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_LABELS = {"allow_once": "Allow once", "allow_session": "Allow for session", "allow_always": "Always", "deny": "No"}
MAX_ARGS_CHARS = 4000
"""Longest argument text a card shows (the rest is cut with a marker)."""


@dataclass(frozen=True, slots=True)
class Card:
    """One waiting ask as the inbox shows it, from this process or from the data directory's inbox."""

    id: str
    tool: str
    summary: str
    reason: str
    rule_id: str
    allowed: tuple[str, ...]
    arguments: Any
    who: dict[str, Any]
    asked_at: float
    origin: str
    """Where the call waits: ``this console's process`` or ``aleph serve (pid 4242)``."""
    expires_at: float | None = None
    preview: dict[str, Any] | None = None


def _who(who: dict[str, Any]) -> str:
    parts = []
    for key in ("agent", "principal", "user", "role", "channel", "session"):
        if who.get(key):
            parts.append(f"{key} {esc(who[key])}")
    if who.get("chain"):
        parts.append("for " + esc(" ← ".join(map(str, who["chain"]))))
    return ", ".join(parts)


def _args(arguments: Any) -> str:
    text = json.dumps(arguments, indent=2, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= MAX_ARGS_CHARS else text[:MAX_ARGS_CHARS] + "\n… (cut)"


def _preview(preview: dict[str, Any] | None) -> str:
    if not preview:
        return ""
    if preview.get("kind") == "changeset":
        counts = "".join(
            f"<li class={k}>{esc(k)}: <b>{esc(preview.get(k))}</b></li>" for k in ("created", "modified", "deleted")
        )
        network = preview.get("network")
        used = {True: "used", False: "not used"}.get(network, network) if isinstance(network, bool) else network
        net = "" if network is None else f"<li>network: <b>{esc(used)}</b></li>"
        dirs = ", ".join(esc(d) for d in preview.get("top_dirs") or ())
        return (
            f"<div class=changeset><h4>Changeset of {esc(preview.get('tool') or 'the command')}</h4>"
            f"<p>{esc(preview.get('about'))}</p><ul>{counts}{net}</ul>"
            + (f"<p>mostly under: {dirs}</p>" if dirs else "")
            + "</div>"
        )
    if preview.get("kind") == "permission_diff":
        rows = "".join(
            f"<tr><td>{esc(c.get('key'))}</td><td class=before>{esc(c.get('before'))}</td>"
            f"<td class=after>{esc(c.get('after'))}</td></tr>"
            for c in preview.get("changes") or ()
        )
        more = f"<p>… and {esc(preview['more'])} more</p>" if preview.get("more") else ""
        return (
            f"<div class=diff><h4>Permission diff at {esc(preview.get('path'))}</h4><table>"
            f"<tr><th>setting</th><th>in force</th><th>after</th></tr>{rows}</table>{more}</div>"
        )
    return ""


def _card(token: str, card: Card) -> str:
    buttons = "".join(
        f'<button name=decision value="{esc(d)}" data-decision="{esc(d)}">{esc(_LABELS.get(d, d))}</button>'
        for d in card.allowed
    )
    who = _who(card.who)
    expires = f" · expires {esc(_when(card.expires_at))}" if card.expires_at else ""
    return (
        f'<section class=ask data-ask="{esc(card.id)}"><h3>{esc(card.tool)}</h3>'
        f"<p>{esc(card.reason)}</p><pre class=summary>{esc(card.summary)}</pre>{_preview(card.preview)}"
        f"<details{' open' if not card.preview else ''}><summary>arguments</summary>"
        f"<pre class=args>{esc(_args(card.arguments))}</pre></details>"
        f"<p><small>asked {esc(_when(card.asked_at))}{expires} · {esc(card.origin)}{' · ' + who if who else ''}"
        f" · rule {esc(card.rule_id)}</small></p><form method=post action=/answer>"
        f'<input type=hidden name=token value="{esc(token)}"><input type=hidden name=id value="{esc(card.id)}">'
        f'<input name=reason placeholder="reason (for No)" size=30> {buttons}</form></section>'
    )


# Reloads the page when the set of waiting asks changes, unless the person is typing a reason.
_WATCH = """<script>
(() => {
  const seen = document.body.dataset.asks;
  const url = "/asks?" + new URLSearchParams({token: document.body.dataset.token});
  setInterval(async () => {
    const fields = [...document.querySelectorAll("input[name=reason]")];
    const typing = fields.some(i => i.value || i === document.activeElement);
    if (typing) return;
    const now = await (await fetch(url)).text();
    if (now !== seen) location.reload();
  }, 1000);
})();
</script>"""


def asks_digest(cards: Sequence[Card]) -> str:
    """What the page compares to notice a change in the waiting asks."""
    return ",".join(card.id for card in cards)


def inbox_page(token: str, cards: Sequence[Card], note: str | None = None) -> str:
    """The approval inbox: every waiting ask with what it would do and the answers it offers."""
    parts = [f"<h2>Approval inbox ({len(cards)} waiting)</h2>"]
    if note:
        parts.append(f"<p class=bad role=alert id=note>{esc(note)}</p>")
    if not cards:
        parts.append("<p id=empty>Nothing is waiting for an answer.</p>")
    parts.extend(_card(token, card) for card in cards)
    parts.append(_WATCH)
    return page("Inbox", "Inbox", token, "".join(parts), data={"asks": asks_digest(cards), "token": token})


def _rules_html(rules: Sequence[Any]) -> str:
    rows = "".join(
        f'<tr data-kind="{esc(r.kind)}"><td>{esc(r.layer)}</td><td><code>{esc(r.rule)}</code></td>'
        f"<td class={'deny' if r.action == 'deny' else 'ask-d' if r.action == 'ask' else ''}>{esc(r.action)}</td>"
        f"<td>{esc(r.kind)}</td><td>{esc(r.origin)}</td></tr>"
        for r in rules
    )
    return (
        "<h3>Rules in force</h3><p>Every layer judges the call; the most restrictive decision wins.</p>"
        "<table id=rules><tr><th>layer</th><th>rule</th><th>action</th><th>from</th><th>where</th></tr>"
        f"{rows}</table>"
    )


def explain_page(
    token: str, form: dict[str, str], result: dict[str, Any] | None, problem: str | None, rules: Sequence[Any] = ()
) -> str:
    """Policy explain: the decision for a tool and input with the rule and layer that made it, and every rule."""
    fields = (
        f'<input type=hidden name=token value="{esc(token)}">'
        f'<label>tool <input name=tool value="{esc(form.get("tool", ""))}"></label> '
        f'<label>agent <input name=agent value="{esc(form.get("agent", ""))}"></label> '
        f'<label>channel <input name=channel value="{esc(form.get("channel", ""))}"></label> '
        f'<label>session <input name=session value="{esc(form.get("session", ""))}"></label> '
        f'<label>input (JSON) <input name=input size=40 value="{esc(form.get("input", "{}"))}"></label> '
        f'<label>request layer (JSON, optional) <input name=request size=30 value="{esc(form.get("request", ""))}">'
        "</label> <button>Explain</button>"
    )
    out = ""
    if problem:
        out = f"<p class=bad role=alert>{esc(problem)}</p>"
    elif result is not None:
        out = (
            "<table id=explain>"
            + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in result.items())
            + "</table>"
        )
    body = f"<h2>Policy explain</h2><form method=get action=/explain>{fields}</form>{out}{_rules_html(rules)}"
    return page("Explain", "Explain", token, body)
