"""Server-rendered HTML for the console. Every value from a call, a tool or the ledger goes through ``esc``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

from aleph._console._inbox import PendingAsk

__all__ = ["esc", "explain_page", "inbox_page", "ledger_page", "page"]

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


def page(title: str, active: str, token: str, body: str, *, refresh: bool = False) -> str:
    """The frame every page shares: navigation carrying the token, then ``body``."""
    q = urlencode({"token": token})
    nav = "".join(
        f'<a href="{href}?{q}"{" class=on" if name == active else ""}>{name}</a>'
        for name, href in (("Inbox", "/"), ("Ledger", "/ledger"), ("Explain", "/explain"))
    )
    meta = '<meta http-equiv="refresh" content="2">' if refresh else ""
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>{meta}<title>{esc(title)} · Aleph console</title>"
        f"<style>{_STYLE}</style></head><body><header><strong>Aleph console</strong>{nav}</header>"
        f"<main>{body}</main></body></html>"
    )


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_LABELS = {"allow_once": "Allow once", "allow_session": "Allow for session", "allow_always": "Always", "deny": "No"}


def inbox_page(token: str, asks: Sequence[PendingAsk], note: str | None = None) -> str:
    """The approval inbox: every waiting ask with what it would do and the answers it offers."""
    parts = [f"<h2>Approval inbox ({len(asks)} waiting)</h2>"]
    if note:
        parts.append(f"<p class=bad role=alert id=note>{esc(note)}</p>")
    if not asks:
        parts.append("<p id=empty>Nothing is waiting for an answer.</p>")
    for ask in asks:
        req, turn = ask.request, ask.request.turn
        who = ", ".join(
            f"{k} {esc(v)}"
            for k, v in (
                ("principal", turn.principal if turn else None),
                ("channel", turn.channel_id if turn else None),
                ("session", turn.session_key if turn else None),
            )
            if v
        )
        buttons = "".join(
            f'<button name=decision value="{esc(d.value)}" data-decision="{esc(d.value)}">'
            f"{esc(_LABELS.get(d.value, d.value))}</button>"
            for d in req.allowed_decisions
        )
        parts.append(
            f'<section class=ask data-ask="{esc(ask.id)}"><h3>{esc(req.tool_name)}</h3>'
            f"<p>{esc(req.reason)}</p><pre class=summary>{esc(req.summary)}</pre>"
            f"<pre class=args>{esc(json.dumps(req.arguments, indent=2, ensure_ascii=False, default=str))}</pre>"
            f"<p><small>asked {esc(_when(ask.asked_at))}{' · ' + who if who else ''} · rule {esc(req.rule_id)}"
            f"</small></p><form method=post action=/answer>"
            f'<input type=hidden name=token value="{esc(token)}"><input type=hidden name=id value="{esc(ask.id)}">'
            f'<input name=reason placeholder="reason (for No)" size=30> {buttons}</form></section>'
        )
    return page("Inbox", "Inbox", token, "".join(parts), refresh=not asks)


def _rows_html(rows: Iterable[dict[str, Any]]) -> str:
    cells = []
    for r in rows:
        outcome = str(r.get("outcome", ""))
        kind = "deny" if outcome in ("refused", "denied", "error") else ""
        cells.append(
            "<tr>"
            + "".join(
                f"<td{' class=' + kind if kind and key == 'outcome' else ''}>{esc(r.get(key))}</td>"
                for key in ("when", "agent_id", "seq", "principal", "action", "target", "outcome", "rule", "detail")
            )
            + "</tr>"
        )
    return "".join(cells)


def ledger_page(
    token: str,
    chains: Sequence[tuple[str, bool, int, str | None]],
    rows: Sequence[dict[str, Any]],
    filters: dict[str, str],
) -> str:
    """The ledger: each agent's chain and its verification, then rows filtered by principal, tool, outcome."""
    chain_rows = "".join(
        f"<tr><td>{esc(agent)}</td><td class={'ok' if ok else 'bad'}>{'verified' if ok else 'FAILED'}</td>"
        f"<td>{n}</td><td>{esc(reason or '')}</td></tr>"
        for agent, ok, n, reason in chains
    )
    inputs = "".join(
        f'<label>{esc(k)} <input name={k} value="{esc(filters.get(k, ""))}"></label> '
        for k in ("agent", "principal", "tool", "outcome")
    )
    body = (
        "<h2>Ledger</h2><table id=chains><tr><th>agent</th><th>verification</th><th>rows</th><th>why</th></tr>"
        f"{chain_rows}</table><h3>Calls</h3><form method=get action=/ledger>"
        f'<input type=hidden name=token value="{esc(token)}">{inputs}<button>Filter</button></form>'
        "<table id=rows><tr><th>time</th><th>agent</th><th>seq</th><th>principal</th><th>action</th><th>tool</th>"
        f"<th>outcome</th><th>rule</th><th>detail</th></tr>{_rows_html(rows)}</table>"
    )
    return page("Ledger", "Ledger", token, body)


def explain_page(token: str, form: dict[str, str], result: dict[str, Any] | None, problem: str | None) -> str:
    """Policy explain: the decision for a tool and input, with the rule and layer that made it."""
    fields = (
        f'<input type=hidden name=token value="{esc(token)}">'
        f'<label>tool <input name=tool value="{esc(form.get("tool", ""))}"></label> '
        f'<label>agent <input name=agent value="{esc(form.get("agent", ""))}"></label> '
        f'<label>input (JSON) <input name=input size=50 value="{esc(form.get("input", "{}"))}"></label> '
        "<button>Explain</button>"
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
    return page(
        "Explain", "Explain", token, f"<h2>Policy explain</h2><form method=get action=/explain>{fields}</form>{out}"
    )
