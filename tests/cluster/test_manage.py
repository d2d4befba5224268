"""node_manage: operator only; drain stops new calls, tag selects, leave retires the worker."""

from __future__ import annotations

import asyncio

from _harness import OPERATOR, Cluster, join

import aleph


def test_managing_nodes_needs_the_operator_role(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> list[aleph.ToolResult]:
        async with rt:
            args = {"action": "drain", "node": "node-a"}
            member = aleph.TurnContext(caller_role="member")
            # the tier lets the call reach the tool: the tool's own role check is what refuses
            return [
                await rt.tool_service(agent="alice", turn=member, tier="full").call("node_manage", args),
                await rt.tool_service(agent="alice").call("node_manage", args),  # no turn: no role
            ]

    for result in asyncio.run(run()):
        assert not result.success and result.error_kind == "permission_denied"
        assert "operator role" in (result.error or "")


def test_a_drained_node_takes_no_new_calls_until_undrained(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> tuple[aleph.ToolResult, str, aleph.ToolResult]:
        async with rt:
            ops = rt.tool_service(agent="ops", turn=OPERATOR)
            alice = rt.tool_service(agent="alice")
            await ops.execute("node_manage", {"action": "drain", "node": "node-a"})
            try:
                refused = await alice.call("node_invoke", {"node": "node-a", "command": "true"})
                listed = (await alice.execute("node_list", {"tag": "web"})).value
            finally:
                await ops.execute("node_manage", {"action": "undrain", "node": "node-a"})
            after = await alice.call("node_invoke", {"node": "node-a", "command": "true"})
            return refused, listed["nodes"][0]["health"], after

    refused, health, after = asyncio.run(run())
    assert not refused.success and "node-a is draining" in (refused.error or "")
    assert health == "draining"
    assert after.success


def test_tags_choose_the_nodes_of_a_fan_out(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> tuple[list[str], list[str]]:
        async with rt:
            ops = rt.tool_service(agent="ops", turn=OPERATOR)
            await ops.execute("node_manage", {"action": "tag", "node": "node-b", "tags": ["kit", "blue"]})
            try:
                listed = (await ops.execute("node_list", {"tag": "blue"})).value
                many = (
                    await rt.tool_service(agent="alice").execute("node_invoke_many", {"tag": "blue", "command": "true"})
                ).value
            finally:
                await ops.execute("node_manage", {"action": "tag", "node": "node-b", "tags": ["kit"]})
            return [n["id"] for n in listed["nodes"]], [r["node"] for r in many["results"]]

    assert asyncio.run(run()) == (["node-b"], ["node-b"])


def test_leave_retires_the_worker_and_forgets_the_node(cluster: Cluster) -> None:
    leaver = cluster.start_node("leaver")
    rt = cluster.center()

    async def run() -> tuple[dict, list[str]]:
        async with rt:
            await join(rt, "leaver")
            ops = rt.tool_service(agent="ops", turn=OPERATOR)
            out = (await ops.execute("node_manage", {"action": "leave", "node": "leaver"})).value
            await asyncio.to_thread(leaver.p.wait, 60)  # the scheduler closed the worker: its process ends
            listed = (await ops.execute("node_list", {})).value
            return out, [n["id"] for n in listed["nodes"]]

    out, ids = asyncio.run(run())
    assert out == {"node": "leaver", "left": True, "abandoned_calls": 0}
    assert "leaver" not in ids
