"""Who is in a team is the leader's to change, by any tool: a member cannot add or remove members.

``team_member_add`` and ``team_member_remove`` are the leader's; ``team_snapshot restore`` adds and removes
members (and re-creates tasks) too, so applying it is the leader's as well. A member may still take, list and
read snapshots, and ask what a restore would change (the dry run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph

from .helpers import runtime

pytestmark = pytest.mark.anyio


async def call(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any]) -> Any:
    return (await rt.tool_service(agent=agent).execute(name, payload)).value


def members(rt: aleph.Aleph, team: str) -> list[str]:
    entry = rt.registry.get("team_create")
    assert entry is not None
    found = entry.tool.host.store.get_team(team)  # type: ignore[attr-defined]
    return sorted(m["agent_id"] for m in found["members"])


async def test_a_member_cannot_change_who_is_in_the_team_by_restoring_a_snapshot(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        team = (await call(rt, "lead", "team_create", {"name": "t", "members": [{"agent_id": "w1"}]}))["team_id"]
        snap = await call(rt, "w1", "team_snapshot", {"action": "create", "team_id": team})  # lead and w1
        await call(rt, "lead", "team_member_add", {"team_id": team, "agent_id": "w2"})
        before = members(rt, team)
        dry = await call(rt, "w1", "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"]})
        assert dry["members_removed"] == ["w2"] and not dry["applied"]
        refused = await rt.tool_service(agent="w1").call(
            "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"], "apply": True}
        )
        assert not refused.success and "only the team leader" in (refused.error or "")
        assert members(rt, team) == before  # w2 is still in
        # The leader applies it.
        done = await call(
            rt, "lead", "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"], "apply": True}
        )
        assert done["applied"] and "w2" not in members(rt, team)


async def test_a_member_cannot_bring_back_a_member_the_leader_removed(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        made = await call(rt, "lead", "team_create", {"name": "t", "members": [{"agent_id": "w1"}, {"agent_id": "w2"}]})
        team = made["team_id"]
        snap = await call(rt, "w1", "team_snapshot", {"action": "create", "team_id": team})
        await call(rt, "lead", "team_member_remove", {"team_id": team, "agent_id": "w2"})
        refused = await rt.tool_service(agent="w1").call(
            "team_snapshot", {"action": "restore", "snapshot_id": snap["snapshot_id"], "apply": True}
        )
        assert not refused.success and "only the team leader" in (refused.error or "")
        assert "w2" not in members(rt, team)
