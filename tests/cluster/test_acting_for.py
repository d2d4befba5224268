"""A node judges a call by everyone it is made for, not only by the agent that sends it.

The center's principal may act for others (``helper`` acting for ``alice``): the node's own policy for every
agent of that chain applies, so a delegation on the center is never a way around what the node refuses alice.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from _harness import Cluster
from aleph_cluster import crosscheck
from aleph_cluster._node import LEDGER_AGENT
from aleph_cluster._wire import REQUEST_DOMAIN, Request, WireError, canonical
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

import aleph


def node_rows(cluster: Cluster, name: str) -> list[aleph.LedgerRow]:
    ledger = aleph.Ledger(cluster.node_dir(name) / "data" / "ledger")
    try:
        return ledger.rows(LEDGER_AGENT) if LEDGER_AGENT in ledger.agents() else []
    finally:
        ledger.close()


def _call(cluster: Cluster, principal: aleph.Principal, command: str) -> aleph.ToolResult:
    rt = cluster.center()

    async def run() -> aleph.ToolResult:
        async with rt:
            # A guest is never above the auto tier, which asks before a remote command: a human approves here.
            human = aleph.ScriptedRequester(lambda request: aleph.ApprovalResponse(aleph.ApprovalOutcome.APPROVED))
            service = rt.tool_service(principal=principal, requester=human)
            return await service.call("node_invoke", {"node": "node-b", "command": command})

    return asyncio.run(run())


def test_a_node_refuses_alices_command_sent_by_an_agent_acting_for_her(cluster: Cluster) -> None:
    helper_for_alice = aleph.Principal("helper", chain=(aleph.Principal("alice"),))
    for command in ("rm -f x", "curl --version"):  # node-b denies both to alice, not to helper
        result = _call(cluster, helper_for_alice, command)
        assert not result.success and result.error_kind == "permission_denied", (command, result)
        assert "node node-b refused it under its own policy" in (result.error or "")
    denied = [r for r in node_rows(cluster, "node-b") if r.outcome == "denied"]
    assert denied and '"alice"' in denied[-1].principal and '"helper"' in denied[-1].principal


def test_the_chains_weakest_role_is_the_role_on_the_node(cluster: Cluster) -> None:
    # A guest anywhere in the chain makes the call a guest's on the node too (never above the auto tier):
    # the node's transaction holds back nothing here (a plain read), so it runs, judged as a guest's call.
    guest_chain = aleph.Principal("helper", role="guest", chain=(aleph.Principal("bob", role="guest"),))
    result = _call(cluster, guest_chain, "echo ok")
    assert result.success, result.error
    request_id = json.loads(result.output or "{}")["request_id"]
    rows = [r for r in node_rows(cluster, "node-b") if (r.refs or {}).get("request_id") == request_id]
    assert [r.outcome for r in rows] == ["ok"] and '"role":"guest"' in rows[0].principal
    # Both ledgers name the same principal, chain included, so the cross-check matches them.
    report = crosscheck(cluster.center_dir / ".aleph-data" / "ledger", cluster.node_dir("node-b") / "data" / "ledger")
    assert request_id in report.matched


def test_an_agent_acting_for_itself_keeps_its_own_node_policy(cluster: Cluster) -> None:
    result = _call(cluster, aleph.Principal("helper"), "echo fine")
    assert result.success, result.error


KEY = Ed25519PrivateKey.generate()
PUBLIC = KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def _signed(data: dict[str, object]) -> tuple[bytes, bytes]:
    now = int(time.time() * 1000)
    text = canonical(
        {
            "v": 1,
            "id": "r1",
            "node": "n1",
            "kind": "invoke",
            "principal": "helper",
            "channel": "",
            "body": {},
            "issued_ms": now,
            "expires_ms": now + 30_000,
            **data,
        }
    )
    return text, KEY.sign(REQUEST_DOMAIN + text)


@pytest.mark.parametrize(
    "data",
    [{"acting_for": "alice"}, {"acting_for": [""]}, {"acting_for": [1]}, {"acting_for": ["a"] * 9}, {"role": "root"}],
)
def test_a_request_whose_chain_or_role_cannot_be_read_is_refused(data: dict[str, object]) -> None:
    with pytest.raises(WireError):
        Request.open(*_signed(data), center_key=PUBLIC, node="n1")


def test_a_chain_and_role_travel_signed_and_an_operator_arrives_as_a_member() -> None:
    req = Request.open(*_signed({"acting_for": ["alice"], "role": "operator"}), center_key=PUBLIC, node="n1")
    who = req.acting()
    assert (who.agent, [p.agent for p in who.chain], who.role) == ("helper", ["alice"], "member")
