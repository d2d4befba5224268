"""What the chokepoint records about a call: signed ledger rows and session events.

A mutating call is answered only once its ledger row is durable ("acknowledged means recorded"). While
the ledger cannot record, ``[ledger] on_failure = "refuse"`` (the default) refuses mutating calls before
they run and turns the answer of one that ran unrecorded into an error saying so; ``"continue"`` lets
them run with a warning in the result. A failing event log is logged and the call goes on.
Every value recorded comes from the call's boundary-checked, validated arguments (plain JSON data), and
the row builder cannot raise on them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._call import _CALL, CallContext
from aleph._chokepoint._callprint import NATIVE_PRINT, PRINTER, summary_and_fingerprint
from aleph._chokepoint._gate import grant_fingerprint, redact, summarize_call
from aleph._chokepoint._telemetry import _SPAN, ledger_row_sink
from aleph._contract._types import dumps_json
from aleph._errors import ExecutionFailed
from aleph._ledger import Ledger, LedgerRecord
from aleph._ledger._durability import UnrecordedCall

if TYPE_CHECKING:
    from aleph._chokepoint._roles import Stores
    from aleph._chokepoint._verdict import Verdict
    from aleph._contract._registry import RegisteredTool
    from aleph._contract._types import ToolOutput
    from aleph._ledger import LedgerAction, LedgerOutcome
    from aleph._ledger._events import EventKind
    from aleph._principal import Principal
    from aleph._turn import TurnContext

__all__ = ["LATER", "Recording"]

LATER = object()
"""What :meth:`Recording._record_now` returns when the row needs the awaited path."""

log = logging.getLogger("aleph")


def _safe_summary(tool: str, arguments: Mapping[str, Any]) -> str:
    try:
        return summarize_call(tool, arguments)
    except Exception as exc:  # the row is written even when its summary cannot be
        return f"{tool}: (arguments not summarised: {type(exc).__name__})"


def _summary_and_fingerprint(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str | None]:
    """The row's summary and ``args_fp`` of a call that ran (one pass over the arguments); never raises."""
    try:
        return summary_and_fingerprint(tool, arguments)
    except Exception:  # one of them cannot be made: each on its own, as the other rows do it
        return _safe_summary(tool, arguments), _safe_fingerprint(tool, arguments)


def principal_field(principal: Principal) -> str:
    """The ledger's ``principal`` field: the principal and its whole chain as canonical JSON.

    Compact (unset fields and an empty chain left out), so a long chain does not swell every row.
    """
    return dumps_json(_compact(principal))


def _compact(principal: Principal) -> dict[str, Any]:
    out: dict[str, Any] = {"agent": principal.agent, "role": principal.role}
    for key in ("channel", "session", "user"):
        value = getattr(principal, key)
        if value:
            out[key] = value
    if principal.chain:
        out["chain"] = [_compact(p) for p in principal.chain]
    return out


def _safe_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str | None:
    try:
        return grant_fingerprint(tool, arguments)
    except Exception:
        return None


class Recording:
    """The recording half of :class:`~aleph.ScopedToolService` (a mixin: it reads the service's fields)."""

    agent: str | None
    turn: TurnContext | None
    principal: Principal
    _ptext: tuple[Principal, str] | None = None

    if TYPE_CHECKING:  # the service's chokepoint, read-only here: only its stores are used

        @property
        def _cp(self) -> Stores: ...

    def _agent_id(self) -> str:
        return self.agent or "default"

    def _principal_text(self) -> str:
        """:func:`principal_field` of this service's principal, computed once per principal."""
        cached = self._ptext
        if cached is not None and cached[0] is self.principal:
            return cached[1]
        text = principal_field(self.principal)
        self._ptext = (self.principal, text)
        return text

    async def _record_refusal(
        self, entry: RegisteredTool, arguments: Mapping[str, Any], reason: str, verdict: Verdict
    ) -> None:
        await self._ledger(entry, arguments, "tool_denied", "denied", redact(reason), verdict.rule or verdict.rule_id)
        self._event("refused", entry.name, reason)

    async def _record_role_refusal(self, entry: RegisteredTool, input: Mapping[str, Any], reason: str) -> None:
        """A refusal by role: decided on the tool's facts before its input is looked at (none is recorded)."""
        del input  # not validated yet: the row records the refusal, not the arguments
        await self._ledger(entry, {}, "tool_denied", "denied", redact(reason), "requires_role")
        self._event("refused", entry.name, reason)

    async def _record_execution(
        self,
        entry: RegisteredTool,
        arguments: Mapping[str, Any],
        outcome: LedgerOutcome,
        detail: str,
        refs: Mapping[str, str] | None = None,
    ) -> str | None:
        """Record a call that ran; returns None once its row is durable, else why it is not recorded."""
        ledger = self._cp.ledger
        if ledger is None and (self._cp.events is None or self.turn is None or not self.turn.session_key):
            return None  # nothing records: skip building the summary on the hot path
        unrecorded = None
        if ledger is not None:
            # The row is written on this thread before the answer (see aleph._ledger): build it here, once.
            summary, args_fp = _summary_and_fingerprint(entry.name, arguments)
            agent = self._agent_id()
            record = LedgerRecord(
                agent_id=agent,
                action="tool_call",
                target=entry.name,
                outcome=outcome,
                detail=f"{summary} — {redact(detail)}" if detail else summary,
                args_fp=args_fp,
                principal=self._principal_text(),
                refs=refs or None,
            )
            on_row = ledger_row_sink(agent)  # only while a span is open
            try:  # appended here rather than through _ledger: one coroutine less on every mutating call
                if on_row is None:
                    unrecorded = await ledger.append(record, durable=True)
                else:
                    unrecorded = await ledger.append(record, durable=True, on_row=on_row)
            except Exception as exc:
                log.exception("ledger append failed")
                unrecorded = f"the ledger failed: {type(exc).__name__}"
        if self._cp.events is not None:  # redacting costs two regex passes: only for a log that keeps it
            self._event("executed" if outcome == "ok" else "failed", entry.name, redact(detail))
        return unrecorded

    def _record_cancelled(self, entry: RegisteredTool, arguments: Mapping[str, Any], refs: Mapping[str, str]) -> None:
        """A call cancelled while it ran (its client went away, a framework gave up): it gets its row.

        The tool had started, so its effect may have happened (a thread keeps running, a child process
        has already acted); without a row, starting a call and cancelling it at once left no trace. The
        row is queued without an await: the task is being cancelled, and an await could be cancelled too.
        """
        why = "cancelled while it ran; its effect may have happened"
        ledger = self._cp.ledger
        if ledger is not None:
            try:
                summary, args_fp = _summary_and_fingerprint(entry.name, arguments)
                record = LedgerRecord(
                    agent_id=self._agent_id(),
                    action="tool_call",
                    target=entry.name,
                    outcome="error",
                    detail=f"{summary} — {why}",
                    args_fp=args_fp,
                    principal=self._principal_text(),
                    refs=refs or None,
                )
                ledger.append_nowait(record)
            except Exception:
                log.exception("ledger append failed")
        if self._cp.events is not None:
            self._event("failed", entry.name, why)

    def _record_now(
        self, entry: RegisteredTool, arguments: Mapping[str, Any], outcome: LedgerOutcome, detail: str, refs: Any
    ) -> str | object | None:
        """:meth:`_record_execution` without an ``await`` when it needs none; :data:`LATER` when it does.

        The default ledger (``sync = "write"``) writes the row on this thread and returns once it is written,
        so the common mutating call (no refs, no open span) records it with one plain call: no coroutine,
        no :class:`LedgerRecord`. The row is the same; only the way to it is shorter.
        """
        cp = self._cp
        ledger = cp.ledger
        # Core's own Ledger only (any other object with the ledger's methods takes the awaited path).
        if refs or type(ledger) is not Ledger or ledger.sync != "write" or _SPAN.get() is not None:
            return LATER
        name, agent = entry.name, self.agent or "default"
        unrecorded: str | None = None
        # A call that ran, its arguments a flat object: summary, fingerprint and row in one native call.
        if (
            detail
            or outcome != "ok"
            or NATIVE_PRINT is None
            or name in NATIVE_PRINT
            or not ledger.write_call(agent, name, arguments, self._principal_text(), PRINTER)
        ):
            args_fp: str | None
            try:  # _summary_and_fingerprint's work without its frame (this runs on every mutating call)
                summary, args_fp = summary_and_fingerprint(name, arguments)
            except Exception:
                summary, args_fp = _summary_and_fingerprint(name, arguments)
            try:
                unrecorded = ledger.write_row(
                    agent,
                    "tool_call",
                    name,
                    outcome,
                    f"{summary} — {redact(detail)}" if detail else summary,
                    args_fp,
                    self._principal_text(),
                )
            except Exception as exc:
                log.exception("ledger append failed")
                unrecorded = f"the ledger failed: {type(exc).__name__}"
        if cp.events is not None:
            self._event("executed" if outcome == "ok" else "failed", entry.name, redact(detail))
        return unrecorded

    def _records_anything(self) -> bool:
        """Whether a call's record goes anywhere: a ledger, or the event log of a session."""
        cp, turn = self._cp, self.turn
        return cp.ledger is not None or (cp.events is not None and turn is not None and bool(turn.session_key))

    def _ledger_known_ready(self) -> bool:
        """True when no check is needed before a mutating call: no ledger, or one known able to record now.

        Without I/O or an await (the check every mutating call makes); anything else goes to :meth:`_ledger_ready`.
        """
        ledger = self._cp.ledger
        if ledger is None:
            return True
        if type(ledger) is Ledger:
            return ledger.can_record(self.agent or "default")
        can_record = getattr(ledger, "can_record", None)
        return can_record is not None and can_record(self._agent_id())

    async def _ledger_ready(self, name: str) -> None:
        """Refuse a mutating call before it runs while the ledger cannot record it (``on_failure = "refuse"``)."""
        ready = getattr(self._cp.ledger, "ready", None)
        if ready is None or getattr(self._cp.ledger, "on_failure", "refuse") != "refuse":
            return
        problem = await ready(self._agent_id())
        if problem is not None:
            raise ExecutionFailed(
                name,
                f"not run: the audit ledger cannot record it: {problem}. Calls that change something are refused "
                "until the ledger can record again; read-only tools still work. Run `aleph doctor`.",
            )

    def _acknowledge(self, name: str, output: ToolOutput, unrecorded: str | None) -> None:
        """Answer a call that ran only if its row is durable; otherwise say it ran unrecorded."""
        if unrecorded is None:
            return
        if getattr(self._cp.ledger, "on_failure", "refuse") == "refuse":
            raise UnrecordedCall(
                name,
                f"it ran and its effect is real, but the audit ledger could not record it: {unrecorded}. "
                "Do not run it again: check its effect instead. Calls that change something are refused until "
                "the ledger can record again; run `aleph doctor`.",
            )
        output.metadata.setdefault("warnings", []).append(f"this call ran but is not in the audit ledger: {unrecorded}")

    async def _record_approval(
        self,
        entry: RegisteredTool,
        arguments: Mapping[str, Any],
        verdict: Verdict,
        approved: bool,
        by: str,
        outcome: str,
        reason: str | None,
    ) -> None:
        if approved:
            detail = "approved by the user" if by == "User" else "satisfied by an earlier grant for this exact call"
        else:
            detail = redact(reason or f"not approved ({outcome})")
        if verdict.rule_id == "data_flow":  # the row says which flow a human let through or stopped
            detail = f"{detail} — {redact(verdict.reason)}"
        await self._ledger(
            entry,
            arguments,
            "approval_granted" if approved else "approval_denied",
            "ok" if approved else "denied",
            f"{detail} [gate: {verdict.rule_id}]",
            verdict.rule_id,
        )
        self._event("approved" if approved else "denied", entry.name, detail, by=by)

    async def _ledger(
        self,
        entry: RegisteredTool,
        arguments: Mapping[str, Any],
        action: LedgerAction,
        outcome: LedgerOutcome,
        detail: str,
        rule: str | None,
        refs: Mapping[str, str] | None = None,
        *,
        durable: bool = False,
        on_row: Callable[[int], None] | None = None,
    ) -> str | None:
        ledger = self._cp.ledger
        if ledger is None:
            return None
        if refs is None:
            parent = _CALL.get()  # a refused or approved action of a composite call names its parent
            refs = {"parent_call": parent.call_id} if parent is not None else None
        record = LedgerRecord(
            agent_id=self._agent_id(),
            action=action,
            target=entry.name,
            outcome=outcome,
            detail=detail,
            args_fp=_safe_fingerprint(entry.name, arguments),
            principal=self._principal_text(),
            rule=rule,
            refs=refs or None,
        )
        try:
            if not durable:
                return await ledger.append(record)
            extra = {"on_row": on_row} if on_row is not None else {}
            return await ledger.append(record, durable=True, **extra)
        except Exception as exc:
            log.exception("ledger append failed")
            return f"the ledger failed: {type(exc).__name__}"

    async def record_event(self, call: CallContext, event: str, detail: str, refs: Mapping[str, str]) -> None:
        """Append a ``tool_event`` row for ``call`` (see :meth:`aleph.CallContext.record`); never raises."""
        ledger = self._cp.ledger
        if ledger is not None:
            try:
                await ledger.append(
                    LedgerRecord(
                        agent_id=self._agent_id(),
                        action="tool_event",
                        target=call.tool,
                        outcome="ok",
                        detail=redact(detail),
                        principal=self._principal_text(),
                        refs={**call.refs, "call": call.call_id, **refs},
                    )
                )
            except Exception:
                log.exception("ledger append failed; the call's result is unchanged")
        self._event("executed", call.tool, redact(f"{event}: {detail}" if detail else event))

    def _event(self, kind: EventKind, tool: str, detail: str, by: str | None = None) -> None:
        events = self._cp.events
        if events is None or self.turn is None or not self.turn.session_key:
            return
        try:
            events.record(
                self.turn.session_key,
                kind,
                tool,
                call_id=self.turn.call_id,
                turn_id=self.turn.run_id or None,
                detail=detail,
                by=by,
                principal=self._principal_text(),
            )
        except Exception:
            log.exception("event log write failed; the call's result is unchanged")
