"""The ledger page: each chain's verification and checkpoint, a timeline of calls per principal, the rows.

Every row carries its verification state, read off the chain's :class:`~aleph._ledger.VerifyReport`:
``checkpointed`` (verified and covered by the newest signed checkpoint), ``verified`` (after it),
``unsigned`` (a tail no signature vouches for yet: a crash cut the group commit short), ``FAILED`` (the
first row that does not verify, with the reason) and ``unverifiable`` (everything after a broken row).
The timeline is an SVG drawn on the server (no script): one lane per principal, one dot per row, its
colour the decision (allow, ask, deny, error). Filters: agent, principal, tool, decision, outcome, and a
time window. Every value from the ledger goes through ``esc``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aleph._console._pages import esc, page

__all__ = ["FILTERS", "ChainView", "LedgerFilters", "ledger_page", "read_ledger"]

FILTERS = ("agent", "principal", "tool", "decision", "outcome", "since", "until")
DECISIONS = ("allow", "ask", "deny")
_COLOURS = {"allow": "#1e8e3e", "ask": "#e37400", "deny": "#c5221f", "error": "#5f6368", "other": "#9aa0a6"}
_STATE_CLASS = {"checkpointed": "ok", "verified": "ok", "unsigned": "ask-d", "FAILED": "bad", "unverifiable": "bad"}


@dataclass(frozen=True, slots=True)
class ChainView:
    """One agent's chain: its verification and its newest stored checkpoint."""

    agent: str
    ok: bool
    rows: int
    reason: str | None
    checkpoint_seq: int | None
    """The newest stored checkpoint's seq, as stored (None: no checkpoint yet)."""
    checkpoint_at_ms: int | None
    checkpoint_verified: bool
    """Whether verification matched that checkpoint against the chain."""
    torn_tail: bool
    """The chain ends in a torn line or in rows no signature vouches for yet."""


@dataclass
class LedgerFilters:
    """The page's filters, from its query string (``problem`` names a value that could not be read)."""

    values: dict[str, str] = field(default_factory=dict)
    since_ms: int | None = None
    until_ms: int | None = None
    problem: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> LedgerFilters:
        """Read the filters; a bad time or decision is reported, not guessed."""
        out = cls({k: str(query.get(k, "")).strip()[:200] for k in FILTERS})
        decision = out.values["decision"]
        if decision and decision not in DECISIONS:
            out.problem = f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}"
        for key in ("since", "until"):
            text = out.values[key]
            if not text:
                continue
            try:
                when = dt.datetime.fromisoformat(text)
            except ValueError:
                out.problem = f"{key} must be a date and time like 2026-12-06T09:30 (UTC), not {text!r}"
                continue
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            setattr(out, f"{key}_ms", int(when.timestamp() * 1000))
        return out

    def keep(self, row: dict[str, Any]) -> bool:
        """Whether ``row`` (with its ``decision`` and ``who``) passes every filter."""
        v = self.values
        if v["principal"] and v["principal"] not in (row.get("principal") or "") and v["principal"] not in row["who"]:
            return False
        if v["tool"] and row.get("target") != v["tool"]:
            return False
        if v["decision"] and row["decision"] != v["decision"]:
            return False
        if v["outcome"] and row.get("outcome") != v["outcome"]:
            return False
        at = int(row.get("at_ms", 0))
        return not (self.since_ms is not None and at < self.since_ms) and not (
            self.until_ms is not None and at > self.until_ms
        )


def decision_of(action: str, outcome: str) -> str:
    """The decision colour of a ledger row."""
    if action == "tool_denied":
        return "deny"
    if action in ("approval_granted", "approval_denied"):
        return "ask"
    if action == "tool_call":
        return "allow" if outcome == "ok" else "error"
    return "other"


def who_of(principal: str | None, agent_id: str) -> str:
    """A principal field as one short label: ``agent @channel (for a ← b)``."""
    try:
        data = json.loads(principal or "")
    except ValueError:
        return agent_id
    if not isinstance(data, dict):
        return agent_id
    label = str(data.get("agent") or agent_id)
    if data.get("channel"):
        label += f" @{data['channel']}"
    chain = data.get("chain")
    if isinstance(chain, list) and chain:
        label += " (for " + " ← ".join(str(c.get("agent")) for c in chain if isinstance(c, dict)) + ")"
    return label


def _state(seq: int, report: Any) -> tuple[str, str]:
    if report.ok or report.first_bad_seq is None:
        if seq > report.rows:
            return "unsigned", "no signature vouches for it yet (a crash cut its write short)"
        if report.checkpoint_seq is not None and seq <= report.checkpoint_seq:
            return "checkpointed", f"verified, covered by the signed checkpoint at seq {report.checkpoint_seq}"
        return "verified", "hash, chain and signature verified"
    if seq < report.first_bad_seq:
        return "verified", "hash, chain and signature verified"
    if seq == report.first_bad_seq:
        return "FAILED", str(report.reason or "")
    return "unverifiable", f"after the broken row {report.first_bad_seq}"


def read_ledger(ledger: Any, filters: LedgerFilters, max_rows: int) -> tuple[list[ChainView], list[dict[str, Any]]]:
    """Verify every chain and collect its newest rows that pass ``filters`` (newest first, at most ``max_rows``)."""
    if ledger is None:
        return [], []
    chains: list[ChainView] = []
    rows: list[dict[str, Any]] = []
    for agent in ledger.agents():
        report = ledger.verify(agent)
        stored = ledger.stored_checkpoint(agent) or {}
        seq, at = stored.get("seq"), stored.get("at_ms")
        chains.append(
            ChainView(
                agent,
                report.ok,
                report.rows,
                report.reason,
                seq if type(seq) is int else None,
                at if type(at) is int else None,
                report.checkpoint_seq is not None and report.checkpoint_seq == seq,
                report.torn_tail or report.unsigned_tail > 0,
            )
        )
        if filters.values["agent"] and agent != filters.values["agent"]:
            continue
        for row in ledger.rows(agent, limit=max_rows):
            item = row.to_json()
            item["decision"] = decision_of(row.action, row.outcome)
            item["who"] = who_of(row.principal, row.agent_id)
            if not filters.keep(item):
                continue
            item["state"], item["state_why"] = _state(row.seq, report)
            item["when"] = _when_ms(row.at_ms)
            rows.append(item)
    rows.sort(key=lambda r: r.get("at_ms", 0), reverse=True)
    return chains, rows[:max_rows]


def _when_ms(at_ms: int) -> str:
    return dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


# -- rendering ----------------------------------------------------------------------------------------

_W, _LEFT, _LANE, _TOP = 960, 190, 26, 24


def timeline_svg(rows: Sequence[dict[str, Any]]) -> str:
    """Calls over time, one lane per principal, coloured by decision (an inline SVG; no script).

    Rows that are not a call or a decision about one (a chain's key rows, a tool's own events) stay in the
    table only.
    """
    rows = [r for r in rows if r["decision"] != "other"]
    if not rows:
        return "<p id=timeline-empty>No calls in this window.</p>"
    lanes = sorted({r["who"] for r in rows})
    first = min(int(r["at_ms"]) for r in rows)
    last = max(int(r["at_ms"]) for r in rows)
    span = max(last - first, 1000)
    height = _TOP + _LANE * len(lanes) + 20

    def x(at: int) -> float:
        return _LEFT + (at - first) / span * (_W - _LEFT - 16)

    parts = [
        f'<svg id=timeline role=img aria-label="calls over time" width="{_W}" height="{height}" '
        f'viewBox="0 0 {_W} {height}" xmlns="http://www.w3.org/2000/svg" style="background:#fff">'
    ]
    for i, lane in enumerate(lanes):
        y = _TOP + _LANE * i + _LANE / 2
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - 8}" y1="{y}" y2="{y}" stroke="#eee"/>'
            f'<text x="6" y="{y + 4}" font-size="12" class=lane>{esc(lane[:28])}</text>'
        )
    clock = slice(11, 23) if span < 60_000 else slice(11, 19)  # milliseconds when the calls are close
    for k, anchor in enumerate(("start", "middle", "middle", "middle", "end")):
        at = first + span * k // 4
        parts.append(
            f'<text x="{x(at):.1f}" y="14" font-size="10" text-anchor="{anchor}" fill="#666">'
            f"{esc(_when_ms(at)[clock])}</text>"
        )
    index = {lane: i for i, lane in enumerate(lanes)}
    for r in rows:
        y = _TOP + _LANE * index[r["who"]] + _LANE / 2
        tip = f"{r['when']} · {r.get('target')} · {r['decision']} ({r.get('outcome')}) · {str(r.get('detail'))[:300]}"
        parts.append(
            f'<circle cx="{x(r["at_ms"]):.1f}" cy="{y}" r="5" fill="{_COLOURS[r["decision"]]}" '
            f'data-decision="{esc(r["decision"])}"><title>{esc(tip)}</title></circle>'
        )
    parts.append("</svg>")
    legend = " ".join(
        f'<span><svg width=10 height=10><circle cx=5 cy=5 r=5 fill="{c}"/></svg> {name}</span>'
        for name, c in _COLOURS.items()
    )
    return "".join(parts) + f"<p class=legend>{legend}</p>"


def _chains_html(chains: Sequence[ChainView]) -> str:
    out = []
    for c in chains:
        if c.checkpoint_seq is None:
            ckpt = "none yet"
        else:
            when = _when_ms(c.checkpoint_at_ms)[:19] if c.checkpoint_at_ms else "?"
            state = "matches the chain" if c.checkpoint_verified else "does NOT match"
            ckpt = f"seq {c.checkpoint_seq} at {when} UTC, {state}; {max(0, c.rows - c.checkpoint_seq)} rows after it"
        verdict = "verified" if c.ok else "FAILED"
        tail = " (unsigned or torn tail)" if c.torn_tail else ""
        out.append(
            f"<tr><td>{esc(c.agent)}</td><td class={'ok' if c.ok else 'bad'}>{verdict}{tail}</td><td>{c.rows}</td>"
            f"<td class=ckpt>{esc(ckpt)}</td><td>{esc(c.reason or '')}</td></tr>"
        )
    return "".join(out)


def _rows_html(rows: Sequence[dict[str, Any]]) -> str:
    cells = []
    for r in rows:
        state = r["state"]
        cells.append(
            f'<tr data-decision="{esc(r["decision"])}"><td>{esc(r["when"])}</td><td>{esc(r.get("agent_id"))}</td>'
            f"<td>{esc(r.get('seq'))}</td><td>{esc(r['who'])}</td><td>{esc(r.get('action'))}</td>"
            f"<td>{esc(r.get('target'))}</td><td class={'deny' if r['decision'] == 'deny' else ''}>"
            f"{esc(r['decision'])}</td><td>{esc(r.get('outcome'))}</td><td>{esc(r.get('rule'))}</td>"
            f'<td class="state {_STATE_CLASS[state]}" title="{esc(r["state_why"])}">{esc(state)}</td>'
            f"<td>{esc(r.get('detail'))}</td></tr>"
        )
    return "".join(cells)


def ledger_page(token: str, chains: Sequence[ChainView], rows: Sequence[dict[str, Any]], filters: LedgerFilters) -> str:
    """The ledger: chains with verification and checkpoint, the timeline, then the filtered rows."""
    v = filters.values
    inputs = "".join(
        f'<label>{k} <input name={k} value="{esc(v.get(k, ""))}" size=12></label> '
        for k in ("agent", "principal", "tool", "outcome")
    )
    decision = "".join(f"<option{' selected' if v['decision'] == d else ''}>{d}</option>" for d in ("", *DECISIONS))
    times = "".join(
        f'<label>{k} (UTC) <input type=datetime-local name={k} value="{esc(v.get(k, ""))}"></label> '
        for k in ("since", "until")
    )
    problem = f"<p class=bad role=alert>{esc(filters.problem)}</p>" if filters.problem else ""
    body = (
        "<h2>Ledger</h2><table id=chains><tr><th>agent</th><th>verification</th><th>rows</th>"
        f"<th>checkpoint</th><th>why</th></tr>{_chains_html(chains)}</table>"
        f'<h3>Calls</h3><form method=get action=/ledger><input type=hidden name=token value="{esc(token)}">'
        f"{inputs}<label>decision <select name=decision>{decision}</select></label> {times}"
        f"<button>Filter</button></form>{problem}<h3>Timeline</h3>{timeline_svg(rows)}"
        "<table id=rows><tr><th>time (UTC)</th><th>agent</th><th>seq</th><th>principal</th><th>action</th>"
        "<th>tool</th><th>decision</th><th>outcome</th><th>rule</th><th>verification</th><th>detail</th></tr>"
        f"{_rows_html(rows)}</table>"
    )
    return page("Ledger", "Ledger", token, body)
