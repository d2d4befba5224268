"""Per-principal, per-session provenance: which values entered from untrusted sources, and which are trusted.

The tracker keeps one :class:`FlowState` per (agent, channel, session): what another principal read
never marks this one's values, and a delegate's calls are judged against its own state and that of
every principal it acts for (a value the delegator read from an untrusted source stays untrusted in
the delegate's hands).

Order decides, and trust never flows back from a copy:

- a value seen first in a *trusted* tool's output is trusted and stays so (the user's own contacts,
  a catalogue the user searched);
- a value seen first in *untrusted* content stays untrusted even when a trusted tool later returns
  it: that is how a value is laundered (read an e-mail, write it to a file, read the file back), so
  provenance follows the content, not the file or the tool that returned it last;
- only the host endorses: :meth:`FlowState.endorse` (the user's own request, passed as trusted
  context) makes a value trusted whatever its history, and an untrusted output of a call whose
  arguments the user's request names (``pay the bill in bill-december.txt``) counts as the user's
  chosen source.

Every store is bounded. A state keeps at most ``max_values`` untrusted fingerprints (least recently
used dropped first); once it has dropped one it *overflows* and fails closed: from then on any
identifier in a sink that is not known to be trusted counts as untrusted. The tracker keeps at most
``max_sessions`` states; a session whose state was dropped starts again overflowed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aleph._flow._values import (
    Fingerprinter,
    candidate_values,
    canonical_text,
    mentioned_values,
    text_lines,
    whole_value,
)

__all__ = ["MAX_SESSIONS", "MAX_VALUES", "FlowState", "FlowTracker", "Origin", "StateKey", "flat_strings"]

MAX_VALUES = 10_000
"""Untrusted value fingerprints one session keeps by default (least recently used dropped first)."""
MAX_SESSIONS = 4_096
"""Session states one runtime keeps (least recently used dropped first; a dropped one comes back overflowed)."""
MAX_TRUSTED = 50_000
MAX_PENDING_CHARS = 64_000
"""Trusted output queued per session before its first untrusted content (more is indexed at once)."""
MAX_FLAT = 512
_MIN_NAMED = 4

StateKey = tuple[str, str, str]
"""(agent, channel, session) of one state."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an untrusted value first came from."""

    kind: str
    """The value kind (``iban``, ``email``, ``url``, ``text``...)."""
    tool: str
    """The tool whose output held it."""
    call: str
    """The call's id (the model's call id, else its number in the session)."""
    source: str
    """The untrusted source's label (``web``, ``e-mail``, ``MCP server github``)."""
    named: bool = False
    """The user's request named that call's source (so its values are the user's choice)."""

    def describe(self) -> str:
        """``read_email`` (call 17), e-mail."""
        return f"`{self.tool}` (call {self.call}), an untrusted source ({self.source})"


OVERFLOW = Origin("value", "(untracked)", "-", "more untrusted content than this session tracks")


def flat_strings(value: Any, path: str = "", out: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """(argument path, text) for every string in JSON ``value`` (at most :data:`MAX_FLAT` of them)."""
    if out is None and type(value) is dict:  # the common case, flat arguments: one loop, no recursion
        flat: list[tuple[str, str]] = []
        for key, item in value.items():
            kind = type(item)
            if kind is str:
                flat.append((key, item))
            elif kind is dict or kind is list:
                return flat_strings(value, path, [])
            elif (kind is int or kind is float) and abs(item) >= 10_000_000:
                flat.append((key, str(int(item))))
        return flat[:MAX_FLAT]
    found: list[tuple[str, str]] = [] if out is None else out
    if len(found) >= MAX_FLAT:
        return found
    if isinstance(value, str):
        found.append((path, value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            flat_strings(item, f"{path}.{key}" if path else str(key), found)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            flat_strings(item, f"{path}[{i}]", found)
    elif isinstance(value, int | float) and not isinstance(value, bool) and abs(value) >= 10_000_000:
        found.append((path, str(int(value))))  # an account number passed as a number
    return found


class FlowState:
    """The provenance of one (agent, channel, session): bounded fingerprint sets."""

    __slots__ = (
        "_fp",
        "_max",
        "calls",
        "endorsed",
        "lines",
        "mentioned",
        "overflowed",
        "pending",
        "pending_chars",
        "tainted_by",
        "trusted",
        "untrusted",
    )

    def __init__(self, fingerprint: Fingerprinter, max_values: int = MAX_VALUES, overflowed: bool = False) -> None:
        self._fp = fingerprint
        self._max = max_values
        self.untrusted: OrderedDict[int, Origin] = OrderedDict()
        self.lines: OrderedDict[int, Origin] = OrderedDict()
        self.mentioned: OrderedDict[int, Origin] = OrderedDict()
        self.trusted: dict[int, str] = {}
        self.endorsed: set[int] = set()
        self.pending: deque[str] = deque()
        self.pending_chars = 0
        self.tainted_by: Origin | None = OVERFLOW if overflowed else None
        self.overflowed = overflowed
        self.calls = 0

    # -- what enters ------------------------------------------------------------------------------

    def endorse(self, text: str) -> None:
        """The host's trusted context (the user's request): its values are trusted whatever their history."""
        for kind, value in mentioned_values(text):
            fp = self._fp(kind, value)
            self.endorsed.add(fp)
            self.untrusted.pop(fp, None)
        for line in text_lines(text):
            self.lines.pop(self._fp("text", line), None)

    def saw_trusted(self, text: str) -> None:
        """A trusted tool's output. Before the session read anything untrusted it is only queued (cheap)."""
        if self.tainted_by is None:
            if self.pending_chars + len(text) <= MAX_PENDING_CHARS:
                self.pending.append(text)
                self.pending_chars += len(text)
            else:  # too much to queue: index it now
                self._index_trusted(text)
            return
        self._index_trusted(text)

    def _index_trusted(self, text: str) -> None:
        if len(self.trusted) >= MAX_TRUSTED:
            return  # full: later values are simply not trusted (fails closed)
        for kind, value in candidate_values(text):
            fp = self._fp(kind, value)
            if fp not in self.untrusted:  # an untrusted value read back through a trusted tool stays untrusted
                self.trusted.setdefault(fp, kind)

    def saw_untrusted(self, text: str, origin: Origin, named_by: Iterable[str] = ()) -> None:
        """An untrusted output (or part of one) of ``origin.tool``; ``named_by``: the call's argument texts."""
        if self.tainted_by is None:
            self.tainted_by = origin
            while self.pending:  # trusted outputs read before this one are trusted first
                self._index_trusted(self.pending.popleft())
            self.pending_chars = 0
        values = list(dict.fromkeys(candidate_values(text)))
        named = self._names(named_by)
        ambiguous: set[str] = set()
        if named:
            # A named source vouches for an identifier only when it is the one value of its kind there: a
            # bill with two IBANs (its own and one an attacker added) leaves the choice to a human.
            kinds = [kind for kind, _ in values if kind != "host"]
            ambiguous = {kind for kind in kinds if kinds.count(kind) > 1}
            if ambiguous:
                ambiguous.add("host")
        for kind, value in values:
            fp = self._fp(kind, value)
            if fp in self.trusted or fp in self.endorsed:
                continue
            if fp in self.untrusted:
                self.untrusted.move_to_end(fp)
                continue
            vouched = named and kind not in ambiguous
            self.untrusted[fp] = Origin(kind, origin.tool, origin.call, origin.source, vouched)
            if len(self.untrusted) > self._max:
                self.untrusted.popitem(last=False)
                self.overflowed = True
        for kind, value in mentioned_values(text):
            fp = self._fp(kind, value)
            if fp in self.endorsed or fp in self.mentioned:
                continue
            # codes and passwords are never taken from a document on the user's word alone
            vouched = named and kind != "token" and kind not in ambiguous
            self.mentioned[fp] = Origin(kind, origin.tool, origin.call, origin.source, vouched)
            if len(self.mentioned) > self._max:
                self.mentioned.popitem(last=False)
                self.overflowed = True
        line_origin = Origin("text", origin.tool, origin.call, origin.source, named)
        for line in text_lines(text):
            fp = self._fp("text", line)
            self.lines[fp] = line_origin
            if len(self.lines) > self._max:
                self.lines.popitem(last=False)

    def _names(self, arguments: Iterable[str]) -> bool:
        """Whether the user's request names the object a call read: its file, link or address.

        A free-text argument (a search query) does not name a source: the user who asks what a search
        finds has not chosen what it finds.
        """
        if not self.endorsed:
            return False
        for text in arguments:
            for kind, value in candidate_values(text):
                if kind in ("path", "url", "email") and self._fp(kind, value) in self.endorsed:
                    return True
        return False

    # -- what a sink carries ----------------------------------------------------------------------

    def origin_of(self, kind: str, value: str) -> Origin | None:
        """Where an identifier came from if it is untrusted here, else None."""
        fp = self._fp(kind, value)
        if fp in self.endorsed:
            return None
        hit = self.untrusted.get(fp)
        if hit is not None:
            return hit
        if self.overflowed and fp not in self.trusted:
            return OVERFLOW
        return None

    def mention_of(self, text: str) -> tuple[str, Origin] | None:
        """(kind, origin) of a value in ``text`` that untrusted content mentioned and the user's request did not.

        Stricter than :meth:`origin_of`: a value a trusted tool also returned still counts (an attacker
        names a hotel from the catalogue, a file id from the listing).
        """
        if not self.mentioned and not self.overflowed:
            return None
        found = list(mentioned_values(text))
        whole = whole_value(text)
        if whole is not None:
            found.append(whole)
        for kind, value in found:
            fp = self._fp(kind, value)
            if fp in self.endorsed:
                continue
            hit = self.mentioned.get(fp)
            if hit is not None:
                return kind, hit
            if self.overflowed and kind in ("iban", "email", "url", "host", "number") and fp not in self.trusted:
                return kind, OVERFLOW
        return None

    def origin_of_text(self, text: str) -> Origin | None:
        """Where a whole argument came from when it is a line copied from untrusted content, else None."""
        if not self.lines:
            return None
        if len(text) < 12:
            return None
        canonical = canonical_text(text)
        if len(canonical) < 12 or self._fp("quoted", canonical) in self.endorsed:
            return None  # the user's request says it (a name it quotes)
        return self.lines.get(self._fp("text", canonical))


class FlowTracker:
    """Every session's :class:`FlowState` in one runtime (thread-safe, bounded)."""

    def __init__(self, *, max_values: int = MAX_VALUES, max_sessions: int = MAX_SESSIONS, key: bytes | None = None):
        self.fingerprint = Fingerprinter(key)
        self.max_values = max_values
        self.max_sessions = max_sessions
        self._states: OrderedDict[StateKey, FlowState] = OrderedDict()
        self._dropped: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()

    def state(self, key: StateKey) -> FlowState:
        """The state of ``key``, made on first use (overflowed when an earlier one was dropped)."""
        states = self._states
        hit = states.get(key)
        if hit is not None:
            return hit
        with self._lock:
            hit = states.get(key)
            if hit is not None:
                return hit
            marker = self.fingerprint("session", "\x1f".join(key))
            hit = states[key] = FlowState(self.fingerprint, self.max_values, overflowed=marker in self._dropped)
            while len(states) > self.max_sessions:
                old, _ = states.popitem(last=False)
                self._dropped[self.fingerprint("session", "\x1f".join(old))] = None
                if len(self._dropped) > self.max_sessions * 16:
                    self._dropped.popitem(last=False)
            return hit

    def existing(self, key: StateKey) -> FlowState | None:
        """The state of ``key`` if it exists (a sink check never makes one)."""
        return self._states.get(key)

    def states(self, keys: Iterable[StateKey]) -> Iterator[FlowState]:
        """The existing states of ``keys``."""
        for key in keys:
            hit = self._states.get(key)
            if hit is not None:
                yield hit
