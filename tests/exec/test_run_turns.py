"""Commands of different principals never share the sandbox at the same time.

All runs of a workspace go through one zygote, in one PID namespace, as one user: a command could
reach another run's processes through ``/proc`` (its environment; its copy-on-write view of the
workspace through ``/proc/<pid>/root``, where a write lands in the *other* run's transaction and is
committed under the other agent's name and policy). Runs therefore take turns by principal.

The commands below look for each other through ``/proc`` for a bounded time (their own polling, inside
the sandbox); the test itself waits only on the calls.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aleph_exec._capture import SandboxError
from aleph_exec._sandbox import bwrap_available
from aleph_exec._turns import PrincipalTurns

import aleph

from .conftest import make_runtime

# Looks for a process whose command line holds argv[1] for up to argv[2] seconds; then, when its last
# argument is "plant", writes into that process's view of the workspace; else it stays until the other
# process has found it too (so two seekers both find each other, whichever starts first).
SEEK = """\
import os, sys, time
want, until, plant = sys.argv[1].encode(), time.monotonic() + float(sys.argv[2]), sys.argv[-1] == 'plant'
while time.monotonic() < until:
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) in (os.getpid(), os.getppid()):
            continue
        try:
            if want not in open(f'/proc/{d}/cmdline', 'rb').read():
                continue
        except OSError:
            continue
        print('found')
        if plant:
            try:
                open(f'/proc/{d}/root' + os.readlink(f'/proc/{d}/cwd') + '/planted.txt', 'w').write('from B')
                print('planted')
            except OSError as exc:
                print('refused', exc.errno)
            sys.exit(0)
        # Stay until the other one has found this one too (it marks its name), or is gone.
        open('/proc/self/comm', 'w').write('found-peer')
        while time.monotonic() < until:
            try:
                if open(f'/proc/{d}/comm').read().strip() == 'found-peer':
                    break
            except OSError:
                break
            time.sleep(0.02)
        sys.exit(0)
    time.sleep(0.02)
print('alone')
"""
# Waits up to argv[1] seconds for planted.txt to appear in its own view of the workspace.
WAIT = """\
import os, sys, time
until = time.monotonic() + float(sys.argv[1])
while time.monotonic() < until and not os.path.exists('planted.txt'):
    time.sleep(0.02)
print('planted' if os.path.exists('planted.txt') else 'untouched')
"""

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here")


async def bash(rt: aleph.Aleph, command: str, agent: str) -> dict[str, Any]:
    out = await rt.tool_service(tier="full", agent=agent).execute("bash", {"command": command, "timeout_seconds": 60})
    result: dict[str, Any] = json.loads(out.text)
    return result


@needs_bwrap
@pytest.mark.anyio
async def test_another_agents_run_cannot_write_into_a_running_commands_transaction(workspace: Path) -> None:
    (workspace / "seek.py").write_text(SEEK)
    (workspace / "wait.py").write_text(WAIT)
    async with make_runtime(workspace) as rt:
        a, b = await asyncio.gather(
            bash(rt, "python3 wait.py 2", agent="alice"),
            bash(rt, "python3 seek.py wait.py 2 plant", agent="mallory"),
        )
    # mallory's command never met alice's: it ran after alice's was over, so nothing reached her layer.
    assert (a["stdout"].strip(), b["stdout"].strip()) == ("untouched", "alone"), (a, b)
    assert a["changes"]["status"] == "unchanged" and not (workspace / "planted.txt").exists()


@needs_bwrap
@pytest.mark.anyio
async def test_runs_of_one_agent_still_run_side_by_side(workspace: Path) -> None:
    (workspace / "seek.py").write_text(SEEK)
    async with make_runtime(workspace) as rt:
        one, two = await asyncio.gather(
            bash(rt, "python3 seek.py tag-two 20 tag-one", agent="alice"),
            bash(rt, "python3 seek.py tag-one 20 tag-two", agent="alice"),
        )
    # Each found the other while both ran (neither waited for the other's end).
    assert one["stdout"].splitlines()[0] == two["stdout"].splitlines()[0] == "found", (one, two)


@pytest.mark.anyio
async def test_a_waiting_principal_goes_before_more_runs_of_the_busy_one() -> None:
    turns = PrincipalTurns()
    assert turns.try_enter("alice")
    waiting = asyncio.ensure_future(turns.aenter("bob", 30))
    await asyncio.sleep(0)  # let bob queue (a scheduling step, not a wait for time)
    assert not waiting.done()
    assert not turns.try_enter("alice")  # bob waits: alice's next run queues behind him
    later = asyncio.ensure_future(turns.aenter("alice", 30))
    await asyncio.sleep(0)
    turns.leave()
    await waiting  # alice's run is over: bob's turn
    assert not later.done() and turns.active == 1
    turns.leave()
    await later
    assert turns.active == 1
    turns.leave()
    assert turns.try_enter("carol")


@pytest.mark.anyio
async def test_a_run_that_waits_past_its_timeout_says_why_and_leaves_the_queue() -> None:
    turns = PrincipalTurns()
    assert turns.try_enter("alice")
    with pytest.raises(SandboxError, match="busy with another agent's commands"):
        await turns.aenter("bob", 0.05)
    turns.leave()
    assert turns.try_enter("carol")  # bob is not left in the queue holding anyone back


@pytest.mark.anyio
async def test_a_cancelled_waiter_passes_the_turn_on() -> None:
    turns = PrincipalTurns()
    assert turns.try_enter("alice")
    bob = asyncio.ensure_future(turns.aenter("bob", 30))
    carol = asyncio.ensure_future(turns.aenter("carol", 30))
    await asyncio.sleep(0)
    bob.cancel()
    with pytest.raises(asyncio.CancelledError):
        await bob
    turns.leave()
    await carol
    assert turns.active == 1


def test_a_turn_granted_to_a_waiter_whose_loop_is_gone_goes_back() -> None:
    turns = PrincipalTurns()
    assert turns.try_enter("alice")
    loop = asyncio.new_event_loop()
    waiting = loop.create_task(turns.aenter("bob", 30))
    loop.run_until_complete(asyncio.sleep(0))  # bob is queued
    assert not waiting.done()
    loop.close()  # the host's loop went away with bob still waiting
    turns.leave()  # alice is done: bob's turn, which nobody can take any more
    assert turns.active == 0 and turns.try_enter("carol")
