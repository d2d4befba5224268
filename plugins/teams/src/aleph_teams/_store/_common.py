"""Helpers the store modules share: JSON columns, ids, the task vocabulary, errors."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

__all__ = [
    "LEADER_ONLY",
    "PRIORITIES",
    "SATISFYING",
    "SETTABLE",
    "TERMINAL",
    "TO_LEADER",
    "StoreError",
    "check_protocol",
    "dumps",
    "loads",
    "new_id",
    "now",
]

SETTABLE = ("pending", "in_progress", "waiting_review", "completed", "failed", "cancelled", "skipped", "paused")
"""Stored task statuses; ``blocked`` and ``unsatisfiable`` are derived from dependencies, never stored."""
TERMINAL = frozenset({"completed", "failed", "cancelled", "skipped"})
SATISFYING = frozenset({"completed", "skipped"})
PRIORITIES = ("critical", "high", "normal", "low")
PRIORITY_ORDER = "CASE priority WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END"


LEADER_ONLY = frozenset(
    {"plan_approved", "plan_rejected", "shutdown_approved", "shutdown_rejected", "system_notification"}
)
"""Protocol messages that carry a leader's decision: refused from anyone but the team's leader."""
TO_LEADER = frozenset({"plan_approval_request", "idle", "shutdown_request"})
"""Protocol messages a member addresses to its leader only (a leader may still send them to members)."""


def check_protocol(msg_type: str, sender: str, leader: str, recipients: Sequence[str]) -> None:
    """Refuse a protocol message its sender may not send (raises :class:`StoreError`)."""
    if sender == leader:
        return
    if msg_type in LEADER_ONLY:
        raise StoreError(f"only the team leader ('{leader}') may send '{msg_type}' messages")
    if msg_type in TO_LEADER and any(r != leader for r in recipients):
        raise StoreError(f"a '{msg_type}' message from a member goes to the team leader ('{leader}') only")


class StoreError(Exception):
    """A store refusal a person can act on (the message says what and why)."""


def now() -> float:
    """Seconds since the epoch (UTC)."""
    return time.time()


def new_id() -> str:
    """A fresh id (a UUID4 string)."""
    return str(uuid.uuid4())


def dumps(value: Any) -> str:
    """Compact JSON for a TEXT column."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def loads(text: str | None, default: Any = None) -> Any:
    """The value of a JSON column (``default`` for NULL)."""
    return default if text is None else json.loads(text)


def merge_patch(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Top-level merge: keys laid over ``base``, a None value deletes the key, others replace it whole."""
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out
