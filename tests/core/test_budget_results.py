"""Per-call budgets and the durable result store, as the chokepoint enforces them."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import Budget, BudgetExhausted, PermissionDenied, ToolFacts, TurnContext
from aleph.testing import isolated_runtime


class Counter:
    """A plugin whose ``bump`` tool increments a real counter in a SQLite file."""

    ALEPH_PLUGIN_NAME = "counter_fixture"

    def __init__(self, db: Path, *, recoverable: bool = False, delay: float = 0.0) -> None:
        self.db = db
        self.recoverable = recoverable
        self.delay = delay
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS c (n INTEGER)")
            conn.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT PRIMARY KEY, n INTEGER)")
            if conn.execute("SELECT COUNT(*) FROM c").fetchone()[0] == 0:
                conn.execute("INSERT INTO c VALUES (0)")

    def count(self) -> int:
        with sqlite3.connect(self.db) as conn:
            return int(conn.execute("SELECT n FROM c").fetchone()[0])

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        plugin = self

        async def bump(data: dict[str, Any]) -> dict[str, Any]:
            if plugin.delay:
                await asyncio.sleep(plugin.delay)
            turn = aleph.current_turn()
            key = turn.idempotency_key if turn is not None else None
            with sqlite3.connect(plugin.db) as conn:
                conn.execute("UPDATE c SET n = n + ?", (data["by"],))
                n = conn.execute("SELECT n FROM c").fetchone()[0]
                if key is not None:
                    conn.execute("INSERT INTO applied VALUES (?, ?)", (key, n))
            return {"n": n}

        async def peek(data: dict[str, Any]) -> dict[str, Any]:
            return {"n": plugin.count()}

        schema = {
            "type": "object",
            "properties": {"by": {"type": "integer"}},
            "required": ["by"],
            "additionalProperties": False,
        }
        tool_cls = RecoverableBump if plugin.recoverable else aleph.LoopTool
        bump_tool = tool_cls("bump", "Add to the counter (fixture).", schema, bump, facts=ToolFacts())
        bump_tool.db = plugin.db  # type: ignore[attr-defined]
        register(
            bump_tool,
            aleph.LoopTool(
                "peek",
                "Read the counter (fixture).",
                {"type": "object", "properties": {}, "additionalProperties": False},
                peek,
                facts=ToolFacts(idempotent=True),
            ),
        )


class RecoverableBump(aleph.LoopTool):
    """``bump`` that can tell whether an interrupted call under a key had its effect."""

    db: Path

    def recover_call(self, key: str, input: dict[str, Any]) -> dict[str, Any] | None:
        with sqlite3.connect(self.db) as conn:
            hit = conn.execute("SELECT n FROM applied WHERE key = ?", (key,)).fetchone()
        return {"n": hit[0]} if hit else None


def _runtime(workspace: Path, counter: Counter) -> aleph.Aleph:
    return isolated_runtime(workspace, counter)


@pytest.mark.anyio
async def test_a_call_cap_refuses_the_call_past_it_before_the_tool_runs(workspace: Path) -> None:
    counter = Counter(workspace / "c.db")
    async with _runtime(workspace, counter) as rt:
        svc = rt.tool_service(turn=TurnContext(budget=Budget(calls=3, name="task-1")))
        for _ in range(3):
            await svc.execute("bump", {"by": 1})
        with pytest.raises(PermissionDenied) as info:
            await svc.execute("bump", {"by": 1})
        assert "task-1" in str(info.value) and "3 tool calls" in str(info.value)
        assert counter.count() == 3
        assert rt.chokepoint.ledger is not None
        await rt.chokepoint.ledger.flush()
        rows = rt.chokepoint.ledger.rows("default")
        assert [r.rule for r in rows if r.action == "tool_denied"] == ["budget"]


@pytest.mark.anyio
async def test_reservations_come_out_of_the_parent_pool(workspace: Path) -> None:
    team = Budget(calls=10, name="team")
    member = team.reserve(calls=6, name="member")
    with pytest.raises(BudgetExhausted, match="has only 4 calls left"):
        team.reserve(calls=5, name="other")
    task = member.reserve(calls=4, name="task")
    with pytest.raises(BudgetExhausted, match="'member' has only 2 calls left"):
        member.reserve(calls=3)
    task.charge_call("x")
    task.release()
    assert member.usage().calls == 1 and member.usage().reserved_calls == 0
    assert team.usage().reserved_calls == 6
    member.release()
    assert team.usage().calls == 1 and team.usage().reserved_calls == 0
    with pytest.raises(BudgetExhausted, match="released"):
        task.charge_call("x")


@pytest.mark.anyio
async def test_uncapped_child_shares_its_parents_cap(workspace: Path) -> None:
    team = Budget(calls=2, name="team")
    a, b = team.reserve(name="a"), team.reserve(name="b")
    a.charge_call("x")
    b.charge_call("x")
    with pytest.raises(BudgetExhausted, match="'team'"):
        a.charge_call("x")


@pytest.mark.anyio
async def test_host_reported_tokens_and_cost_stop_the_next_call(workspace: Path) -> None:
    counter = Counter(workspace / "c.db")
    budget = Budget(tokens=1000, cost=0.5, name="task-t")
    async with _runtime(workspace, counter) as rt:
        svc = rt.tool_service(turn=TurnContext(budget=budget))
        await svc.execute("bump", {"by": 1})
        budget.report(tokens=400, cost=0.1)
        await svc.execute("bump", {"by": 1})
        budget.report(tokens=600)
        with pytest.raises(PermissionDenied, match="tokens are spent"):
            await svc.execute("bump", {"by": 1})
        assert counter.count() == 2
    with pytest.raises(ValueError):
        budget.report(tokens=-1)


@pytest.mark.anyio
async def test_the_wall_clock_budget_bounds_a_running_call_and_refuses_after(workspace: Path) -> None:
    counter = Counter(workspace / "c.db", delay=2.0)
    async with _runtime(workspace, counter) as rt:
        svc = rt.tool_service(turn=TurnContext(budget=Budget(wall_seconds=0.2, name="quick")))
        with pytest.raises(aleph.ToolTimeout):
            await svc.execute("bump", {"by": 1})
        with pytest.raises(PermissionDenied, match="wall-clock time is used up"):
            await svc.execute("bump", {"by": 1})
        assert counter.count() == 0


def test_a_hard_cap_holds_under_concurrent_threads() -> None:
    budget = Budget(calls=500, name="pool")
    members = [budget.reserve(name=f"m{i}") for i in range(16)]
    ok = []

    def worker(b: Budget) -> None:
        for _ in range(100):
            try:
                b.charge_call("x")
                ok.append(1)
            except BudgetExhausted:
                pass

    threads = [threading.Thread(target=worker, args=(m,)) for m in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 500
    assert budget.usage().calls == 500


@pytest.mark.anyio
async def test_a_replayed_key_gets_the_recorded_result_without_running_again(workspace: Path) -> None:
    counter = Counter(workspace / "c.db")
    async with _runtime(workspace, counter) as rt:
        turn = TurnContext(idempotency_key="task-9:1")
        first = await rt.tool_service(turn=turn).execute("bump", {"by": 5})
        again = await rt.tool_service(turn=turn).execute("bump", {"by": 5})
        assert first.value == again.value == {"n": 5}
        assert again.metadata.get("replayed") is True
        assert counter.count() == 5
        with pytest.raises(PermissionDenied, match="different arguments"):
            await rt.tool_service(turn=turn).execute("bump", {"by": 6})
        assert counter.count() == 5
        # Read-only tools are not keyed: they run every time.
        assert (await rt.tool_service(turn=turn).execute("peek", {})).value == {"n": 5}
    # A new runtime (a restarted worker) sees the same store.
    async with _runtime(workspace, counter) as rt:
        again = await rt.tool_service(turn=TurnContext(idempotency_key="task-9:1")).execute("bump", {"by": 5})
        assert again.value == {"n": 5} and counter.count() == 5


@pytest.mark.anyio
async def test_a_failed_call_does_not_burn_its_key(workspace: Path) -> None:
    counter = Counter(workspace / "c.db")
    async with _runtime(workspace, counter) as rt:
        turn = TurnContext(idempotency_key="k:1")
        with pytest.raises(aleph.ValidationFailed):
            await rt.tool_service(turn=turn).execute("bump", {"by": "x"})
        assert (await rt.tool_service(turn=turn).execute("bump", {"by": 1})).value == {"n": 1}


@pytest.mark.anyio
async def test_bad_keys_are_refused_by_name(workspace: Path) -> None:
    counter = Counter(workspace / "c.db")
    async with _runtime(workspace, counter) as rt:
        for key, words in (("", "non-empty"), ("k" * 600, "at most 512")):
            with pytest.raises(PermissionDenied, match=words):
                await rt.tool_service(turn=TurnContext(idempotency_key=key)).execute("bump", {"by": 1})
        assert counter.count() == 0


def _die_mid_call(workspace: str, db: str, recoverable: bool, ready: Any) -> None:
    counter = Counter(Path(db), recoverable=recoverable)

    async def run() -> None:
        async with _runtime(Path(workspace), counter) as rt:
            svc = rt.tool_service(turn=TurnContext(idempotency_key="task-k:3"))
            original = rt.registry.get("bump")
            assert original is not None
            # Simulate a kill in the window after the effect and before the result is recorded.
            import aleph._chokepoint._results as results

            def crash(self: Any, *args: Any) -> None:
                ready.set()
                os.kill(os.getpid(), signal.SIGKILL)

            results.ResultStore.complete = crash  # type: ignore[method-assign]
            await svc.execute("bump", {"by": 1})

    asyncio.run(run())


@pytest.mark.parametrize("recoverable", [True, False])
def test_an_interrupted_call_is_recovered_or_refused_never_rerun_blindly(workspace: Path, recoverable: bool) -> None:
    db = workspace / "c.db"
    Counter(db)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_die_mid_call, args=(str(workspace), str(db), recoverable, ready))
    proc.start()
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL and ready.is_set()
    counter = Counter(db, recoverable=recoverable)
    assert counter.count() == 1

    async def resume() -> aleph.ToolOutput:
        async with _runtime(workspace, counter) as rt:
            return await rt.tool_service(turn=TurnContext(idempotency_key="task-k:3")).execute("bump", {"by": 1})

    if recoverable:
        assert asyncio.run(resume()).value == {"n": 1}
        assert asyncio.run(resume()).value == {"n": 1}  # now recorded: a plain replay
    else:
        with pytest.raises(aleph.ExecutionFailed, match="interrupted mid-run"):
            asyncio.run(resume())
    assert counter.count() == 1


def test_turn_context_stays_frozen_with_the_new_fields() -> None:
    turn = TurnContext(session_key="s")
    keyed = replace(turn, idempotency_key="t:1", budget=Budget(calls=1))
    assert keyed.session_key == "s" and turn.idempotency_key is None


@pytest.mark.anyio
async def test_turn_refs_reach_every_row_of_the_turn_including_budget_refusals(workspace: Path) -> None:
    counter = Counter(workspace / "c.db")
    async with _runtime(workspace, counter) as rt:
        turn = TurnContext(budget=Budget(calls=2), refs=(("team_id", "t-1"), ("task_id", "k-1")))
        svc = rt.tool_service(agent="w1", turn=turn)
        await svc.execute("bump", {"by": 1})
        await svc.execute("peek", {})
        with pytest.raises(PermissionDenied):
            await svc.execute("bump", {"by": 1})
        assert rt.chokepoint.ledger is not None
        await rt.chokepoint.ledger.flush()
        rows = rt.chokepoint.ledger.rows("w1")
        assert [(r.target, r.action) for r in rows if r.refs] == [
            ("bump", "tool_call"),
            ("peek", "tool_call"),
            ("bump", "tool_denied"),
        ]
        assert all(r.refs == {"team_id": "t-1", "task_id": "k-1"} for r in rows if r.refs)


def test_a_resumed_child_reserves_only_what_it_has_left() -> None:
    # The team spent 30 calls so far, 10 of them by a task capped at 25: the task gets its last 15.
    team = Budget(calls=100, used_calls=30, name="team")
    task = team.reserve(calls=25, spent={"calls": 10}, name="task")
    assert task.usage().calls == 10 and team.usage().reserved_calls == 15
    with pytest.raises(BudgetExhausted, match="has only 55 calls left"):
        team.reserve(calls=56)
    for _ in range(15):
        task.charge_call("x")
    with pytest.raises(BudgetExhausted, match="cap of 25 tool calls"):
        task.charge_call("x")
    task.release()
    assert team.usage().calls == 45 and team.usage().reserved_calls == 0


class Appender:
    """A plugin with one mutating tool that appends to a list: it has no key bookkeeping of its own."""

    def __init__(self) -> None:
        self.runs: list[int] = []

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool(name="append_one", description="Appends a number.", inline=True)
        def append_one(n: int) -> int:
            self.runs.append(n)
            return len(self.runs)

        register(append_one)


@pytest.mark.anyio
async def test_a_call_that_ran_but_could_not_be_recorded_keeps_its_key_and_is_not_run_again(workspace: Path) -> None:
    plugin = Appender()
    async with isolated_runtime(workspace, plugin) as rt:
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        turn = TurnContext(idempotency_key="task-3:1")
        await rt.tool_service().execute("append_one", {"n": 0})
        ledger._chains.clear()  # the chain is opened again on the next write, and that fails
        chain = ledger._chain_paths("default")[0]
        chain.rename(chain.with_suffix(".moved"))
        chain.mkdir()
        with pytest.raises(aleph.ExecutionFailed, match="it ran and its effect is real"):
            await rt.tool_service(turn=turn).execute("append_one", {"n": 5})
        assert [0, 5] == plugin.runs
        chain.rmdir()
        chain.with_suffix(".moved").rename(chain)
        # Retried under the same key: never run a second time as if the first had not happened.
        with pytest.raises(aleph.ToolError, match="task-3:1"):
            await rt.tool_service(turn=turn).execute("append_one", {"n": 5})
        assert [0, 5] == plugin.runs
