"""Deletions add up: the commit thresholds apply to a session's and an agent's running totals."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from aleph_exec._tally import Tally

import aleph

from .txn_helpers import needs_overlay, overlay_runtime

pytestmark = needs_overlay


def _files(workspace: Path, n: int) -> None:
    (workspace / "data").mkdir()
    for i in range(n):
        (workspace / "data" / f"f{i:03}.txt").write_text(f"{i}\n")


async def _delete(rt: aleph.Aleph, agent: str, session: str, first: int, requester: Any = None) -> dict[str, Any]:
    """One call of ``agent`` in ``session`` deleting data/f<first>..f<first+19>."""
    names = " ".join(f"data/f{i:03}.txt" for i in range(first, first + 20))
    turn = aleph.TurnContext(session_key=session, call_id=f"c{secrets.token_hex(4)}")
    service = rt.tool_service(agent=agent, turn=turn, requester=requester or aleph.ScriptedRequester([]))
    out = await service.execute("overlay_bash", {"command": f"rm {names}"})
    changes: dict[str, Any] = json.loads(out.text)["changes"]
    return changes


@pytest.mark.anyio
async def test_small_deletions_of_one_session_add_up_to_a_question(workspace: Path) -> None:
    _files(workspace, 120)
    rt, _ = overlay_runtime(workspace)
    async with rt:
        first = await _delete(rt, "coder", "s1", 0)
        second = await _delete(rt, "coder", "s1", 20)
    assert ("committed", "refused") == (first["status"], second["status"])
    assert "with the 20 this session committed since a person last approved" in second["reason"]
    assert 100 == len(list((workspace / "data").iterdir()))


@pytest.mark.anyio
async def test_a_new_session_of_the_same_agent_does_not_start_afresh_but_another_agent_does(
    workspace: Path,
) -> None:
    _files(workspace, 120)
    rt, _ = overlay_runtime(workspace)
    async with rt:
        assert "committed" == (await _delete(rt, "coder", "s1", 0))["status"]
        again = await _delete(rt, "coder", "s2", 20)
        other = await _delete(rt, "reviewer", "s9", 40)
    assert ("refused", "committed") == (again["status"], other["status"])
    assert "this agent" in again["reason"]


@pytest.mark.anyio
async def test_an_approval_covers_the_total_and_counting_starts_again(workspace: Path) -> None:
    _files(workspace, 120)
    rt, _ = overlay_runtime(workspace)
    yes = aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED])
    async with rt:
        assert "committed" == (await _delete(rt, "coder", "s1", 0))["status"]
        assert "committed" == (await _delete(rt, "coder", "s1", 20, yes))["status"]  # asked, approved
        third = await _delete(rt, "coder", "s1", 40)
    assert "committed" == third["status"]
    assert 60 == len(list((workspace / "data").iterdir()))


def test_the_agent_total_forgets_what_is_older_than_the_window() -> None:
    tally = Tally(window_s=0.0)
    keys = Tally.keys("coder", "s1")
    tally.add(keys, 30, 30)
    prior = tally.prior(keys)
    assert (30, "this session") == (prior.destructive, prior.scope)  # the session keeps its total
    assert 0 == tally.prior(Tally.keys("coder", "s2")).destructive  # the agent's is past the window
