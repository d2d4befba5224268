"""The approval gate: fingerprints, prompt text, grants and the denial breaker.

A grant binds to the exact tool and canonical arguments it was shown (a 32-hex fingerprint).
Unattended runs never ask and never auto-allow; "nobody answered" and "nobody could be asked" are
not refusals and never stick. Three consecutive real denials pause a session (one probe after the
cool-down).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aleph._atomic import write_atomic
from aleph._chokepoint._approval import (
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalRequester,
    ApprovalResponse,
)
from aleph._chokepoint._once import OnceLedger
from aleph._errors import ApprovalRequired
from aleph._seal import StateSeal

__all__ = [
    "FLOOR_RULES",
    "ApprovalGate",
    "GateOutcome",
    "StandingGrant",
    "allowed_decisions",
    "canonical_json",
    "escape_for_prompt",
    "grant_fingerprint",
    "redact",
    "summarize_call",
]

log = logging.getLogger("aleph.approval")

FLOOR_RULES = frozenset({"tool_declared", "gate_removal"})
"""Rules whose prompts never offer "allow always"."""
EXEC_TOOLS = frozenset({"bash", "code_exec"})
SUMMARY_LIMIT = 200
BREAKER_THRESHOLD = 3
BREAKER_COOLDOWN_S = 300.0
MAX_SESSIONS = 1024

_SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)?|secret|token|api[_-]?key|auth(orization)?|credential|"
    r"private[_-]?key|cookie|session[_-]?id)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|"
    r"xox[abprs]-[A-Za-z0-9\-]{10,}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}|"
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$))"
)
_INLINE_SECRET = re.compile(
    r"((?:bearer|basic)\s+|(?:password|passwd|token|secret|api[_-]?key)\s*[=:]\s*)([^\s'\"&]+)", re.IGNORECASE
)
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


# Built once: json.dumps with non-default options constructs a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_PREVIEW = json.JSONEncoder(ensure_ascii=False, default=str)
_SCALARS = (str, int, float, bool)


# What a secret-named string stands as in a fingerprint. A fingerprint is kept (ledger rows, the results
# store, sealed MCP states) and is a plain SHA-256: hashing a password there would hand anyone holding a
# ledger export an offline guess-and-check. The human who approves a call sees ``***`` in that place
# anyway, so the fingerprint binds exactly what they were shown.
SECRET_MARK = "\u0000secret"


def _field(key: Any, value: Any) -> Any:
    if type(value) is str:
        return SECRET_MARK if value and _is_secret_key(key) else value
    return value if type(value) in _SCALARS else _drop_nulls(value)


def _drop_nulls(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _field(k, v) for k, v in node.items() if v is not None}
    if isinstance(node, list | tuple):
        return [_drop_nulls(v) for v in node]
    return node


def canonical_json(value: Any, *, drop_justification: bool = False) -> str:
    """Sorted keys, nulls dropped recursively (and ``justification`` for exec tools), secret-named strings masked."""
    if isinstance(value, Mapping):
        value = {
            k: _field(k, v)
            for k, v in value.items()
            if v is not None and not (drop_justification and k == "justification")
        }
    else:
        value = _drop_nulls(value)
    return _CANONICAL.encode(value)


def grant_fingerprint(tool: str, input: Mapping[str, Any]) -> str:
    """32 hex chars of SHA-256(tool ‖ 0x1F ‖ canonical JSON of the input)."""
    body = canonical_json(input, drop_justification=tool in EXEC_TOOLS)
    return hashlib.sha256(tool.encode() + b"\x1f" + body.encode()).hexdigest()[:32]


def escape_for_prompt(text: str) -> str:
    r"""Make control, bidi and zero-width characters visible as ``\\uXXXX`` so a prompt cannot hide text."""
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def redact(text: str) -> str:
    """Mask secret-looking values (API keys, tokens, bearer credentials, private keys)."""
    text = _SECRET_VALUE.sub("***", text)
    return _INLINE_SECRET.sub(lambda m: m.group(1) + "***", text)


_secret_keys: dict[str, bool] = {}


def _is_secret_key(key: Any) -> bool:
    # Argument names repeat from call to call: remember the answer (boundedly; names are model input).
    key = str(key)
    found = _secret_keys.get(key)
    if found is None:
        found = _SECRET_KEY.search(key) is not None
        if len(_secret_keys) < 4096:
            _secret_keys[key] = found
    return found


_PLAIN = (int, float, bool, type(None))


def redact_arguments(value: Any) -> Any:
    """A copy of ``value`` with secret-named keys and secret-looking strings masked and escaped."""
    kind = type(value)
    if kind in _PLAIN:  # exact types first: isinstance against the Mapping ABC is slow on the hot path
        return value
    if kind is str:
        return escape_for_prompt(redact(value))
    if kind is dict or isinstance(value, Mapping):
        return {
            k: ("***" if _is_secret_key(k) and v not in (None, "") else redact_arguments(v)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_arguments(v) for v in value]
    if isinstance(value, str):
        return escape_for_prompt(redact(value))
    return value


def _preview(value: Any) -> str:
    """A value as the summary shows it: strings as they are, everything else as JSON."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    return _PREVIEW.encode(value)


def summarize_call(tool: str, input: Mapping[str, Any]) -> str:
    """``"{tool}: {preview}"``, redacted, escaped, whitespace collapsed, at most 200 characters."""
    safe = redact_arguments(input)
    if tool in EXEC_TOOLS:
        preview = next((str(safe[k]) for k in ("cmd", "command", "code", "script") if k in safe), "")
    elif tool == "file_ops":
        path = next((safe[k] for k in ("path", "file_path", "source") if k in safe), "")
        preview = f"operation={safe.get('operation', '')} path={path}"
        if safe.get("destination"):
            preview += f" destination={safe['destination']}"
    elif not safe:
        preview = "(no arguments)"
    else:
        preview = " ".join(f"{k}={_preview(safe[k])}" for k in sorted(safe))
    text = " ".join(f"{tool}: {preview}".split())
    return text if len(text) <= SUMMARY_LIMIT else text[:SUMMARY_LIMIT] + "…"


def allowed_decisions(rule_id: str, caller_is_operator: bool) -> tuple[ApprovalDecision, ...]:
    """What a prompt may offer: "always" only to an operator and never for a floor rule."""
    if caller_is_operator and rule_id not in FLOOR_RULES:
        return (
            ApprovalDecision.ALLOW_ONCE,
            ApprovalDecision.ALLOW_SESSION,
            ApprovalDecision.ALLOW_ALWAYS,
            ApprovalDecision.DENY,
        )
    return ApprovalDecision.ALLOW_ONCE, ApprovalDecision.ALLOW_SESSION, ApprovalDecision.DENY


DenialKind = Literal["user_rejected", "repeated_same_intent", "threshold_exceeded", "timeout", "unreachable"]

HINTS: dict[str, str] = {
    "user_rejected": "The user already declined this exact action this session; do not re-request it — try a "
    "different approach or ask the user directly.",
    "repeated_same_intent": "This exact intent was denied earlier this session and is now auto-refused. Change "
    "the plan rather than repeating the request.",
    "threshold_exceeded": "Too many actions were denied this session, so autonomous escalation is paused. Stop "
    "and let the user decide how to proceed.",
    "timeout": "The approval request for this action expired with no answer — nobody appears to be at the "
    "keyboard. Do not silently retry it; surface the blocker to the user and stop.",
    "already_used": "This approval was given once and was already used by the call it approved; a resumed, "
    "replayed or copied run does not run that call again. Ask the user to approve it anew if it must run again.",
    "unreachable": "This run is unattended (no human is watching it) — interactive approval is unavailable, so "
    "confirm-gated tools are auto-denied. Use a non-interactive approach, or hand back to the user.",
}


@dataclass(slots=True)
class GateOutcome:
    """What the gate decided for one prompt."""

    approved: bool
    outcome: ApprovalOutcome
    by: Literal["User", "Trusted", "Nobody"] = "User"
    deny_reason: str | None = None
    hint: str = ""
    waited_ms: int = 0
    asked: bool = False


@dataclass(frozen=True, slots=True)
class StandingGrant:
    """An "always" approval on file: the exact call it covers and when it was given."""

    fingerprint: str
    tool: str | None = None
    """The tool it was given for (None in a file written before tools were recorded)."""
    summary: str | None = None
    """The redacted call summary the human approved."""
    granted_at: str | None = None
    """ISO 8601 UTC time of the grant."""


@dataclass(slots=True)
class _SessionDenials:
    counts: dict[str, int] = field(default_factory=dict)
    consecutive: int = 0
    open_until: float = 0.0
    probing: bool = False


class ApprovalGate:
    """Grants and denials shared by every scoped service of one runtime. Thread-safe."""

    def __init__(
        self, always_file: Path | None = None, *, timeout: float | None = None, seal: StateSeal | None = None
    ) -> None:
        self.timeout = timeout
        if seal is None and always_file is not None:
            seal = StateSeal(always_file.parent.parent / "ledger" / "keys", "approval-grants")
        self._seal = seal
        """Seals the grants file: one another process edited (or wrote before seals existed) grants nothing."""
        """Seconds a requester may take to answer; None waits as long as it takes."""
        self._lock = threading.Lock()
        self._session_grants: OrderedDict[str, set[str]] = OrderedDict()
        self._denials: OrderedDict[str, _SessionDenials] = OrderedDict()
        self._always_file = always_file
        self._always: dict[str, StandingGrant] = {}
        self._always_seen: tuple[int, int] | None = None
        self._refresh_always()
        self.once = OnceLedger(always_file.with_name("used.sqlite") if always_file is not None else None)
        """One-time answers already spent (see :class:`~aleph._chokepoint._once.OnceLedger`)."""

    # -- grants ---------------------------------------------------------------------------------

    def granted(self, session_key: str | None, fingerprint: str, *, honors_always: bool) -> bool:
        """A standing grant covers this exact call."""
        if honors_always:
            self._refresh_always()
        with self._lock:
            if honors_always and fingerprint in self._always:
                return True
            return bool(session_key) and fingerprint in self._session_grants.get(session_key or "", ())

    def standing_grants(self) -> list[StandingGrant]:
        """The "always" grants on file, oldest first (``aleph approvals list``)."""
        self._refresh_always()
        with self._lock:
            return sorted(self._always.values(), key=lambda g: (g.granted_at or "", g.fingerprint))

    def revoke(self, fingerprints: Iterable[str]) -> list[str]:
        """Remove standing grants by fingerprint; returns the ones that existed (``aleph approvals revoke``)."""
        wanted = set(fingerprints)
        with self._file_lock():
            self._refresh_always()
            with self._lock:
                gone = sorted(fp for fp in wanted if fp in self._always)
                for fp in gone:
                    del self._always[fp]
                snapshot = list(self._always.values())
            if gone:
                self._save_always(snapshot)
        return gone

    def _grant(self, session: str | None, request: ApprovalRequest, outcome: ApprovalOutcome, offered: bool) -> None:
        fingerprint = request.fingerprint
        if outcome is ApprovalOutcome.APPROVED_ALWAYS and offered:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with self._file_lock():
                self._refresh_always()  # another process may have granted or revoked since
                with self._lock:
                    self._always[fingerprint] = StandingGrant(fingerprint, request.tool_name, request.summary, when)
                    snapshot = list(self._always.values())
                self._save_always(snapshot)
        elif outcome in (ApprovalOutcome.APPROVED_FOR_SESSION, ApprovalOutcome.APPROVED_ALWAYS) and session:
            with self._lock:
                self._session_grants.setdefault(session, set()).add(fingerprint)
                self._session_grants.move_to_end(session)
                while len(self._session_grants) > MAX_SESSIONS:
                    self._session_grants.popitem(last=False)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        # Processes sharing a data directory (a CLI revoke beside a running server) read-modify-write in turn.
        if self._always_file is None:
            yield
            return
        try:
            self._always_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._always_file.with_name(self._always_file.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _refresh_always(self) -> None:
        """Re-read the grants file when it changed on disk (a revoke by another process takes effect)."""
        path = self._always_file
        if path is None:
            return
        try:
            st = path.stat()
        except OSError:
            seen = None
        else:
            seen = (st.st_mtime_ns, st.st_size)
        if seen == self._always_seen:
            return
        grants: dict[str, StandingGrant] = {}
        if seen is not None:
            try:
                raw = path.read_bytes()
                if self._seal is not None and not self._seal.matches(str(path), raw):
                    log.warning(
                        "the approval grants file %s was not written by Aleph (its seal does not match); "
                        "its standing approvals are ignored until granted again",
                        path,
                    )
                    raise ValueError("unsealed")
                data = json.loads(raw)
                info = data.get("grants", {})
                for fp in data["fingerprints"]:
                    meta = info.get(fp, {}) if isinstance(info, dict) else {}
                    grants[str(fp)] = StandingGrant(str(fp), meta.get("tool"), meta.get("summary"), meta.get("at"))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                log.warning("ignoring unreadable approval grants file %s", path)
                grants = {}
        with self._lock:
            self._always, self._always_seen = grants, seen

    def _save_always(self, grants: list[StandingGrant]) -> None:
        if self._always_file is None:
            return
        body = {
            "fingerprints": sorted(g.fingerprint for g in grants),
            "grants": {g.fingerprint: {"tool": g.tool, "summary": g.summary, "at": g.granted_at} for g in grants},
        }
        try:
            data = json.dumps(body).encode("utf-8")
            write_atomic(self._always_file, data)
            if self._seal is not None:
                self._seal.record(str(self._always_file), data)
            st = self._always_file.stat()
            with self._lock:
                self._always_seen = (st.st_mtime_ns, st.st_size)
        except OSError:
            log.exception("could not persist an always-grant; it holds for this process only")

    # -- denial breaker -------------------------------------------------------------------------

    def _state(self, session_key: str) -> _SessionDenials:
        state = self._denials.get(session_key)
        if state is None:
            state = self._denials[session_key] = _SessionDenials()
            while len(self._denials) > MAX_SESSIONS:
                self._denials.popitem(last=False)
        return state

    def blocked(self, session_key: str | None, fingerprint: str, now: float | None = None) -> DenialKind | None:
        """Whether the denial memory refuses this call without asking (does not spend the probe)."""
        if not session_key:
            return None
        now = time.monotonic() if now is None else now
        with self._lock:
            state = self._denials.get(session_key)
            if state is None:
                return None
            paused = state.open_until > now or (state.open_until and state.probing)
            if fingerprint in state.counts:
                return "threshold_exceeded" if paused else "repeated_same_intent"
            return "threshold_exceeded" if paused else None

    def _record_denial(self, session_key: str | None, fingerprint: str, now: float) -> None:
        if not session_key:
            return
        with self._lock:
            state = self._state(session_key)
            state.counts[fingerprint] = state.counts.get(fingerprint, 0) + 1
            state.consecutive += 1
            if state.probing or state.consecutive >= BREAKER_THRESHOLD:
                state.open_until = now + BREAKER_COOLDOWN_S
                state.probing = False

    def _record_approval(self, session_key: str | None) -> None:
        if not session_key:
            return
        with self._lock:
            state = self._denials.get(session_key)
            if state is not None:
                state.consecutive = 0
                state.open_until = 0.0
                state.probing = False

    def _take_probe(self, session_key: str | None, now: float) -> None:
        if not session_key:
            return
        with self._lock:
            state = self._denials.get(session_key)
            if state is not None and state.open_until and state.open_until <= now:
                state.probing = True  # exactly one call goes through after the cool-down

    # -- the whole confirmation -----------------------------------------------------------------

    async def confirm(
        self,
        requester: ApprovalRequester | None,
        request: ApprovalRequest,
        *,
        session_key: str | None,
        unattended: bool,
        now: float | None = None,
    ) -> GateOutcome:
        """Ask (or not) about ``request``, in the reference order: unattended → grants → denials → ask."""
        if unattended:
            return GateOutcome(False, ApprovalOutcome.UNAVAILABLE, "Nobody", hint=HINTS["unreachable"])
        honors_always = ApprovalDecision.ALLOW_ALWAYS in request.allowed_decisions
        if self.granted(session_key, request.fingerprint, honors_always=honors_always):
            return GateOutcome(True, ApprovalOutcome.APPROVED_FOR_SESSION, "Trusted")
        now = time.monotonic() if now is None else now
        blocked = self.blocked(session_key, request.fingerprint, now)
        if blocked is not None:
            return GateOutcome(False, ApprovalOutcome.DENIED, "Trusted", hint=HINTS[blocked])
        if requester is None:
            return GateOutcome(False, ApprovalOutcome.UNAVAILABLE, "Nobody", hint="")
        self._take_probe(session_key, now)
        started = time.monotonic()
        try:
            response = await asyncio.wait_for(requester.request_approval(request), self.timeout)
        except ApprovalRequired:
            raise  # deferred: the caller suspends the call and resumes it with an answer
        except TimeoutError:
            response = ApprovalResponse(ApprovalOutcome.TIMEOUT, f"nobody answered within {self.timeout:g} s")
        except Exception as exc:
            log.exception("approval requester failed")
            response = ApprovalResponse(ApprovalOutcome.UNAVAILABLE, f"the approval channel failed: {exc}")
        waited = int((time.monotonic() - started) * 1000)
        answer: Any = response  # requesters are third-party code: check the shape they really returned
        said: Any = getattr(answer, "outcome", None)
        if not isinstance(answer, ApprovalResponse) or not isinstance(said, ApprovalOutcome):
            # A requester that answers in another shape is broken: never an approval, never a human's no.
            what = repr(said) if isinstance(answer, ApprovalResponse) else type(answer).__name__
            why = f"the approval channel gave a malformed answer ({what}, not an ApprovalResponse); refused"
            log.error("approval requester %r: %s", type(requester).__name__, why)
            return GateOutcome(False, ApprovalOutcome.DENIED, "Nobody", why, why, waited, True)
        outcome = response.outcome
        # A carried answer is spent once whatever it approved: a session or standing grant it made lives on in
        # the gate itself (and covers later calls before any requester is asked), never in the replayed answer.
        if outcome.is_approved and response.once_id is not None:
            # Recorded before the call runs, so two resumes racing from one saved state run it at most once.
            if not await asyncio.to_thread(self.once.consume, response.once_id):
                why = "this one-time approval was already used"
                return GateOutcome(False, ApprovalOutcome.UNAVAILABLE, "Nobody", why, HINTS["already_used"], waited)
        if outcome.is_approved:
            self._grant(session_key, request, outcome, honors_always)
            self._record_approval(session_key)
            return GateOutcome(True, outcome, "User", waited_ms=waited, asked=True)
        if outcome is ApprovalOutcome.DENIED:
            self._record_denial(session_key, request.fingerprint, now)
            return GateOutcome(False, outcome, "User", response.deny_reason, HINTS["user_rejected"], waited, True)
        if outcome is ApprovalOutcome.TIMEOUT:
            return GateOutcome(False, outcome, "Nobody", response.deny_reason, HINTS["timeout"], waited, True)
        why = f" ({response.deny_reason})" if response.deny_reason else ""
        hint = f"Nobody could be asked to approve this call{why}; it can only run where a human can approve it."
        return GateOutcome(False, outcome, "Nobody", response.deny_reason, hint, waited, True)
