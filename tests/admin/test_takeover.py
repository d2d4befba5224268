"""agent_create cannot take over a principal that already exists: its name is an identity, not a free string.

An agent that has acted on this install (it holds a ledger key, owns a session, owns stored objects) or that the
configuration names is a principal. Creating an agent of that name would make the creator its owner: the
creator could then switch into it (acting *as* that principal, with its sessions and secrets) or delete it
(revoking its ledger key).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import aleph

from .helpers import approving, output

pytestmark = pytest.mark.anyio


async def test_an_agent_that_has_acted_here_cannot_be_created_again_by_another(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        bob = rt.tool_service(agent="bob", requester=approving(), turn=aleph.TurnContext(session_key="bob-s"))
        output(
            await bob.call(
                "vault_store",
                {"action": "store", "name": "tok", "secret": "s3cr3t-bob", "allow": ["read_config_guide"]},
            )
        )
        mallory = rt.tool_service(agent="mallory", requester=approving())
        made = await mallory.call("agent_create", {"name": "bob"})
        assert not made.success and "bob" not in rt.config.agents
        assert "exists already" in (made.error or "")
        # Nothing of bob's changed hands: mallory cannot switch into bob, delete bob or revoke bob's key.
        assert not (await mallory.call("agent_switch", {"name": "bob"})).success
        assert not (await mallory.call("agent_delete", {"name": "bob"})).success
        assert rt.chokepoint.ledger is not None and not rt.chokepoint.ledger.keystore.is_revoked("bob")


@aleph.tool
def jot(text: str) -> str:
    """A mutating tool (it declares nothing), so every call of it is a signed ledger row."""
    return f"noted {text}"


@pytest.mark.parametrize(
    ("toml", "name"),
    [
        ("", "default"),  # the agent core binds when a host names none
        ("", "main"),  # the same agent, as teams, hub, browser and media own its objects
        ('[agents.ops]\naccepts_delegation_from = ["carol"]\n', "carol"),  # named by another agent's layer
        ('[agents.ops]\nbounded_by = ["carol"]\n', "carol"),
    ],
)
async def test_a_name_the_install_already_uses_as_a_principal_is_not_free(
    make_runtime: Callable[..., aleph.Aleph], toml: str, name: str
) -> None:
    async with make_runtime(toml) as rt:
        mallory = rt.tool_service(agent="mallory", requester=approving())
        made = await mallory.call("agent_create", {"name": name})
        assert not made.success and "exists already" in (made.error or "")
        assert name not in rt.config.agents


async def test_an_agent_known_only_by_its_signed_ledger_rows_is_not_free(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        rt.register(jot)
        dana = rt.tool_service(agent="dana", turn=aleph.TurnContext(session_key="dana-s"))
        assert (await dana.call("jot", {"text": "x"})).success
        mallory = rt.tool_service(agent="mallory", requester=approving())
        assert not (await mallory.call("agent_create", {"name": "dana"})).success
        # dana's session stays dana's alone.
        with pytest.raises(aleph.PermissionDenied):
            rt.tool_service(agent="mallory", turn=aleph.TurnContext(session_key="dana-s"))


async def test_a_deleted_agents_name_cannot_be_taken_by_another_creator(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        alice = rt.tool_service(agent="alice", requester=approving())
        output(await alice.call("agent_create", {"name": "scout"}))
        output(await alice.call("agent_switch", {"name": "scout"}))  # scout now owns a session
        output(await alice.call("agent_delete", {"name": "scout"}))
        mallory = rt.tool_service(agent="mallory", requester=approving())
        again = await mallory.call("agent_create", {"name": "scout"})
        assert not again.success and "scout" not in rt.config.agents
        # A fresh name is still free.
        assert output(await mallory.call("agent_create", {"name": "scout2"}))["bounded_by"] == ["mallory"]


async def test_an_agent_made_while_acting_for_another_is_bounded_by_both(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    toml = '[agents.mallory.tool_permissions.overrides]\nread_config_guide = "deny"\n'
    async with make_runtime(toml) as rt:
        alice_for_mallory = rt.tool_service(
            principal=aleph.Principal("alice", chain=(aleph.Principal("mallory"),)), requester=approving()
        )
        made = output(await alice_for_mallory.call("agent_create", {"name": "scribe"}))
        assert made["bounded_by"] == ["alice", "mallory"]
        assert "read_config_guide" not in made["effective"]  # denied: hidden
        assert rt.tool_service(agent="scribe").decision_for("read_config_guide", {}) == "deny"
