"""Budgets and exactly-once for one call, around the chokepoint's approve and run steps.

Used only when the turn carries a :class:`~aleph.Budget` or an idempotency key. After the verdict and
before any human is asked (:meth:`CallGuard.admit`): a replayed key is looked up (a replay is answered
from the result store: no approval, no charge, no run), and the budget is charged (refused before
anyone is asked or anything runs). Then (:meth:`CallGuard.run`): the key is claimed, the tool runs
under the wall-clock time the budget has left, and the result is recorded under the key.
"""

from __future__ import annotations

import asyncio
import inspect
from functools import partial
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._budget import BudgetExhausted
from aleph._chokepoint._gate import grant_fingerprint
from aleph._chokepoint._refusal import Refusal
from aleph._chokepoint._results import ResultStore, StoredResult, result_store
from aleph._contract._types import ToolOutput
from aleph._errors import ExecutionFailed, PermissionDenied, ToolError, ToolTimeout
from aleph._ledger._durability import UnrecordedCall

if TYPE_CHECKING:
    from aleph._chokepoint._roles import RunningService
    from aleph._contract._registry import RegisteredTool
    from aleph._contract._tool import Prepared

__all__ = ["CallGuard", "guard_for"]


def guard_for(service: RunningService) -> CallGuard | None:
    """A guard when the service's turn carries a budget or an idempotency key, else None."""
    turn = service.turn
    if turn is None or (turn.budget is None and turn.idempotency_key is None):
        return None
    return CallGuard(service)


class CallGuard:
    """One call's budget charge and idempotency claim (see the module docstring)."""

    def __init__(self, service: RunningService) -> None:
        self.service = service
        self.turn = service.turn
        assert self.turn is not None
        self.refs = dict(self.turn.refs) or None
        self.replay: ToolOutput | None = None
        self.left = float("inf")
        self._key: str | None = None
        self._fp = ""
        self._store: ResultStore | None = None

    async def admit(self, entry: RegisteredTool, prepared: Prepared) -> None:
        """Look the key up, then charge the budget; raises :class:`PermissionDenied` when refused."""
        assert self.turn is not None
        service, name = self.service, entry.name
        key = self.turn.idempotency_key if not entry.facts.idempotent else None
        if key is not None:
            problem = ResultStore.check_key(key)
            if problem is None and service._cp.data_dir is None:
                problem = "the runtime has no data directory to keep results in"
            if problem is not None:
                raise PermissionDenied(name, f"{problem}; the call was not run")
            assert service._cp.data_dir is not None
            self._key, self._store = key, result_store(service._cp.data_dir)
            self._fp = grant_fingerprint(name, prepared.arguments)
            row = self._store.get(key)
            if row is not None and row.state == "done":
                self.replay = await self._replayed(entry, prepared, row)
                return
        try:
            self.charge(entry, prepared)
        except Refusal as refusal:
            await refusal.record()
            raise refusal.error from None

    def charges_only(self, entry: RegisteredTool) -> bool:
        """Whether the guard only charges a budget for a call of ``entry`` (no idempotency key applies)."""
        assert self.turn is not None
        return self.turn.idempotency_key is None or entry.facts.idempotent

    def charge(self, entry: RegisteredTool, prepared: Prepared) -> None:
        """Charge the turn's budget for one call (synchronous); raises :class:`Refusal` when it is spent."""
        assert self.turn is not None
        budget = self.turn.budget
        if budget is None:
            return
        try:
            self.left = budget.charge_call(entry.name)
        except BudgetExhausted as exc:
            reason = f"{exc}. The budget is a hard cap: do not retry; report what is done so far."
            raise Refusal(
                PermissionDenied(entry.name, reason), partial(self._record_budget, entry, prepared, reason)
            ) from None

    async def _record_budget(self, entry: RegisteredTool, prepared: Prepared, reason: str) -> None:
        await self.service._ledger(entry, prepared.arguments, "tool_denied", "denied", reason, "budget", self.refs)
        self.service._event("refused", entry.name, reason)

    async def run(
        self, entry: RegisteredTool, prepared: Prepared, cancel: asyncio.Event | None, action: str
    ) -> ToolOutput:
        """The recorded result of a replay, or the call run under its claim and the time left."""
        if self.replay is not None:
            return self.replay
        name, key, store = entry.name, self._key, self._store
        if key is None or store is None:
            return await self._bounded(entry, prepared, cancel, action)
        state, row = store.claim(key, name, self._fp)
        if state == "done" and row is not None:  # finished by another process since the look-up
            return await self._replayed(entry, prepared, row)
        if state == "running" and row is not None:
            if row.tool != name or row.args_fp != self._fp:
                raise PermissionDenied(name, _mismatch(key, row, name))
            raise ExecutionFailed(
                name,
                f"the call with idempotency key {key!r} is running in another worker now; wait for it "
                "(task_wait) instead of running it twice",
            )
        if state == "interrupted":
            recovered = await _recover(entry, key, prepared)
            if recovered is not None:
                store.complete(key, recovered.value, recovered.metadata)
                return recovered
            if not callable(getattr(entry.tool, "recover_call", None)):
                raise ExecutionFailed(
                    name,
                    f"the earlier call with idempotency key {key!r} was interrupted mid-run, and `{name}` cannot "
                    "tell whether its effect happened, so it is not run again. Check the effect by hand, then "
                    "retry under a new key.",
                )
        try:
            output = await self._bounded(entry, prepared, cancel, action)
        except UnrecordedCall:
            raise  # it ran: the claim stays, so the key is never run again as if nothing had happened
        except ToolError:
            store.abandon(key)  # the tool reported failure: a later retry under the same key may run it
            raise
        store.complete(key, output.value, output.metadata)
        return output

    async def _replayed(self, entry: RegisteredTool, prepared: Prepared, row: StoredResult) -> ToolOutput:
        assert self._key is not None
        if row.tool != entry.name or row.args_fp != self._fp:
            reason = _mismatch(self._key, row, entry.name)
            await self.service._ledger(
                entry, prepared.arguments, "tool_denied", "denied", reason, "idempotency", self.refs
            )
            raise PermissionDenied(entry.name, reason)
        self.service._event("executed", entry.name, f"replayed from the result store (key {self._key})")
        metadata = dict(row.metadata or {})
        metadata["replayed"] = True
        return ToolOutput(row.value, metadata)

    async def _bounded(
        self, entry: RegisteredTool, prepared: Prepared, cancel: asyncio.Event | None, action: str
    ) -> ToolOutput:
        if self.left == float("inf"):
            return await self.service._run(entry, prepared, cancel, action)
        try:
            async with asyncio.timeout(self.left):
                return await self.service._run(entry, prepared, cancel, action)
        except TimeoutError as exc:
            if isinstance(exc, ToolError):
                raise
            raise ToolTimeout(entry.name, int(self.left * 1000)) from None


def _mismatch(key: str, row: StoredResult, name: str) -> str:
    what = f"`{row.tool}`" if row.tool != name else f"`{name}` with different arguments"
    return (
        f"idempotency key {key!r} was already used for {what}; a key names one call. "
        "Use a new key (a new step) for a different call."
    )


async def _recover(entry: RegisteredTool, key: str, prepared: Prepared) -> ToolOutput | None:
    """Ask the tool whether an interrupted call under ``key`` had its effect; its result if so."""
    recover = getattr(entry.tool, "recover_call", None)
    if not callable(recover):
        return None
    result: Any = recover(key, dict(prepared.arguments))
    if inspect.isawaitable(result):
        result = await result
    if result is None:
        return None
    return result if isinstance(result, ToolOutput) else ToolOutput(result)
