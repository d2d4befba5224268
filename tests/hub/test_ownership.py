"""Skill state is each principal's own: one agent's enable, pin, archive and use counts never reach another's."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aleph_hub._store import HubStore

import aleph

from .conftest import hub_runtime
from .test_skills import make_skill, project


async def as_agent(rt: aleph.Aleph, agent: str, name: str, payload: dict[str, Any]) -> Any:
    # A person approves a skill's bytes before it is served (skill consent); these tests are about state.
    approve = aleph.ScriptedRequester(lambda request: aleph.ApprovalResponse(aleph.ApprovalOutcome.APPROVED))
    return (await rt.tool_service(agent=agent, tier="auto", requester=approve).execute(name, payload)).value


def test_one_agents_skill_choices_are_invisible_and_immutable_to_another(tmp_path: Path) -> None:
    make_skill(project(tmp_path), "deploy", "Deploy the service.")
    make_skill(project(tmp_path), "notes", "Take notes.")

    async def go() -> None:
        async with hub_runtime(tmp_path) as rt:
            await as_agent(rt, "alice", "skill_manage", {"action": "configure", "skill_id": "deploy", "enabled": False})
            await as_agent(rt, "alice", "skill_manage", {"action": "archive", "skill_id": "notes"})
            await as_agent(rt, "alice", "skill_read", {"skill_id": "deploy"})
            mallory = await as_agent(rt, "mallory", "skill_status", {})
            by_id = {s["id"]: s for s in mallory["skills"]}
            assert by_id["deploy"]["disabled"] is False and by_id["deploy"]["usage"] == {"uses": 0, "views": 0}
            assert {s["id"] for s in (await as_agent(rt, "mallory", "skill_list", {}))["skills"]} == {"deploy", "notes"}
            # mallory's choices change mallory's view only
            await as_agent(
                rt, "mallory", "skill_manage", {"action": "configure", "skill_id": "deploy", "enabled": True}
            )
            await as_agent(rt, "mallory", "skill_manage", {"action": "restore", "skill_id": "notes"})
            alice = {s["id"]: s for s in (await as_agent(rt, "alice", "skill_status", {}))["skills"]}
            assert alice["deploy"]["disabled"] is True and alice["deploy"]["usage"]["uses"] == 1
            assert [s["id"] for s in (await as_agent(rt, "alice", "skill_list", {}))["skills"]] == ["deploy"]
            # a pin by anyone protects the shared files
            await as_agent(rt, "alice", "skill_manage", {"action": "pin", "skill_id": "deploy"})
            with pytest.raises(aleph.ExecutionFailed, match="pinned"):
                await as_agent(rt, "mallory", "skill_manage", {"action": "delete", "skill_id": "deploy"})

    asyncio.run(go())
    assert (project(tmp_path) / "deploy" / "SKILL.md").is_file()


def test_a_version_1_hub_store_gives_its_skill_state_to_the_default_agent(tmp_path: Path) -> None:
    path = tmp_path / "hub.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE skill_state (id TEXT PRIMARY KEY, enabled INTEGER, scope TEXT,
                pinned INTEGER NOT NULL DEFAULT 0, archived INTEGER NOT NULL DEFAULT 0,
                uses INTEGER NOT NULL DEFAULT 0, views INTEGER NOT NULL DEFAULT 0);
            INSERT INTO skill_state (id, enabled, pinned, uses) VALUES ('deploy', 0, 1, 7);
            PRAGMA user_version = 1;
            """
        )
    store = HubStore(path)
    try:
        assert store.skill_states(owner="main")["deploy"]["uses"] == 7
        assert store.skill_states(owner="mallory") == {}
        assert store.pinned("deploy")
    finally:
        store.close()
