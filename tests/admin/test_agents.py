"""Agents: created bounded by their creator, seen only by it, switched to through delegation, deleted."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import aleph

from .helpers import approving, output

pytestmark = pytest.mark.anyio

RESTRICTED = """
[agents.mallory.tool_permissions]
default = "allow"
[agents.mallory.tool_permissions.overrides]
read_config_guide = "deny"
doctor = "ask"
"""


async def test_an_agent_created_by_a_restricted_agent_holds_no_more_than_its_creator(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime(RESTRICTED) as rt:
        human = approving()
        mallory = rt.tool_service(agent="mallory", requester=human)
        made = output(
            await mallory.call(
                "agent_create",
                {
                    "name": "helper",
                    "tool_permissions": {
                        "default": "allow",
                        "overrides": [{"rule": "read_config_guide", "action": "allow"}],
                    },
                },
            )
        )
        assert made["bounded_by"] == ["mallory"]
        assert "helper" in rt.config.agents  # in force without a restart
        helper = rt.tool_service(agent="helper")
        assert helper.decision_for("read_config_guide", {}) == "deny"
        assert helper.decision_for("doctor", {}) == "ask"
        refused = await helper.call("read_config_guide", {})
        assert not refused.success and refused.error_kind == "permission_denied"
        assert made["effective"]["doctor"] == "ask"
        # The human saw the layer and who bounds it before the agent existed.
        asked = [r for r in human.requests if r.tool_name == "agent_create"]
        assert asked and "bounded by 'mallory'" in asked[0].reason and "read_config_guide" in asked[0].reason


async def test_creating_an_agent_without_a_human_creates_nothing(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime() as rt:
        unattended = rt.tool_service(agent="alice", turn=aleph.TurnContext(unattended=True))
        result = await unattended.call("agent_create", {"name": "ghost"})
        assert not result.success
        assert "ghost" not in rt.config.agents
        assert output(await rt.tool_service(agent="alice").call("agent_list", {}))["agents"] == []


async def test_agents_are_listed_only_for_their_creator_and_delete_revokes_the_key(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        alice = rt.tool_service(agent="alice", requester=approving())
        bob = rt.tool_service(agent="bob", requester=approving())
        output(await alice.call("agent_create", {"name": "scout", "description": "reads"}))
        assert [a["name"] for a in output(await alice.call("agent_list", {}))["agents"]] == ["scout"]
        assert output(await bob.call("agent_list", {}))["agents"] == []
        foreign = await bob.call("agent_info", {"name": "scout"})
        missing = await bob.call("agent_info", {"name": "scoux"})
        assert (foreign.success, foreign.error.replace("scout", "X")) == (
            missing.success,
            missing.error.replace("scoux", "X"),
        )
        info = output(await alice.call("agent_info", {"name": "scout"}))
        assert info["in_force"]["bounded_by"] == ["alice"] and info["key_fingerprint"]
        output(await alice.call("agent_delete", {"name": "scout"}))
        assert "scout" not in rt.config.agents
        assert rt.chokepoint.ledger is not None and rt.chokepoint.ledger.keystore.is_revoked("scout")


async def test_switching_to_an_agent_returns_a_session_of_that_agent_acting_for_its_creator(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        alice = rt.tool_service(agent="alice", requester=approving())
        output(await alice.call("agent_create", {"name": "writer"}))
        switched = output(await alice.call("agent_switch", {"name": "writer"}))
        principal = aleph.Principal.from_json(switched["principal"])
        assert principal.agent == "writer" and principal.chain[0].agent == "alice"
        assert principal.session == switched["session"]
        # The session now belongs to the new agent: alice cannot open it as herself.
        with pytest.raises(aleph.PermissionDenied):
            rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key=switched["session"]))
        mallory = rt.tool_service(agent="mallory", requester=approving())
        refused = await mallory.call("agent_switch", {"name": "writer"})
        assert not refused.success and "no agent 'writer' of yours" in refused.error
