"""What the chokepoint records about a call: signed ledger rows and session events.

Recording never changes a call's result: a failing ledger or event log is logged and the call goes on.
Every value recorded comes from the call's boundary-checked, validated arguments (plain JSON data), and
the row builder cannot raise on them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._call import _CALL, CallContext
from aleph._chokepoint._gate import grant_fingerprint, redact, summarize_call
from aleph._contract._types import dumps_json, is_flat_json
from aleph._ledger import LedgerRecord

if TYPE_CHECKING:
    from aleph._chokepoint._shared import Chokepoint
    from aleph._chokepoint._verdict import Verdict
    from aleph._contract._registry import RegisteredTool
    from aleph._ledger import LedgerAction, LedgerOutcome
    from aleph._ledger._events import EventKind
    from aleph._principal import Principal
    from aleph._turn import TurnContext

__all__ = ["Recording"]

log = logging.getLogger("aleph")


def _safe_summary(tool: str, arguments: Mapping[str, Any]) -> str:
    try:
        return summarize_call(tool, arguments)
    except Exception as exc:  # the row is written even when its summary cannot be
        return f"{tool}: (arguments not summarised: {type(exc).__name__})"


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

    _cp: Chokepoint
    agent: str | None
    turn: TurnContext | None
    principal: Principal
    _ptext: tuple[Principal, str] | None = None

    def _principal_text(self) -> str:
        """:func:`principal_field` of this service's principal, computed once per principal."""
        cached = self._ptext
        if cached is not None and cached[0] is self.principal:
            return cached[1]
        text = principal_field(self.principal)
        self._ptext = (self.principal, text)
        return text

    def _agent_id(self) -> str:
        return self.agent or "default"

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
    ) -> None:
        ledger = self._cp.ledger
        if ledger is None and (self._cp.events is None or self.turn is None or not self.turn.session_key):
            return  # nothing records: skip building the summary on the hot path
        append_later = getattr(ledger, "append_later", None)
        if append_later is not None and len(arguments) <= 64 and is_flat_json(arguments):
            # Flat arguments are already a private copy (the boundary made it): the writer thread builds
            # the row (summary, fingerprint) from them, off the caller's path.
            name, agent = entry.name, self._agent_id()
            principal = self._principal_text()

            def build() -> LedgerRecord:
                summary = _safe_summary(name, arguments)
                return LedgerRecord(
                    agent_id=agent,
                    action="tool_call",
                    target=name,
                    outcome=outcome,
                    detail=f"{summary} — {redact(detail)}" if detail else summary,
                    args_fp=_safe_fingerprint(name, arguments),
                    principal=principal,
                    refs=refs or None,
                )

            try:
                await append_later(agent, build)
            except Exception:
                log.exception("ledger append failed; the call's result is unchanged")
        else:
            summary = _safe_summary(entry.name, arguments)
            await self._ledger(
                entry,
                arguments,
                "tool_call",
                outcome,
                f"{summary} — {redact(detail)}" if detail else summary,
                None,
                refs,
            )
        self._event("executed" if outcome == "ok" else "failed", entry.name, redact(detail))

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
    ) -> None:
        ledger = self._cp.ledger
        if ledger is None:
            return
        if refs is None:
            parent = _CALL.get()  # a refused or approved action of a composite call names its parent
            refs = {"parent_call": parent.call_id} if parent is not None else None
        try:
            await ledger.append(
                LedgerRecord(
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
            )
        except Exception:
            log.exception("ledger append failed; the call's result is unchanged")

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
