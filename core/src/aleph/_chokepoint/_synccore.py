"""The chokepoint's synchronous core: one call judged, validated, charged and (for a sync tool) run without a loop.

Every call, async or not, is decided here: :meth:`SyncCore._judge` resolves the name, checks the role,
the name-level verdict, the boundary and the tool's own validation, argument rules, floors, plugin
votes and the data-flow check, and returns the verdict or raises a :class:`Refusal` that says what to
record. :meth:`ScopedToolService.execute` awaits only what really waits (recording a refusal, asking a
person, an async tool, the ledger's durability wait); :meth:`SyncCore.call_sync` runs the same
functions for hosts whose loop is synchronous (llm), runs a sync tool on the calling thread, and hands
only a step that must wait to a runner (an event loop the host owns, else a fresh one per wait).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import aleph._progress as _progress
from aleph._chokepoint._boundary import InputProblem, json_input
from aleph._chokepoint._call import _CALL, CallContext
from aleph._chokepoint._callguard import CallGuard, guard_for
from aleph._chokepoint._gate import summarize_call
from aleph._chokepoint._judge import check_name, prepare_input
from aleph._chokepoint._refusal import Refusal
from aleph._chokepoint._telemetry import enabled as telemetry_enabled
from aleph._chokepoint._telemetry import note_verdict
from aleph._contract._names import repair_tool_name, suggest_candidates
from aleph._contract._service import panic_error
from aleph._contract._types import ToolOutput
from aleph._errors import (
    Cancelled,
    ExecutionFailed,
    PermissionDenied,
    ToolError,
    ToolNotFound,
    ToolTimeout,
    TransportError,
)
from aleph._progress import CHUNK_SCRUBBER, call_handler
from aleph._turn import _TURN

if TYPE_CHECKING:
    from contextvars import Token

    from aleph._chokepoint._secrets import Substitution
    from aleph._chokepoint._verdict import Verdict
    from aleph._contract._registry import RegisteredTool
    from aleph._contract._tool import Prepared
    from aleph._contract._types import ToolDefinition

__all__ = ["DEFAULT_BUDGET_MS", "RETRY_DELAY_S", "HotMemo", "Runner", "SyncCore", "bounded_error"]

DEFAULT_BUDGET_MS = 300_000
RETRY_DELAY_S = 0.1
ERROR_LIMIT = 4000
_HOT_ENTRIES = 1024
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
"""Terminal escapes, taken out of every error text a tool returns."""

_T = TypeVar("_T")

Runner = Callable[[Callable[[], Coroutine[Any, Any, _T]]], _T]
"""Runs a coroutine factory to completion from synchronous code and returns its result (a host's own loop)."""


def bounded_error(text: str) -> str:
    """An error text without terminal escapes, at most about 4,000 characters (head and tail kept)."""
    text = ANSI.sub("", text)
    if len(text) <= ERROR_LIMIT:
        return text
    head, tail = text[:2600], text[-1200:]
    return f"{head}\n…[{len(text) - 3800} chars elided]…\n{tail}"


def mapped_error(name: str, exc: BaseException) -> BaseException:
    """What a tool's failure becomes at the chokepoint (bounded texts; anything else a panic)."""
    if isinstance(exc, ExecutionFailed):
        return ExecutionFailed(name, bounded_error(exc.cause))
    if isinstance(exc, TransportError):
        return TransportError(name, bounded_error(exc.cause))
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, Exception):
        return panic_error(name, exc)
    return exc


class _Running:
    """One call while its tool runs: the context it runs in and the secrets put into its input."""

    __slots__ = ("call", "call_token", "handler", "prepared", "scrub_token", "secret", "turn_token")

    call: CallContext
    call_token: Token[CallContext | None]
    handler: Any

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        """The input the tool runs on: the judged one, or it with secret values put in."""
        self.turn_token: Token[Any] | None = None
        self.scrub_token: Token[Any] | None = None
        self.secret: Substitution | None = None


class HotMemo:
    """A service's resolutions by name: ``{name: (entry, name-level verdict)}`` and what they hold for.

    The key is (policy, turn mode, registry generation, tier, allow-set, extra tools): the memo answers
    only while each is the same object (the mode and generation the same number), and is emptied when one
    changes. A name-level verdict reads nothing else of the turn. A service's extra tools are its own copy,
    never changed in place. Services derived for another turn share their parent's memo.
    """

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: tuple[tuple[Any, ...] | None, dict[str, tuple[RegisteredTool, tuple[Verdict, int]]]] = (None, {})
        """(key, memo), replaced as one value: a thread never pairs one key with another key's memo."""


class SyncCore:
    """The synchronous half of :class:`~aleph.ScopedToolService` (a mixin: it reads the service's fields)."""

    _hot: HotMemo
    """The service's last resolutions (see :class:`HotMemo`); shared with the services derived from it."""

    if TYPE_CHECKING:  # provided by the service and its other halves
        from aleph._chokepoint._permissions import PermissionPolicy
        from aleph._chokepoint._shared import Chokepoint
        from aleph._chokepoint._tiers import ExecTier
        from aleph._principal import Principal
        from aleph._turn import TurnContext

        _cp: Chokepoint
        policy: PermissionPolicy
        tier: ExecTier
        turn: TurnContext | None
        agent: str | None
        channel: str | None
        principal: Principal
        allowed: frozenset[str] | None
        extra_tools: dict[str, RegisteredTool]

        def _entry(self, name: str) -> RegisteredTool | None: ...
        def _is_allowed(self, name: str) -> bool: ...
        def _role_refusal(self, entry: RegisteredTool) -> str | None: ...
        def _denied_whatever_the_input(self, entry: RegisteredTool, static: Verdict) -> bool: ...
        def _dispatchable(self) -> list[ToolDefinition]: ...
        def _verdict(
            self,
            entry: RegisteredTool,
            prepared: Prepared | None,
            *,
            depth: int = 0,
            static: tuple[Verdict, int] | None = None,
        ) -> Verdict: ...
        def _flow_verdict(
            self, entry: RegisteredTool, arguments: Mapping[str, Any], verdict: Verdict, *, whole: bool = False
        ) -> Verdict: ...
        def _flow_observe(
            self, entry: RegisteredTool, prepared: Prepared, output: ToolOutput, call: CallContext
        ) -> None: ...
        def _with_secrets(self, entry: RegisteredTool, prepared: Prepared) -> tuple[Substitution | None, Prepared]: ...
        def _bound_output(self, name: str, output: ToolOutput) -> ToolOutput: ...
        def _acknowledge(self, name: str, output: ToolOutput, unrecorded: str | None) -> None: ...
        async def _record_refusal(
            self, entry: RegisteredTool, arguments: Mapping[str, Any], reason: str, verdict: Verdict
        ) -> None: ...
        async def _record_role_refusal(self, entry: RegisteredTool, input: Mapping[str, Any], reason: str) -> None: ...
        async def _record_execution(
            self,
            entry: RegisteredTool,
            arguments: Mapping[str, Any],
            outcome: Any,
            detail: str,
            refs: Mapping[str, str] | None = None,
        ) -> str | None: ...
        async def _proceed(
            self,
            entry: RegisteredTool,
            prepared: Prepared,
            verdict: Verdict,
            guard: CallGuard | None,
            cancel: asyncio.Event | None,
        ) -> ToolOutput: ...
        async def _run(
            self, entry: RegisteredTool, prepared: Prepared, cancel: asyncio.Event | None, action: str = "allow"
        ) -> ToolOutput: ...
        async def execute(
            self, name: str, input: Mapping[str, Any], *, cancel: asyncio.Event | None = None
        ) -> ToolOutput: ...

    # -- the decision: one code path for every entry point ------------------------------------------

    def _judge(self, name: str, input: Mapping[str, Any]) -> tuple[RegisteredTool, Prepared, Verdict]:
        """Resolve, check, validate and judge one call: (entry, validated input, verdict allow or ask).

        Raises :class:`ToolNotFound` or :class:`ValidationFailed` (nothing to record), or :class:`Refusal`
        for a call refused by role, rule, floor, vote or data flow (the caller records it, then raises).
        """
        if type(name) is not str:
            name = check_name(name)
        cp = self._cp
        hot = self._hot
        turn = self.turn  # a name-level verdict reads the turn's mode only (plan mode, a side question)
        mode = 0 if turn is None else 2 if turn.side_question else 1 if turn.plan_mode else 0
        state = hot.state  # one read: the key and its memo always belong together, whatever other threads do
        key = state[0]
        if (  # the memo answers only for the very policy, tier, mode, allow-set and registration it was made for
            key is None
            or key[0] is not self.policy
            or key[1] != mode
            or key[2] != cp.registry.generation
            or key[3] is not self.tier
            or key[4] is not self.allowed
            or key[5] is not self.extra_tools
        ):
            state = hot.state = (
                (self.policy, mode, cp.registry.generation, self.tier, self.allowed, self.extra_tools),
                {},
            )
        memo = state[1]
        hit = memo.get(name)
        if hit is None:
            entry = self._entry(name)
            if entry is None or not self._is_allowed(entry.name):
                entry = self._repaired(name)
            key = state[0]  # judged by the key's own policy and tier: what is memoised is what the key says
            assert key is not None
            hit = (entry, cp.static_verdict(key[0], key[3], entry, turn))
            if entry.name == name and len(memo) < _HOT_ENTRIES:
                memo[name] = hit
        entry, known = hit
        if entry.facts.requires_role is not None:
            why = self._role_refusal(entry)
            if why is not None:
                raise Refusal(PermissionDenied(entry.name, why), partial(self._record_role_refusal, entry, input, why))
        static, needs = known
        if static.action == "deny" and self._denied_whatever_the_input(entry, static):
            note_verdict(static)
            # Refused by name: judged (and recorded) before the input is even looked at.
            try:
                arguments: Mapping[str, Any] = json_input(input, max_bytes=self._cp.max_input_bytes)
            except InputProblem:
                arguments = {}
            reason = static.refusal()
            raise Refusal(
                PermissionDenied(entry.name, reason), partial(self._record_refusal, entry, arguments, reason, static)
            )
        prepared = prepare_input(entry, input, cp.max_input_bytes)
        verdict = static if not needs else self._verdict(entry, prepared, static=known)
        flow = cp.flow
        if flow is not None and flow.is_sink(entry):  # provenance is judged for sinks only
            verdict = self._flow_verdict(entry, prepared.arguments, verdict)
        note_verdict(verdict)
        if verdict.action == "deny":
            reason = verdict.refusal()
            record = partial(self._record_refusal, entry, prepared.arguments, reason, verdict)
            raise Refusal(PermissionDenied(entry.name, reason), record)
        return entry, prepared, verdict

    def _repaired(self, name: str) -> RegisteredTool:
        offered = [d.name for d in self._dispatchable()]
        # Exact, case and separator repairs are unambiguous spellings of one offered tool; a fuzzy
        # match may be a different tool, so it is only suggested. Non-ASCII never repairs (look-alikes).
        repaired = repair_tool_name(name, offered) if name.isascii() else None
        entry = self._entry(repaired[0]) if repaired is not None and repaired[1] != "fuzzy" else None
        if entry is None or not self._is_allowed(entry.name):
            raise ToolNotFound(name, suggestions=suggest_candidates(name, offered))
        return entry

    # -- the run, in pieces both entry points share -------------------------------------------------

    def _open(self, entry: RegisteredTool, prepared: Prepared, action: str) -> _Running:
        """Enter the call: progress start, the turn and the call context set, secrets put into its input."""
        run = _Running(prepared)
        handler = run.handler = _progress._handler  # get_tool_progress_handler(), without the call
        if handler is not None:
            call_handler(handler, handler.on_tool_start, entry.name, summarize_call(entry.name, prepared.arguments))
        turn = self.turn
        if turn is not None:
            run.turn_token = _TURN.set(turn)
        call = run.call = CallContext.running(
            self,  # type: ignore[arg-type]  # the service this mixin is part of
            entry.name,
            self.agent,
            self.channel,
            turn,
            _CALL.get(),
            action,
            self.principal,
        )
        run.call_token = _CALL.set(call)
        if self._cp.secrets.active:
            try:
                # Judged, approved and recorded with handles; only the run itself gets the values.
                run.secret, run.prepared = self._with_secrets(entry, prepared)
                if run.secret is not None:
                    run.scrub_token = CHUNK_SCRUBBER.set(run.secret.scrub)
            except BaseException:
                self._close(run)
                raise
        return run

    def _unscrub(self, run: _Running) -> None:
        if run.scrub_token is not None:
            CHUNK_SCRUBBER.reset(run.scrub_token)
            run.scrub_token = None

    def _close(self, run: _Running) -> None:
        self._unscrub(run)
        _CALL.reset(run.call_token)
        if run.turn_token is not None:
            _TURN.reset(run.turn_token)

    def _ran(self, run: _Running, output: ToolOutput) -> ToolOutput:
        """The output as the caller may see it: secret values taken back out."""
        secret = run.secret
        if secret is None:
            return output
        return ToolOutput(secret.scrub_value(output.value), secret.scrub_value(output.metadata))

    def _failed(self, entry: RegisteredTool, run: _Running, exc: ToolError) -> tuple[ToolError, str]:
        """The error the caller gets for a failed run (secret values taken out), and its recorded text."""
        secret, name, handler = run.secret, entry.name, run.handler
        if secret is not None and secret.scrub(str(exc)) != str(exc):
            exc = ExecutionFailed(name, bounded_error(secret.scrub(str(exc))))
            detail = str(exc)
        else:
            detail = bounded_error(str(exc))
        if handler is not None:
            call_handler(handler, handler.on_tool_result, name, str(exc)[:200], False)
        return exc, detail

    def _records(self, entry: RegisteredTool, run: _Running) -> bool:
        """Whether the run gets a ledger row: a mutating call, or one the tool or turn annotated."""
        return not entry.facts.idempotent or run.call.annotated

    def _observed(self, entry: RegisteredTool, prepared: Prepared, output: ToolOutput, run: _Running) -> None:
        """After a successful run: provenance filed, progress told."""
        if self._cp.flow is not None:
            self._flow_observe(entry, prepared, output, run.call)
        handler = run.handler
        if handler is not None:
            call_handler(handler, handler.on_tool_result, entry.name, output.text[:200], True)

    # -- the synchronous entry point ----------------------------------------------------------------

    def call_sync(self, name: str, input: Mapping[str, Any], *, runner: Runner[Any] | None = None) -> ToolOutput:
        """Run ``name`` through every gate from synchronous code; raises like :meth:`execute`.

        The decision, the input's validation, a budget's charge and the run of a sync tool (an
        ``@aleph.tool`` on a plain function) happen on the calling thread with no event loop: the same
        functions :meth:`execute` runs, so both entry points decide every call alike. A step that must
        wait — asking a person, an async tool, recording a refusal or a mutating call's durable ledger
        row, an idempotency key — is run by ``runner`` (``runner(factory)`` runs the coroutine
        ``factory()`` to completion on the host's event loop and returns its result); without one, each
        such step runs on a fresh event loop, and where an event loop is already running on the calling
        thread a :class:`RuntimeError` says to ``await execute(...)`` instead (a refusal's ledger row is
        only queued, which needs no wait). A sync tool's duration
        budget cannot interrupt it on the calling thread: one that overran it raises
        :class:`~aleph.ToolTimeout` once it returns (as :meth:`execute` does for a sync tool it runs in
        a worker thread). A call that needs a person's approval with no requester bound is refused
        (:class:`~aleph.ApprovalUnavailable`), as through :meth:`execute`.
        """
        if telemetry_enabled():  # an OpenTelemetry SDK is configured: the traced path is async
            return self._wait(runner, name, "record a trace", lambda: self.execute(name, input))
        guard = guard_for(self)  # type: ignore[arg-type]
        try:
            entry, prepared, verdict = self._judge(name, input)
            inline = (
                verdict.action == "allow"
                and entry.facts.idempotent
                and getattr(entry.tool, "runs_sync", False)
                and (guard is None or guard.charges_only(entry))
            )
            if inline and guard is not None:
                guard.charge(entry, prepared)
        except Refusal as refusal:
            if runner is not None or (self._cp.ledger is not None and asyncio._get_running_loop() is None):
                self._wait(runner, entry_name(name), "record the refusal", refusal.record)
            else:
                # No ledger (the event log is written synchronously), or an event loop already runs on this
                # thread: a refusal's row is only queued, which finishes at once while the ledger's queue
                # has room (a writer stalled for 60 s counts it lost, as it does for execute).
                _drive(refusal.record())
            raise refusal.error from None
        if not inline:
            why = "ask a person" if verdict.action == "ask" else "run the tool or record the call"
            return self._wait(runner, entry.name, why, lambda: self._proceed(entry, prepared, verdict, guard, None))
        return self._run_sync(entry, prepared, guard, runner)

    def _run_sync(
        self, entry: RegisteredTool, prepared: Prepared, guard: CallGuard | None, runner: Runner[Any] | None
    ) -> ToolOutput:
        name, facts = entry.name, entry.facts
        budget_s = (facts.max_duration_ms or DEFAULT_BUDGET_MS) / 1000
        if guard is not None:
            budget_s = min(budget_s, guard.left)
        run = self._open(entry, prepared, "allow")
        try:
            try:
                try:
                    output = _attempt_sync(entry, run.prepared, budget_s)
                except ToolError as exc:
                    if not (exc.is_retryable and not isinstance(exc, Cancelled)):
                        raise
                    time.sleep(RETRY_DELAY_S)
                    output = _attempt_sync(entry, run.prepared, budget_s)
            finally:
                self._unscrub(run)
            output = self._ran(run, output)
        except ToolError as exc:
            error, detail = self._failed(entry, run, exc)
            if self._records(entry, run):
                refs = run.call.refs
                self._wait(
                    runner,
                    name,
                    "record the call",
                    lambda: self._record_execution(entry, prepared.arguments, "error", detail, refs),
                )
            if error is exc:
                raise
            raise error from None
        finally:
            self._close(run)
        self._observed(entry, prepared, output, run)
        if run.call.annotated:  # a read-only call the tool annotated gets its row, durable before the answer
            refs = run.call.refs
            unrecorded = self._wait(
                runner,
                name,
                "record the call",
                lambda: self._record_execution(entry, prepared.arguments, "ok", "", refs),
            )
            self._acknowledge(name, output, unrecorded)
        return self._bound_output(name, output)

    def _wait(
        self,
        runner: Runner[Any] | None,
        name: str,
        why: str,
        factory: Callable[[], Coroutine[Any, Any, _T]],
    ) -> _T:
        """Run a step that waits: on the host's runner, else on a fresh event loop."""
        if runner is not None:
            result: _T = runner(factory)
            return result
        if asyncio._get_running_loop() is not None:
            raise RuntimeError(
                f"call_sync for `{name}` must {why}, which waits, and an event loop is already running on this "
                "thread: await service.execute(...) there instead, or pass runner= to call_sync"
            )
        return asyncio.run(factory())


def entry_name(name: object) -> str:
    """A tool name for a message, whatever the caller passed."""
    return name if isinstance(name, str) else repr(name)[:80]


def _drive(coro: Awaitable[_T]) -> _T:
    """Run a step that does not suspend (queueing a refusal's row) to its end, without an event loop."""
    step = coro.__await__()
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    step.close()
    raise RuntimeError("recording a refusal had to wait, which cannot happen here")  # a defect, never silent


def _attempt_sync(entry: RegisteredTool, prepared: Prepared, budget_s: float) -> ToolOutput:
    """Run a sync tool on the calling thread; a run longer than its budget is reported as a timeout."""
    name = entry.name
    started = time.monotonic()
    try:
        output: ToolOutput = entry.tool.run_sync(prepared)  # type: ignore[attr-defined]
    except ToolError as exc:
        raise mapped_error(name, exc) from None
    except TimeoutError:  # the tool's own timeout, as execute reports it
        raise ToolTimeout(name, int(budget_s * 1000)) from None
    except Exception as exc:
        raise panic_error(name, exc) from exc
    if time.monotonic() - started > budget_s:
        raise ToolTimeout(name, int(budget_s * 1000))
    return output


class Resumed:
    """The rest of a coroutine whose first step already ran: awaiting it forwards every later step.

    The chokepoint takes an async tool's first step itself; a tool that finishes in it (most reads)
    needs no wall-clock budget, and one that suspends goes on under the budget from where it stopped.
    """

    __slots__ = ("_coro", "_first", "started")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any, started: float) -> None:
        self._coro = coro
        self._first = first
        self.started = started
        """``time.monotonic()`` when the first step began: the budget counts from there."""

    def __await__(self) -> Any:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and the like go into the tool, as `await` would
                try:
                    value = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as done:
                    return done.value
