"""ScopedToolService: the one permission chokepoint every tool call of every source passes.

Order for ``execute``: canonical name → allow-set → input bounds → verdict (policy, tier, floors,
command policy, plugin votes) → deny (recorded) or ask (approval gate) → run inside the turn
context with a wall-clock budget, cancellation and one retry for idempotent tools → record
(ledger for refusals, approvals and mutating calls; session event log) → bound the output.
A service is cheap to build: everything that depends only on the registry generation and the
policy is computed once and shared through :class:`Chokepoint`.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._approval import ApprovalOutcome, ApprovalRequest, ApprovalRequester
from aleph._chokepoint._call import _CALL
from aleph._chokepoint._callguard import CallGuard, guard_for
from aleph._chokepoint._gate import (
    allowed_decisions,
    escape_for_prompt,
    summarize_call,
)
from aleph._chokepoint._judge import Judging, prepare_input
from aleph._chokepoint._permissions import PermissionPolicy
from aleph._chokepoint._recording import LATER, Recording
from aleph._chokepoint._refusal import Refusal
from aleph._chokepoint._secrets import Substitution
from aleph._chokepoint._shared import Chokepoint, CommandChecker, CommandSplitter, DefinitionRewriter, Explanation
from aleph._chokepoint._synccore import DEFAULT_BUDGET_MS, RETRY_DELAY_S, HotMemo, Resumed, SyncCore, mapped_error
from aleph._chokepoint._telemetry import enabled as telemetry_enabled
from aleph._chokepoint._telemetry import note_approval, traced_execute
from aleph._chokepoint._tiers import ExecTier
from aleph._chokepoint._verdict import Verdict
from aleph._chokepoint._who import Identity, bound_role, principal_for
from aleph._contract._registry import RegisteredTool, fold_tool_name
from aleph._contract._service import BaseToolService, panic_error
from aleph._contract._tool import Prepared
from aleph._contract._types import ToolDefinition, ToolOutput
from aleph._errors import (
    ApprovalDenied,
    ApprovalExpired,
    ApprovalUnavailable,
    Cancelled,
    PermissionDenied,
    ToolError,
    ToolTimeout,
    ValidationFailed,
)
from aleph._flow._gate import Provenance
from aleph._human import HumanChannel
from aleph._principal import Principal
from aleph._turn import _TURN, TurnContext
from aleph._watchdog import run_with_budget

if TYPE_CHECKING:
    pass

__all__ = ["Chokepoint", "CommandChecker", "CommandSplitter", "DefinitionRewriter", "Explanation", "ScopedToolService"]

log = logging.getLogger("aleph")

_NUMBERS = (bool, int, float)


class _Unset:
    """The type of "leave this field as it is" in :meth:`ScopedToolService.derive`."""


_UNSET = _Unset()


class ScopedToolService(SyncCore, Identity, Judging, Recording, Provenance, BaseToolService):
    """The per-request tool service: one principal (agent, channel, session, role, chain), one turn, one tier."""

    def __init__(
        self,
        chokepoint: Chokepoint,
        *,
        policy: PermissionPolicy | None = None,
        tier: ExecTier = ExecTier.AUTO,
        agent: str | None = None,
        channel: str | None = None,
        turn: TurnContext | None = None,
        requester: ApprovalRequester | None = None,
        allowed: frozenset[str] | None = None,
        rewriters: Sequence[DefinitionRewriter] = (),
        deferred: Any = None,
        extra_tools: Mapping[str, RegisteredTool] | None = None,
        principal: Principal | None = None,
        human: HumanChannel | None = None,
    ) -> None:
        self._cp = chokepoint
        self.principal = principal if principal is not None else principal_for(agent, channel, turn)
        """Who is calling: fixed for the service's life (a new turn may name its session, nothing else)."""
        self.policy = policy if policy is not None else PermissionPolicy([])
        self.tier = tier
        self.agent = agent
        self.channel = channel
        self.turn = turn
        self.requester = requester if requester is not None else chokepoint.default_requester
        self.human = human
        """The channel to the person this request came from (see :meth:`aleph.CallContext.ask_human`)."""
        self.allowed = allowed
        self.rewriters = tuple(rewriters)
        self.deferred = deferred
        self.extra_tools = dict(extra_tools or {})
        self._hot = HotMemo()
        self._scope: str | None = None

    def derive(
        self,
        *,
        turn: TurnContext | _Unset | None = _UNSET,
        requester: ApprovalRequester | _Unset | None = _UNSET,
        human: HumanChannel | _Unset | None = _UNSET,
    ) -> ScopedToolService:
        """The same service (principal, policy, tier, allow-set, discovery) for another turn, requester or human.

        Framework integrations build one per tool call: the turn carries the framework's session key and
        call id, the requester the framework's own approval answer. Cheap: nothing is recomputed. The
        principal stays; a turn naming another session moves it to that session only if the session is
        unused or the principal's own (:class:`~aleph.PermissionDenied` otherwise).
        """
        clone = object.__new__(type(self))  # copy.copy's reduce protocol costs ~5x this on every framework call
        clone.__dict__.update(self.__dict__)
        if not isinstance(turn, _Unset):
            principal, turn = bound_role(self.principal, turn)  # the new turn never lifts the caller's role
            if principal is not self.principal:
                clone.principal, clone._scope = principal, None
            clone.turn = turn
            session = turn.session_key if turn is not None else ""
            if session and session != self.principal.session:
                if not self.claim_session(session):
                    raise PermissionDenied("session", f"session {session!r} belongs to another agent")
                clone.principal = dataclasses.replace(clone.principal, session=session)
                clone._scope = None
        if not isinstance(requester, _Unset):
            clone.requester = requester
        if not isinstance(human, _Unset):
            clone.human = human
        return clone

    # -- resolution and gating shared by every method --------------------------------------------

    def _entry(self, name: str) -> RegisteredTool | None:
        if self.extra_tools:
            hit = self.extra_tools.get(name)
            if hit is not None:
                return hit
        return self._cp.registry.get(name)

    def _is_allowed(self, name: str) -> bool:
        # An explicit allow-set lists everything callable, the discovery tools included: [] is nothing.
        return self.allowed is None or name in self.allowed or fold_tool_name(name) in self.allowed

    def _visible(self, entry: RegisteredTool) -> bool:
        """Listed exactly when some call of the tool could be allowed (or asked about)."""
        if not self._is_allowed(entry.name) or (entry.facts.requires_role and self._role_refusal(entry)):
            return False
        verdict, _ = self._cp.static_verdict(self.policy, self.tier, entry, self.turn)
        if verdict.action != "deny":
            return True
        return verdict.rule_id == "policy_deny" and self.policy.allowing_rules(entry.name, entry.source) is not None

    def _shown(self, entry: RegisteredTool) -> ToolDefinition:
        """The definition as this caller sees it: a tool allowed only for some arguments says which."""
        definition = entry.definition
        verdict, _ = self._cp.static_verdict(self.policy, self.tier, entry, self.turn)
        if verdict.action == "deny":
            rules = self.policy.allowing_rules(entry.name, entry.source) or []
            note = f" Only calls matching these permission rules are allowed: {', '.join(rules)}."
            definition = dataclasses.replace(definition, description=definition.description + note)
        return self._rewrite(definition)

    def _is_deferred(self, name: str) -> bool:
        return self.deferred is not None and name in self.deferred

    def _rewrite(self, definition: ToolDefinition) -> ToolDefinition:
        for rewriter in self.rewriters:
            definition = rewriter(definition)
        return definition

    def _entries(self) -> builtins.list[RegisteredTool]:
        entries = {entry.name: entry for entry in self._cp.registry}
        entries.update(self.extra_tools)
        return [entries[name] for name in sorted(entries)]

    def _list_key(self, kind: str) -> tuple[Any, ...]:
        plan = self.turn is not None and (self.turn.plan_mode or self.turn.side_question)
        deferred_gen = getattr(self.deferred, "generation", None) if self.deferred is not None else None
        return (
            kind,
            self.policy.token,
            int(self.tier),
            plan,
            self.allowed,
            self.principal.role,
            self._cp.registry.generation,
            deferred_gen,
            self.deferred,
            self.rewriters,
            tuple(sorted(self.extra_tools)),
        )

    # -- the ToolService surface -----------------------------------------------------------------

    async def list(self) -> builtins.list[ToolDefinition]:
        """Tools offered this turn: allowed, not denied, not deferred; rewriters applied last."""
        return list(self._cached_list())

    def _cached_list(self) -> tuple[ToolDefinition, ...]:
        key = self._list_key("list")
        hit = self._cp._lists.get(key)
        if hit is None:
            if len(self._cp._lists) > 256:
                self._cp._lists.clear()
            hit = tuple(self._shown(e) for e in self._entries() if self._visible(e) and not self._is_deferred(e.name))
            self._cp._lists[key] = hit
        return hit

    async def describe(self, name: str) -> ToolDefinition | None:
        """The definition of ``name`` if this caller may see it (deferred tools are describable)."""
        entry = self._entry(name)
        if entry is None or not self._visible(entry):
            return None
        return self._shown(entry)

    async def dispatchable_list(self) -> builtins.list[ToolDefinition]:
        """Everything callable: the listed tools plus deferred ones that pass the gates."""
        return self._dispatchable()

    def _dispatchable(self) -> builtins.list[ToolDefinition]:
        listed = list(self._cached_list())
        if self.deferred is None:
            return listed
        extra = [self._shown(e) for e in self._entries() if self._is_deferred(e.name) and self._visible(e)]
        return sorted(listed + extra, key=lambda d: d.name)

    async def dispatcher_schema(self) -> builtins.list[dict[str, Any]]:
        """Provider-facing function definitions; the same object until something relevant changes."""
        key = self._list_key("schema")
        hit = self._cp._lists.get(key)
        if hit is None:
            hit = [d.to_function() for d in self._cached_list()]
            self._cp._lists[key] = hit
        return hit

    async def execute(self, name: str, input: Mapping[str, Any], *, cancel: asyncio.Event | None = None) -> ToolOutput:
        """Run ``name`` through every gate; raises a :class:`ToolError` with advice for the model."""
        if telemetry_enabled():  # an OpenTelemetry SDK is configured: the same call inside a span
            return await traced_execute(self, name, input, cancel, self._untraced)
        turn = self.turn  # a guard when the turn carries a budget or an idempotency key (guard_for, inlined)
        guard = (
            CallGuard(self)
            if turn is not None and (turn.budget is not None or turn.idempotency_key is not None)
            else None
        )
        try:
            entry, prepared, verdict = self._judge(name, input)  # the synchronous core decides
        except Refusal as refusal:
            await refusal.record()
            raise refusal.error from None
        if guard is None and verdict.action == "allow":  # the common call: nothing to look up or ask
            return await self._run(entry, prepared, cancel)
        return await self._proceed(entry, prepared, verdict, guard, cancel)

    async def _untraced(self, name: str, input: Mapping[str, Any], cancel: asyncio.Event | None) -> ToolOutput:
        guard = guard_for(self)  # the turn's budget and idempotency key, when it carries either
        try:
            entry, prepared, verdict = self._judge(name, input)  # the synchronous core decides
        except Refusal as refusal:
            await refusal.record()
            raise refusal.error from None
        return await self._proceed(entry, prepared, verdict, guard, cancel)

    async def _proceed(
        self,
        entry: RegisteredTool,
        prepared: Prepared,
        verdict: Verdict,
        guard: CallGuard | None,
        cancel: asyncio.Event | None,
    ) -> ToolOutput:
        """A judged call: the guard's look-up and charge, a person asked if the verdict says so, then the run."""
        if guard is not None:
            await guard.admit(entry, prepared)  # a replay or a budget refusal comes before any human is asked
        if verdict.action == "ask" and (guard is None or guard.replay is None):
            await self._approve(entry, prepared.arguments, verdict)
        if guard is not None:
            return await guard.run(entry, prepared, cancel, verdict.action)
        return await self._run(entry, prepared, cancel, verdict.action)

    async def authorize(self, name: str, input: Mapping[str, Any]) -> None:
        """Pass every gate for a call (asking a human if it must) without running it; raises like ``execute``.

        A tool uses it (through :meth:`aleph.CallContext.authorize`) for a step it performs itself
        that must meet the same rules as the call that started it, such as each redirect hop of a fetch.
        """
        try:
            entry, prepared, verdict = self._judge(name, input)
        except Refusal as refusal:
            await refusal.record()
            raise refusal.error from None
        if verdict.action == "ask":
            await self._approve(entry, prepared.arguments, verdict)

    def decision_for(self, name: str, input: Mapping[str, Any]) -> str:
        """The decision (``allow``/``ask``/``deny``) for a call of ``name`` with ``input``; nothing is asked or run."""
        entry = self._entry(name) if isinstance(name, str) else None
        if entry is None or not self._is_allowed(entry.name) or self._role_refusal(entry):
            return "deny"
        return self.decide(entry, input)

    def decision_by_name(self, name: str) -> str | None:
        """The decision for every call of ``name`` when no input can change it, else ``None``.

        ``allow``/``ask``/``deny`` when the verdict depends on the tool's name alone (no argument rule,
        argument floor, command policy or plugin vote applies to it); ``None`` when the arguments decide
        (use :meth:`decision_for` per call). A framework that must know before a call whether it will ask
        uses it to skip that question for tools that never ask. It holds for this service's policy and
        registry now: :meth:`execute` still judges every call, so a stale answer can only make a call that
        now needs a human refuse instead of run.
        """
        entry = self._entry(name) if isinstance(name, str) else None
        if entry is None or not self._is_allowed(entry.name) or self._role_refusal(entry):
            return "deny"
        return self._by_name(entry, self._cp.static_verdict(self.policy, self.tier, entry, self.turn))

    # -- approval ---------------------------------------------------------------------------------

    async def _approve(self, entry: RegisteredTool, input: Mapping[str, Any], verdict: Verdict) -> None:
        name = entry.name
        operator = self.principal.is_operator()
        fp = self._approval_print(name, input, entry)
        request = ApprovalRequest(
            tool_name=name,
            summary=self._who_asks(summarize_call(name, input)),
            reason=escape_for_prompt(verdict.reason),
            rule_id=verdict.rule_id,
            allowed_decisions=allowed_decisions(verdict.rule_id, operator),
            fingerprint=fp,
            arguments=_redacted(input),
            turn=self.turn,
        )
        session = self._grant_scope()
        unattended = self.turn is not None and self.turn.unattended
        if self.requester is None and not unattended:
            cause = f"{verdict.reason} No approval channel is available, so it cannot be authorized here. Do not retry."
            await self._record_refusal(entry, input, cause, verdict)
            raise ApprovalUnavailable(name, cause)
        outcome = await self._cp.gate.confirm(self.requester, request, session_key=session, unattended=unattended)
        note_approval(outcome.outcome.value, outcome.by, outcome.approved, outcome.waited_ms, outcome.asked)
        await self._record_approval(
            entry, input, verdict, outcome.approved, outcome.by, outcome.outcome.value, outcome.deny_reason
        )
        if outcome.approved:
            return
        if outcome.outcome is ApprovalOutcome.TIMEOUT:
            raise ApprovalExpired(name, outcome.waited_ms)
        hint = f" {outcome.hint}" if outcome.hint else ""
        advice = (
            " Do not retry this call, do not rewrite it, and do not attempt to achieve the same result by other "
            f"means.{hint} Ask the user what they would like to do instead."
        )
        if outcome.by == "User":
            said = f' The user said: "{escape_for_prompt(outcome.deny_reason)}".' if outcome.deny_reason else ""
            lead = f"the user did not approve running `{name}` ({outcome.outcome.value})."
            raise ApprovalDenied(name, f"{lead}{said}{advice}")
        if outcome.outcome is ApprovalOutcome.DENIED:  # an earlier denial, the breaker, or a broken channel
            why = (
                escape_for_prompt(outcome.deny_reason) if outcome.deny_reason else "it was refused without asking again"
            )
            raise ApprovalDenied(name, f"running `{name}` was not approved: {why}.{advice}")
        raise ApprovalUnavailable(
            name, f"running `{name}` was not authorized — nobody was asked ({outcome.outcome.value}).{advice}"
        )

    # -- running ----------------------------------------------------------------------------------

    async def _run(
        self, entry: RegisteredTool, prepared: Prepared, cancel: asyncio.Event | None, action: str = "allow"
    ) -> ToolOutput:
        name = entry.name
        facts = entry.facts
        budget_ms = facts.max_duration_ms or DEFAULT_BUDGET_MS
        if not facts.idempotent and not self._ledger_known_ready():
            await self._ledger_ready(name)
        run = self._open(entry, prepared, action)
        try:
            try:
                try:
                    work = self._started(entry, run.prepared, budget_ms, cancel)
                    output = work if isinstance(work, ToolOutput) else await self._rest(entry, work, budget_ms)
                except ToolError as exc:
                    if not (facts.idempotent and exc.is_retryable and not isinstance(exc, Cancelled)):
                        raise
                    await asyncio.sleep(RETRY_DELAY_S)
                    output = await self._attempt(entry, run.prepared, budget_ms, cancel)
            finally:
                if run.scrub_token is not None:
                    self._unscrub(run)
            if run.secret is not None:
                output = self._ran(run, output)
        except ToolError as exc:
            error, detail = self._failed(entry, run, exc)
            if self._records(entry, run):
                await self._record_execution(entry, prepared.arguments, "error", detail, run.call.refs)
            if error is exc:
                raise
            raise error from None
        except asyncio.CancelledError:
            if self._records(entry, run):
                self._record_cancelled(entry, prepared.arguments, run.call.refs)
            raise
        finally:
            _CALL.reset(run.call_token)
            if run.turn_token is not None:
                _TURN.reset(run.turn_token)
        call = run.call
        if self._cp.flow is not None or run.handler is not None:
            self._observed(entry, prepared, output, run)
        if (not facts.idempotent or call.annotated) and self._records_anything():  # answered once its row is durable
            unrecorded = self._record_now(entry, prepared.arguments, "ok", "", call.refs)
            if unrecorded is LATER:
                unrecorded = await self._record_execution(entry, prepared.arguments, "ok", "", call.refs)
            if unrecorded is not None:  # recorded (the common case) needs no call
                self._acknowledge(name, output, unrecorded)  # type: ignore[arg-type]
        value = output.value  # the common small answer is passed as it is (see _bound_output)
        if (
            value is None
            or isinstance(value, _NUMBERS)
            or (type(value) is str and len(value) <= self._cp.max_output_chars)
        ):
            return output
        return self._bound_output(name, output)

    def _with_secrets(self, entry: RegisteredTool, prepared: Prepared) -> tuple[Substitution | None, Prepared]:
        """The input with secret handles replaced by their values (after the verdict), or the input itself."""
        try:
            sub = self._cp.secrets.substitute(entry.name, prepared.raw, prepared.arguments, self.principal)
        except ValueError as exc:
            raise ValidationFailed(entry.name, str(exc)) from None
        if sub is None:
            return None, prepared
        return sub, prepare_input(entry, sub.raw, self._cp.max_input_bytes)

    def _started(
        self, entry: RegisteredTool, prepared: Prepared, budget_ms: int, cancel: asyncio.Event | None
    ) -> ToolOutput | Awaitable[ToolOutput]:
        """The tool's first step, taken here: its output if it finished in it (most reads), else what is left.

        A call that finishes in its first step needs no timer at all; one that suspends goes on from where
        it stopped, under its wall-clock budget (:meth:`_attempt`).
        """
        try:
            run = getattr(entry.tool, "run_prepared", None)
            work = run(prepared) if callable(run) else entry.tool.call_json(prepared.raw)
            if cancel is not None:
                return _cancellable(entry.name, work, cancel)
            if type(work) is not CoroutineType:
                return work
            started = time.monotonic()
            first = work.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except Exception as exc:
            raise _failure(entry.name, exc, budget_ms) from (None if isinstance(exc, ToolError | TimeoutError) else exc)
        return Resumed(work, first, started)

    async def _attempt(
        self, entry: RegisteredTool, prepared: Prepared, budget_ms: int, cancel: asyncio.Event | None
    ) -> ToolOutput:
        """One run of the tool: the first step, then what is left of it under the budget."""
        work = self._started(entry, prepared, budget_ms, cancel)
        if isinstance(work, ToolOutput):
            return work
        return await self._rest(entry, work, budget_ms)

    async def _rest(self, entry: RegisteredTool, work: Awaitable[ToolOutput], budget_ms: int) -> ToolOutput:
        try:
            if entry.facts.inline:  # runs synchronously on the loop: a timer could not interrupt it anyway
                return await work
            seconds = budget_ms / 1000
            if type(work) is Resumed:  # the budget counts from the first step, which ran before this
                seconds = max(0.0, seconds - (time.monotonic() - work.started))
            return await run_with_budget(work, seconds)
        except Exception as exc:
            raise _failure(entry.name, exc, budget_ms) from (None if isinstance(exc, ToolError | TimeoutError) else exc)

    def _bound_output(self, name: str, output: ToolOutput) -> ToolOutput:
        limit = self._cp.max_output_chars
        value = output.value
        # A tuple, not `bool | int | float`: a union is built anew each time the line runs (every call).
        if value is None or isinstance(value, _NUMBERS) or (isinstance(value, str) and len(value) <= limit):
            return output
        text = output.text
        if len(text) <= limit:
            return output
        session = self.turn.session_key if self.turn and self.turn.session_key else "default"
        call_id = self.turn.call_id if self.turn and self.turn.call_id else uuid.uuid4().hex
        preview = text[: min(2000, limit // 2)]
        if self._cp.data_dir is not None:
            try:
                folder = self._cp.data_dir / "tool_results" / re.sub(r"[^A-Za-z0-9_.-]", "_", session)
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', call_id)}.txt"
                path.write_text(text, encoding="utf-8")
                marker = f"[Full output persisted: {path} ({len(text)} chars, {name})]\n{preview}\n[…]"
                return ToolOutput(marker, output.metadata)
            except OSError:
                log.exception("could not persist a large tool output; truncating instead")
        tail = text[-min(1000, limit // 4) :]
        return ToolOutput(
            f"{preview}\n…[{len(text) - len(preview) - len(tail)} chars elided]…\n{tail}", output.metadata
        )


async def _cancellable(name: str, work: Awaitable[ToolOutput], cancel: asyncio.Event) -> ToolOutput:
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise Cancelled(name)
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()


def _failure(name: str, exc: Exception, budget_ms: int) -> Exception:
    """What a tool's exception becomes at the chokepoint: a timeout, its own bounded error, or a panic."""
    if isinstance(exc, TimeoutError) and not isinstance(exc, ToolError):
        return ToolTimeout(name, budget_ms)
    if isinstance(exc, ToolError):
        return mapped_error(name, exc)  # type: ignore[return-value]
    return panic_error(name, exc)


def _redacted(input: Mapping[str, Any]) -> dict[str, Any]:
    from aleph._chokepoint._gate import redact_arguments

    out = redact_arguments(dict(input))
    return out if isinstance(out, dict) else {}
