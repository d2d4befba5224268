"""node_invoke and node_invoke_many against real nodes: both chokepoints, cancellation, a killed worker, ledgers."""

from __future__ import annotations

import asyncio
import time

import psutil
import pytest
from _harness import Cluster, join
from aleph_cluster import crosscheck
from aleph_cluster._node import LEDGER_AGENT
from aleph_cluster._wire import new_request_id

import aleph


async def until(predicate, what: str, timeout: float = 30.0) -> None:
    """Wait for a condition (polled), failing with ``what`` when it does not come."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def running_command(text: str) -> bool:
    """A process of this machine runs ``text`` (nodes share it, so their sandboxed processes are visible)."""
    for proc in psutil.process_iter(["cmdline"]):
        if " ".join(proc.info["cmdline"] or ()) == text:
            return True
    return False


def node_rows(cluster: Cluster, name: str) -> list[aleph.LedgerRow]:
    ledger = aleph.Ledger(cluster.node_dir(name) / "data" / "ledger")
    try:
        return ledger.rows(LEDGER_AGENT) if LEDGER_AGENT in ledger.agents() else []
    finally:
        ledger.close()


def test_invoke_runs_on_the_node_and_both_ledgers_agree(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> dict:
        async with rt:
            service = rt.tool_service(agent="alice")
            out = await service.execute(
                "node_invoke", {"node": "node-a", "command": "echo hello > greeting.txt; cat greeting.txt"}
            )
            return out.value

    out = asyncio.run(run())
    assert (out["exit_code"], out["stdout"], out["node"]) == (0, "hello\n", "node-a")
    assert out["changes"]["status"] == "committed" and "create greeting.txt" in out["changes"]["paths"]
    assert (cluster.node_dir("node-a") / "workspace" / "greeting.txt").read_text() == "hello\n"
    rows = [r for r in node_rows(cluster, "node-a") if (r.refs or {}).get("request_id") == out["request_id"]]
    assert [(r.target, r.outcome, r.principal) for r in rows] == [("node_invoke", "ok", "alice")]
    report = crosscheck(cluster.center_dir / ".aleph-data" / "ledger", cluster.node_dir("node-a") / "data" / "ledger")
    assert out["request_id"] in report.matched and report.broken_chains == []
    assert out["request_id"] not in report.missing_on_node + [m["request_id"] for m in report.mismatched]


def test_node_policy_refuses_what_the_center_allowed(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> aleph.ToolResult:
        async with rt:
            assert (
                rt.tool_service(agent="alice").explain("node_invoke", {"node": "node-b", "command": "rm -f x"}).decision
                == "allow"
            )
            return await rt.tool_service(agent="alice").call("node_invoke", {"node": "node-b", "command": "rm -f x"})

    result = asyncio.run(run())
    assert not result.success and result.error_kind == "permission_denied"
    assert "node node-b refused it under its own policy" in (result.error or "")
    denied = [r for r in node_rows(cluster, "node-b") if r.outcome == "denied"]
    assert denied and denied[-1].principal == "alice" and denied[-1].target == "node_invoke"


def test_command_floor_refuses_at_the_center_before_anything_is_sent(cluster: Cluster) -> None:
    rt = cluster.center()
    before = len(node_rows(cluster, "node-a"))

    async def run() -> aleph.ToolResult:
        async with rt:
            return await rt.tool_service(agent="alice").call(
                "node_invoke", {"node": "node-a", "command": "rm -rf / --no-preserve-root"}
            )

    result = asyncio.run(run())
    assert not result.success and result.error_kind == "permission_denied"
    assert len(node_rows(cluster, "node-a")) == before


def test_cancelling_the_call_kills_the_remote_process(cluster: Cluster) -> None:
    rt = cluster.center()
    marker = "31.4159"

    def remote_sleepers() -> bool:
        return running_command(f"sleep {marker}")

    async def run() -> None:
        async with rt:
            service = rt.tool_service(agent="alice")
            task = asyncio.ensure_future(
                service.execute("node_invoke", {"node": "node-a", "command": f"sleep {marker}"})
            )

            async def started() -> bool:
                return remote_sleepers()

            await until(started, "the remote sleep to start")
            task.cancel()
            with pytest.raises((asyncio.CancelledError, aleph.Cancelled)):
                await task

            async def gone() -> bool:
                return not remote_sleepers()

            await until(gone, "the remote sleep to be killed")

    asyncio.run(run())


def test_a_command_over_its_timeout_is_killed_and_reported_timed_out(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> dict:
        async with rt:
            out = await rt.tool_service(agent="alice").execute(
                "node_invoke", {"node": "node-a", "command": "sleep 30", "timeout_seconds": 1}
            )
            return out.value

    out = asyncio.run(run())
    assert out["timed_out"] is True and out["exit_code"] != 0


def test_a_worker_killed_mid_call_is_an_error_naming_it_within_the_timeout(cluster: Cluster) -> None:
    victim = cluster.start_node("victim", tags=("doomed",))
    rt = cluster.center()

    async def run() -> tuple[aleph.ToolResult, float]:
        async with rt:
            await join(rt, "victim")
            service = rt.tool_service(agent="alice")
            started = time.monotonic()
            call = asyncio.ensure_future(
                service.call("node_invoke", {"node": "victim", "command": "sleep 27.18", "timeout_seconds": 60})
            )

            async def running() -> bool:
                return running_command("sleep 27.18")

            await until(running, "the command to start on the victim")
            victim.kill()  # SIGKILL to the worker's whole process group
            result = await call
            return result, time.monotonic() - started

    result, elapsed = asyncio.run(run())
    assert not result.success and result.error_kind == "transport"
    assert "victim" in (result.error or "") and "not reported as done" in (result.error or "")
    assert elapsed < 60 + 15  # the call's own timeout plus its grace: it did not hang
    center = aleph.Ledger(cluster.center_dir / ".aleph-data" / "ledger")
    rows = [r for r in center.rows("alice") if r.target == "node_invoke" and (r.refs or {}).get("node") != "node-a"]
    center.close()
    assert rows and rows[-1].outcome == "error"


def test_invoke_many_reports_every_failed_node(cluster: Cluster) -> None:
    (cluster.node_dir("node-a") / "workspace" / "only-on-a").write_text("")
    rt = cluster.center()

    async def run() -> tuple[aleph.ToolResult, dict]:
        async with rt:
            service = rt.tool_service(agent="alice")
            strict = await service.call("node_invoke_many", {"tag": "kit", "command": "test -f only-on-a"})
            lenient = await service.execute(
                "node_invoke_many", {"tag": "kit", "command": "test -f only-on-a", "mode": "any"}
            )
            return strict, lenient.value

    strict, lenient = asyncio.run(run())
    assert not strict.success and "node-b: exit 1" in (strict.error or "") and "1 succeeded" in (strict.error or "")
    assert lenient["satisfied"] is True and lenient["failed"] == ["node-b"] and lenient["succeeded"] == 1
    assert {r["node"]: r["ok"] for r in lenient["results"]} == {"node-a": True, "node-b": False}


def test_unknown_and_pending_nodes_are_refused_by_name(cluster: Cluster) -> None:
    cluster.start_node("newcomer")
    rt = cluster.center()

    async def run() -> tuple[aleph.ToolResult, aleph.ToolResult, dict]:
        async with rt:
            service = rt.tool_service(agent="alice")
            unknown = await service.call("node_invoke", {"node": "nowhere", "command": "true"})
            pending = await service.call("node_invoke", {"node": "newcomer", "command": "true"})
            listed = (await service.execute("node_list", {})).value
            return unknown, pending, listed

    unknown, pending, listed = asyncio.run(run())
    assert not unknown.success and "nowhere" in (unknown.error or "")
    assert not pending.success and "newcomer is connected but not joined" in (pending.error or "")
    health = {n["id"]: n["health"] for n in listed["nodes"]}
    assert health["newcomer"] == "pending" and health["node-a"] == "ok"
    assert set(listed["nodes"][0]) == {
        "id",
        "host",
        "address",
        "tags",
        "cpus",
        "memory_bytes",
        "memory_used_bytes",
        "load",
        "last_seen_seconds",
        "health",
    }


def test_only_the_principal_that_started_a_call_can_cancel_it(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> tuple[object, object]:
        async with rt:
            center = await rt.registry.get("node_invoke").tool.handle.get("node_invoke")  # type: ignore[union-attr]
            worker, rec = await center.resolve("node-a")
            rid = new_request_id()
            call = asyncio.ensure_future(
                center.request(
                    worker,
                    rec.identity_key,
                    "invoke",
                    {"command": "sleep 33.3"},
                    timeout=60,
                    request_id=rid,
                    principal="alice",
                )
            )

            async def started() -> bool:
                return running_command("sleep 33.3")

            await until(started, "alice's command to start")
            by_bob = await center.request(
                worker, rec.identity_key, "cancel", {"target": rid}, timeout=10, principal="bob"
            )
            still = running_command("sleep 33.3")
            by_alice = await center.request(
                worker, rec.identity_key, "cancel", {"target": rid}, timeout=10, principal="alice"
            )
            reply = await call
            return (by_bob.result, still), (by_alice.result, reply.error)

    (bob, still), (alice, error) = asyncio.run(run())
    assert bob == {"cancelled": False} and still  # bob's cancel answers like an unknown id and stops nothing
    assert alice == {"cancelled": True} and error is not None and error["kind"] == "cancelled"
