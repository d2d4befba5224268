"""Provenance: the one place that talks to the running call's context (``aleph.current_call()``).

Every remember, supersede and forget adds references (``memory_id``, ``supersedes``, ``source_session``,
``source_turn``, ``source_call``) to the call's own signed ledger row; every injection of memory into a
turn is an extra signed row (``memory_injected``). The same events are indexed in the family's SQLite
file so ``memory_trace`` can find them without scanning the ledger, then confirms each against it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aleph

__all__ = ["CallInfo", "annotate", "call_info", "ledger_refs", "owns_session", "record"]

log = logging.getLogger("aleph.memory")

MAX_REFS = 16
MAX_REF_CHARS = 256
_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True, slots=True)
class CallInfo:
    """Who is calling: the agent, the tool, the call id and the turn's session and run."""

    agent: str
    tool: str
    call_id: str | None
    session: str | None
    turn: str | None


def _current() -> Any:
    getter = getattr(aleph, "current_call", None)
    return getter() if getter is not None else None


def call_info(tool: str) -> CallInfo:
    """The running call (from the chokepoint's call context, else the turn context; agent ``default``)."""
    ctx = _current()
    turn = getattr(ctx, "turn", None) if ctx is not None else aleph.current_turn()
    session = turn.session_key or None if turn is not None else None
    run = turn.run_id or None if turn is not None else None
    call_id = getattr(ctx, "call_id", None) if ctx is not None else None
    if call_id is None and turn is not None:
        call_id = turn.call_id
    agent = getattr(ctx, "agent", None) if ctx is not None else None
    return CallInfo(agent or "default", getattr(ctx, "tool", None) or tool, call_id, session, run)


def owns_session(key: str, *, claim: bool) -> bool:
    """Whether session ``key`` is the calling principal's, as core binds sessions to agents.

    ``claim=True`` binds an unused key to the caller first (a session the caller opens or writes);
    ``False`` only asks (a key named as a target: an unused key is nobody's). Outside a call: True.
    """
    ctx = _current()
    if ctx is None:
        return True
    return bool(ctx.claim_session(key) if claim else ctx.owns_session(key))


def _clean(refs: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in refs.items():
        if value is None or _KEY.fullmatch(key) is None or len(out) >= MAX_REFS:
            continue
        text = str(value)
        out[key] = text if len(text) <= MAX_REF_CHARS else text[: MAX_REF_CHARS - 1] + "…"
    return out


def annotate(**refs: Any) -> bool:
    """Add ``refs`` to the running call's ledger row; False when there is no call context to carry them."""
    ctx = _current()
    if ctx is None or not hasattr(ctx, "annotate"):
        return False
    try:
        ctx.annotate(**_clean(refs))
    except Exception:
        log.exception("could not annotate the ledger row of this call")
        return False
    return True


async def record(event: str, detail: str = "", **refs: Any) -> bool:
    """An extra signed ledger row for this call's agent (``tool_event``); False without a call context."""
    ctx = _current()
    if ctx is None or not hasattr(ctx, "record"):
        return False
    try:
        await ctx.record(event, detail, **_clean(refs))
    except Exception:
        log.exception("could not record %s in the ledger", event)
        return False
    return True


def join_ids(ids: list[str]) -> str:
    """Memory ids as one reference value (comma-separated, within the 256-character limit)."""
    out: list[str] = []
    size = 0
    for item_id in ids:
        if size + len(item_id) + 1 > MAX_REF_CHARS:
            break
        out.append(item_id)
        size += len(item_id) + 1
    return ",".join(out)


def ledger_refs(row: Any) -> dict[str, str]:
    """A ledger row's references (empty on a core without them)."""
    refs = getattr(row, "refs", None)
    return dict(refs) if isinstance(refs, Mapping) else {}
