"""No state leaks between sandboxed calls: the sandbox's root and /etc are read-only and /tmp starts empty.

Two agents (and two sessions) share one workspace sandbox; what one call leaves outside the workspace
is never seen by the next. The workspace itself lives under /tmp here (pytest's tmp_path), bound below
the sandbox's /tmp: clearing /tmp must never reach into it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import aleph_exec.plugin
import pytest
from aleph_exec._namespace import bwrap_available

import aleph
from aleph.testing import isolated_runtime

pytestmark = pytest.mark.anyio

PLANT = (
    "echo secret > /tmp/planted; mkdir -p /tmp/d && echo secret > /tmp/d/x; "
    "echo secret > /etc/planted; mkdir /planted; echo secret >> /etc/profile; "
    "echo secret > {parent}/beside; true"
)
LOOK = (
    "for p in /tmp/planted /tmp/d /etc/planted /planted {parent}/beside; do [ -e $p ] && echo LEAK $p; done; "
    "grep -q secret /etc/profile && echo LEAK profile; ls -A /tmp | grep -v '^aleph-run-'; true"
)


def _needs_bwrap() -> None:
    if not bwrap_available():
        if os.environ.get("CI") == "true":
            pytest.fail("bubblewrap is needed here")
        pytest.skip("no bubblewrap here")


async def _bash(rt: aleph.Aleph, agent: str, session: str, command: str) -> dict[str, object]:
    turn = aleph.TurnContext(session_key=session)
    out = await rt.tool_service(agent=agent, turn=turn, tier="full").execute("bash", {"command": command})
    result: dict[str, object] = json.loads(out.text)
    return result


@pytest.mark.parametrize("network", ["none", "proxied", "host"])  # transactions, and direct runs
async def test_what_one_agent_leaves_outside_the_workspace_the_next_call_never_sees(
    workspace: Path, network: str
) -> None:
    _needs_bwrap()
    (workspace / "keep.txt").write_text("mine\n")
    parent = workspace.parent
    async with isolated_runtime(workspace, aleph_exec.plugin, config_toml=f'[exec]\nnetwork = "{network}"\n') as rt:
        planted = await _bash(rt, "alice", "s1", PLANT.format(parent=parent))
        seen_by_bob = await _bash(rt, "bob", "s2", LOOK.format(parent=parent))
        seen_by_alice = await _bash(rt, "alice", "s1", LOOK.format(parent=parent))
        still = await _bash(rt, "alice", "s1", "cat keep.txt")
    assert "Read-only file system" in str(planted["stderr"]), planted
    for seen in (seen_by_bob, seen_by_alice):
        out = str(seen["stdout"])
        assert ("LEAK" not in out, "planted" not in out, "secret" not in out) == (True, True, True), out
    assert "mine\n" == still["stdout"]
    assert "mine\n" == (workspace / "keep.txt").read_text()  # the workspace below /tmp was never cleared
    assert not (parent / "beside").exists()  # the host's /tmp was never written
