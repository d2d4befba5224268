"""A node judges a file copy by its own policy, like a command: ``node_file`` for the principal and its chain.

node-b's policy (conftest) refuses every copy to carol and pushes to dave; node-a has no such rule. What the
node refuses never touches its workspace, and the refusal is a row in the node's ledger.
"""

from __future__ import annotations

import asyncio

from _harness import Cluster
from aleph_cluster._node import LEDGER_AGENT

import aleph


def copy(cluster: Cluster, principal: aleph.Principal, node: str, direction: str, name: str) -> aleph.ToolResult:
    rt = cluster.center()
    local, remote = (f"out/{name}", f"in/{name}") if direction == "push" else (f"back/{name}", "seed.txt")

    async def run() -> aleph.ToolResult:
        async with rt:
            args = {"node": node, "direction": direction, "local_path": local, "remote_path": remote}
            return await rt.tool_service(principal=principal).call("node_file", {**args, "overwrite": True})

    return asyncio.run(run())


def denied_rows(cluster: Cluster, node: str) -> list[aleph.LedgerRow]:
    ledger = aleph.Ledger(cluster.node_dir(node) / "data" / "ledger")
    try:
        rows = ledger.rows(LEDGER_AGENT) if LEDGER_AGENT in ledger.agents() else []
    finally:
        ledger.close()
    return [r for r in rows if r.outcome == "denied" and r.target == "node_file"]


def test_a_node_refuses_a_copy_its_policy_denies_and_writes_nothing(cluster: Cluster) -> None:
    (cluster.center_dir / "out").mkdir(exist_ok=True)
    (cluster.center_dir / "out" / "c.txt").write_text("from carol")
    (cluster.node_dir("node-b") / "workspace" / "seed.txt").write_text("node data")
    carol = aleph.Principal("carol")
    before = len(denied_rows(cluster, "node-b"))
    for direction in ("push", "pull"):
        result = copy(cluster, carol, "node-b", direction, "c.txt")
        assert not result.success and result.error_kind == "permission_denied", (direction, result.error)
        assert "refused it under its own policy" in (result.error or "")
    assert not (cluster.node_dir("node-b") / "workspace" / "in" / "c.txt").exists()
    assert not (cluster.center_dir / "back" / "c.txt").exists()
    assert len(denied_rows(cluster, "node-b")) == before + 2
    # node-a has no rule for carol.
    assert copy(cluster, carol, "node-a", "push", "c.txt").success


def test_a_field_rule_on_the_node_refuses_pushes_only(cluster: Cluster) -> None:
    (cluster.center_dir / "out").mkdir(exist_ok=True)
    (cluster.center_dir / "out" / "d.txt").write_text("from dave")
    (cluster.node_dir("node-b") / "workspace" / "seed.txt").write_text("node data")
    dave = aleph.Principal("dave")
    assert not copy(cluster, dave, "node-b", "push", "d.txt").success
    pulled = copy(cluster, dave, "node-b", "pull", "d.txt")
    assert pulled.success, pulled.error
    assert (cluster.center_dir / "back" / "d.txt").read_text() == "node data"


def test_a_copy_made_for_carol_by_another_agent_is_refused_too(cluster: Cluster) -> None:
    (cluster.center_dir / "out").mkdir(exist_ok=True)
    (cluster.center_dir / "out" / "h.txt").write_text("via helper")
    helper_for_carol = aleph.Principal("helper", chain=(aleph.Principal("carol"),))
    assert not copy(cluster, helper_for_carol, "node-b", "push", "h.txt").success
    assert copy(cluster, aleph.Principal("helper"), "node-b", "push", "h.txt").success
