"""Budgets and exactly-once for one call, wrapped around the chokepoint's approve-and-run step.

Runs only when the turn carries a :class:`~aleph.Budget` or an idempotency key. In order: a replayed
key answers from the result store (no approval, no charge, no run); the budget is charged (refused
before any human is asked or the tool runs); the approval gate; the key is claimed; the tool runs
under the wall-clock time the budget has left; the result is recorded under the key.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aleph._budget import BudgetExhausted
from aleph._errors import ExecutionFailed, PermissionDenied, ToolError, ToolTimeout
from aleph._gate import grant_fingerprint
from aleph._results import ResultStore, StoredResult, result_store
from aleph._types import ToolOutput

if TYPE_CHECKING:
    from aleph._registry import RegisteredTool
    from aleph._scoped import ScopedToolService
    from aleph._verdict import Verdict

__all__ = ["guarded_run"]


async def guarded_run(
    service: ScopedToolService,
    entry: RegisteredTool,
    input: Mapping[str, Any],
    verdict: Verdict,
    cancel: asyncio.Event | None,
) -> ToolOutput:
    """Approve and run ``entry`` under the turn's budget and idempotency key (see the module docstring)."""
    turn = service.turn
    assert turn is not None
    name = entry.name
    key = turn.idempotency_key if not entry.facts.idempotent else None
    store = None
    fp = ""
    if key is not None:
        problem = ResultStore.check_key(key)
        if problem is None and service._cp.data_dir is None:
            problem = "the runtime has no data directory to keep results in"
        if problem is not None:
            raise PermissionDenied(name, f"{problem}; the call was not run")
        assert service._cp.data_dir is not None
        store = result_store(service._cp.data_dir)
        fp = grant_fingerprint(name, input)
        replay = store.get(key)
        if replay is not None and replay.state == "done":
            return await _replayed(service, entry, input, key, replay, fp)
    left = _charge(service, entry, name)
    if isinstance(left, str):
        await service._ledger(entry, input, "tool_denied", "denied", left, "budget", dict(turn.refs) or None)
        service._event("refused", name, left)
        raise PermissionDenied(name, left)
    if verdict.action == "ask":
        await service._approve(entry, input, verdict)
    if store is None or key is None:
        return await _bounded_run(service, entry, input, cancel, left)
    state, row = store.claim(key, name, fp)
    if state == "done" and row is not None:  # finished by another process since the look-up
        return await _replayed(service, entry, input, key, row, fp)
    if state == "running" and row is not None:
        if row.tool != name or row.args_fp != fp:
            raise PermissionDenied(name, _mismatch(key, row, name))
        raise ExecutionFailed(
            name,
            f"the call with idempotency key {key!r} is running in another worker now; wait for it "
            "(task_wait) instead of running it twice",
        )
    if state == "interrupted":
        recovered = await _recover(entry, key, input)
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
        output = await _bounded_run(service, entry, input, cancel, left)
    except ToolError:
        store.abandon(key)  # the tool reported failure: a later retry under the same key may run it
        raise
    store.complete(key, output.value, output.metadata)
    return output


def _mismatch(key: str, row: StoredResult, name: str) -> str:
    what = f"`{row.tool}`" if row.tool != name else f"`{name}` with different arguments"
    return (
        f"idempotency key {key!r} was already used for {what}; a key names one call. "
        "Use a new key (a new step) for a different call."
    )


async def _replayed(
    service: ScopedToolService,
    entry: RegisteredTool,
    input: Mapping[str, Any],
    key: str,
    row: StoredResult,
    fp: str,
) -> ToolOutput:
    if row.tool != entry.name or row.args_fp != fp:
        reason = _mismatch(key, row, entry.name)
        refs = dict(service.turn.refs) if service.turn is not None else {}
        await service._ledger(entry, input, "tool_denied", "denied", reason, "idempotency", refs or None)
        raise PermissionDenied(entry.name, reason)
    service._event("executed", entry.name, f"replayed from the result store (key {key})")
    metadata = dict(row.metadata or {})
    metadata["replayed"] = True
    return ToolOutput(row.value, metadata)


def _charge(service: ScopedToolService, entry: RegisteredTool, name: str) -> float | str:
    """Seconds left under the turn's budget, or the refusal text."""
    budget = service.turn.budget if service.turn is not None else None
    if budget is None:
        return float("inf")
    try:
        return budget.charge_call(name)
    except BudgetExhausted as exc:
        return f"{exc}. The budget is a hard cap: do not retry; report what is done so far."


async def _bounded_run(
    service: ScopedToolService,
    entry: RegisteredTool,
    input: Mapping[str, Any],
    cancel: asyncio.Event | None,
    left: float,
) -> ToolOutput:
    if left == float("inf"):
        return await service._run(entry, input, cancel)
    try:
        async with asyncio.timeout(left):
            return await service._run(entry, input, cancel)
    except TimeoutError as exc:
        if isinstance(exc, ToolError):
            raise
        raise ToolTimeout(entry.name, int(left * 1000)) from None


async def _recover(entry: RegisteredTool, key: str, input: Mapping[str, Any]) -> ToolOutput | None:
    """Ask the tool whether an interrupted call under ``key`` had its effect; its result if so."""
    recover = getattr(entry.tool, "recover_call", None)
    if not callable(recover):
        return None
    result = recover(key, dict(input))
    if inspect.isawaitable(result):
        result = await result
    if result is None:
        return None
    return result if isinstance(result, ToolOutput) else ToolOutput(result)
