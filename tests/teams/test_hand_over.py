"""A task without a team changes hands only by the principal that created it.

Such a task runs as its owner acting for the chain that created it, and the new owner's consent is asked for
the caller's chain. If its owner could hand it on, a third agent would run the creator's task (acting for the
creator, with the third agent's own memory and secrets) although it never accepted the creator.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aleph

from .helpers import consents, runtime

pytestmark = pytest.mark.anyio

# bob works for alice; carol works for bob only; dave works for both.
TOML = consents(("bob",), accepts=("alice",)) + consents(("carol",), accepts=("bob",))
TOML += consents(("dave",), accepts=("alice", "bob"))


def tasks(rt: aleph.Aleph) -> list[str]:
    entry = rt.registry.get("task_create")
    assert entry is not None
    return [t["owner"] for t in entry.tool.host.store.list_tasks()]  # type: ignore[attr-defined]


async def test_the_owner_cannot_hand_the_creators_task_to_an_agent_that_never_accepted_the_creator(
    workspace: Path,
) -> None:
    async with runtime(workspace, consent=False, toml=TOML) as rt:
        alice, bob = rt.tool_service(agent="alice"), rt.tool_service(agent="bob")
        made = (await alice.execute("task_create", {"subject": "errand", "owner": "bob"})).value
        for target in ("carol", "dave"):  # dave would accept alice too: still only alice hands it over
            refused = await bob.call("task_update", {"task_id": made["task_id"], "owner": target})
            assert not refused.success and "only by the principal that created it" in (refused.error or "")
        assert tasks(rt) == ["bob"]
        # bob still does what an owner does.
        assert (await bob.call("task_update", {"task_id": made["task_id"], "status": "in_progress"})).success


async def test_the_creator_hands_its_task_on_with_the_new_owners_consent(workspace: Path) -> None:
    async with runtime(workspace, consent=False, toml=TOML) as rt:
        alice = rt.tool_service(agent="alice")
        made = (await alice.execute("task_create", {"subject": "errand", "owner": "bob"})).value
        with pytest.raises(aleph.PermissionDenied, match="carol has not accepted delegation from alice"):
            await alice.execute("task_update", {"task_id": made["task_id"], "owner": "carol"})
        assert (await alice.execute("task_update", {"task_id": made["task_id"], "owner": "dave"})).value
        assert tasks(rt) == ["dave"]


async def test_the_creator_acting_for_another_chain_is_not_the_creator(workspace: Path) -> None:
    async with runtime(workspace, consent=False, toml=TOML) as rt:
        alice = rt.tool_service(agent="alice")
        made = (await alice.execute("task_create", {"subject": "errand", "owner": "bob"})).value
        alice_for_bob = rt.tool_service(principal=aleph.Principal("alice", chain=(aleph.Principal("bob"),)))
        refused = await alice_for_bob.call("task_update", {"task_id": made["task_id"], "owner": "dave"})
        assert not refused.success and "only by the principal that created it" in (refused.error or "")
        assert tasks(rt) == ["bob"]
