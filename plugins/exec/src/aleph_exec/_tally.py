"""Running totals of deletions and overwrites, per session and per principal.

Six calls that each delete 20 of 120 files stay under every per-call threshold while 60 files go. The
thresholds of :func:`aleph_exec._decision.decide` therefore also apply to what the same session has
committed since a person last approved (the whole session), and to what the same agent has committed
across its sessions within ``[exec] commit_ask_window_minutes`` (a new session does not start afresh).
A person's approval of a changeset covers what came before it: both totals start again.

Identity is the principal the host bound to the call (``aleph.current_call()``: agent and the turn's
session), never a tool argument. The totals live in the runtime's memory, bounded in keys and entries.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

__all__ = ["Prior", "Tally"]

_MAX_KEYS = 4096
_MAX_ENTRIES = 4096  # per key: older entries are merged into one


@dataclass(frozen=True, slots=True)
class Prior:
    """What a session or principal committed before this call: deletions and overwrites, deletions alone."""

    destructive: int = 0
    deleted: int = 0
    scope: str = ""  # "this session" or "this agent": named in the reason a person reads


class Tally:
    """Per-session and per-principal running totals (thread-safe)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._keys: OrderedDict[tuple[str, str], deque[tuple[float, int, int]]] = OrderedDict()

    @staticmethod
    def keys(agent: str | None, session: str | None) -> list[tuple[str, str]]:
        """The totals a call of ``agent`` in ``session`` counts towards."""
        out = [("session", f"{agent or ''}\x00{session}")] if session else []
        return [*out, ("agent", agent or "")]  # the session first: at a tie the reason names it

    def prior(self, keys: list[tuple[str, str]]) -> Prior:
        """The largest running total among ``keys``."""
        now = time.monotonic()
        best = Prior()
        with self._lock:
            for key in keys:
                entries = self._keys.get(key)
                if not entries:
                    continue
                if key[0] == "agent":
                    while entries and entries[0][0] < now - self.window_s:
                        entries.popleft()
                destructive = sum(e[1] for e in entries)
                if destructive > best.destructive:
                    scope = "this agent" if key[0] == "agent" else "this session"
                    best = Prior(destructive, sum(e[2] for e in entries), scope)
        return best

    def add(self, keys: list[tuple[str, str]], destructive: int, deleted: int) -> None:
        """Count a committed changeset towards ``keys``."""
        if destructive <= 0:
            return
        now = time.monotonic()
        with self._lock:
            for key in keys:
                entries = self._keys.setdefault(key, deque())
                self._keys.move_to_end(key)
                entries.append((now, destructive, deleted))
                if len(entries) > _MAX_ENTRIES:
                    first, second = entries.popleft(), entries.popleft()
                    entries.appendleft((second[0], first[1] + second[1], first[2] + second[2]))
            while len(self._keys) > _MAX_KEYS:
                self._keys.popitem(last=False)

    def approved(self, keys: list[tuple[str, str]]) -> None:
        """A person approved a changeset in view of the totals: they start again."""
        with self._lock:
            for key in keys:
                self._keys.pop(key, None)
