"""The zygote with and without bubblewrap: in its namespace or on the host, it finds a run's processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from aleph_exec._sandbox import bwrap_available

import aleph

from .conftest import make_runtime, processes_with, zombie_children

pytestmark = pytest.mark.anyio

NO_BWRAP = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here")
MODES = [
    pytest.param('[exec]\nisolation = "none"\ncgroup = "off"\n', id="host"),
    pytest.param('[exec]\nisolation = "none"\n', id="host-cgroup-if-any"),
    pytest.param('[exec]\nisolation = "bwrap"\ncgroup = "off"\n', id="bwrap", marks=NO_BWRAP),
    pytest.param('[exec]\nisolation = "bwrap"\n', id="bwrap-cgroup-if-any", marks=NO_BWRAP),
]


async def bash(service: aleph.UnscopedToolService, command: str, **extra: object) -> dict:
    out = await service.execute("bash", {"command": command, **extra})
    return json.loads(out.text)


def sandbox_of(rt: aleph.Aleph):
    return rt.registry.get("bash").tool.sandbox


async def test_runs_share_one_zygote_on_the_host_with_a_private_temporary_directory_each(workspace: Path) -> None:
    async with make_runtime(workspace, '[exec]\nisolation = "none"\ncgroup = "off"\n') as rt:
        service = aleph.UnscopedToolService(rt.registry)
        first = await bash(service, 'echo "$TMPDIR"; touch "$TMPDIR/mine"')
        zygote = sandbox_of(rt).zygote_pid
        second = await bash(service, 'echo "$TMPDIR"; ls "$TMPDIR"')
        assert zygote is not None and zygote == sandbox_of(rt).zygote_pid
    tmp_first, tmp_second = first["stdout"].strip(), second["stdout"].strip()
    assert (first["isolation"], tmp_first.startswith(f"/tmp/aleph-run-{zygote}-")) == ("none", True)
    assert tmp_second != tmp_first and not Path(tmp_first).exists()
    # Closed: nothing of the server's is left in the host's /tmp, the directory it made ahead for a next run
    # included (each one left behind before).
    assert sorted(Path("/tmp").glob(f"aleph-run-{zygote}-*")) == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_process_that_left_the_session_and_cleared_its_environment_does_not_outlive_the_call(
    workspace: Path, mode: str
) -> None:
    # No session, group or marker leads to it; it is still a descendant of the zygote (a subreaper).
    token = str(600000 + secrets.randbelow(99999))
    async with make_runtime(workspace, mode) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        out = await bash(service, f"(setsid env -i sleep {token} &) ; sleep 0.2; echo started")
        assert ("started\n", sandbox_of(rt).zygote_pid is not None) == (out["stdout"], True)
        assert [] == processes_with(token)
    assert [] == zombie_children()


@pytest.mark.parametrize("mode", MODES)
async def test_when_the_zygote_dies_mid_run_the_run_ends_with_a_clear_error_and_a_new_zygote_serves(
    workspace: Path, mode: str
) -> None:
    # In bubblewrap the namespace dies with the zygote; on the host the run's processes are the host's to end.
    token = str(500000 + secrets.randbelow(99999))
    async with make_runtime(workspace, mode) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        zygote = sandbox_of(rt).zygote_pid
        assert zygote is not None

        async def kill_soon() -> None:
            while not processes_with(token):
                await anyio.sleep(0.01)
            os.kill(zygote, signal.SIGKILL)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_soon)
                with pytest.raises(aleph.ExecutionFailed, match="sandbox server stopped during the run"):
                    await bash(service, f"sleep {token} & sleep {token}", timeout_seconds=60)
        assert [] == processes_with(token)
        assert "fine\n" == (await bash(service, "echo fine"))["stdout"]
        assert sandbox_of(rt).zygote_pid not in (None, zygote)
    assert [] == zombie_children()


@pytest.mark.parametrize("mode", MODES)
async def test_each_run_of_one_zygote_gets_its_own_limits_and_the_zygote_keeps_serving_many_at_once(
    workspace: Path, mode: str
) -> None:
    # The zygote sets its soft limits for a run and keeps the CPU one for the next: a run that wants
    # another gets it, soft and hard; the open-file one is its own again between spawns, so more runs
    # can be in flight than a run may open files. Runs in flight at once have a cgroup each (if any), and
    # take the one kit the zygote holds ahead in turn: the others bring theirs.
    # Soft limits from birth; hard ones come by prlimit a moment after the start (see Zygote.spawn).
    limits = "ulimit -S -t -n -u; sleep 0.2; ulimit -H -t -n -u"
    async with make_runtime(workspace, mode + "max_open_files = 64\nmax_processes = 50\n") as rt:
        service = aleph.UnscopedToolService(rt.registry)
        for timeout in (20, 40, 20):  # CPU seconds: the wall-time limit + 5, and 5 more for the hard limit
            out = await bash(service, limits, timeout_seconds=timeout)
            values = [line.rsplit(" ", 1)[-1] for line in out["stdout"].splitlines()]
            assert values == [str(timeout + 5), "64", "50", str(timeout + 10), "64", "50"]
        zygote = sandbox_of(rt).zygote_pid
        results: list[dict] = []

        async def one(i: int) -> None:
            results.append(await bash(service, f"grep -E ':pids:|^0::' /proc/self/cgroup; sleep 0.5; echo {i}"))

        async with anyio.create_task_group() as tg:
            for i in range(30):  # three descriptors per run held by the zygote: 90 > 64
                tg.start_soon(one, i)
        assert sandbox_of(rt).zygote_pid == zygote
    assert sorted(int(r["stdout"].split()[-1]) for r in results) == list(range(30))
    if results[0]["isolation"].endswith("+cgroup"):  # each run was started in its own cgroup
        assert len({r["stdout"].split()[0] for r in results}) == 30


def children_of(pid: int) -> list[str]:
    """The children of ``pid`` (zombies included), each as "pid state"; not the zygote's closer process."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:  # a thread or a child that ends between the listing and the read is gone: not a child any more
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                children = fh.read().split()
        except FileNotFoundError:
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/stat") as stat:
                    text = stat.read()
            except FileNotFoundError:
                continue
            if "(aleph-closer)" not in text:
                found.append(f"{child} {text.rsplit(')', 1)[1].split()[0]}")
    return found


@pytest.mark.parametrize("mode", MODES)
async def test_what_a_run_left_is_killed_and_reaped_when_the_host_closes_it_without_another_run(
    workspace: Path, mode: str
) -> None:
    # The command exits at once and leaves a process behind; the host closes the run without asking
    # about it (a host that gave up on it). The zygote kills what is left and reaps it, although no
    # exit of a command it watches and no later run wakes it.
    token = str(700000 + secrets.randbelow(99999))
    async with make_runtime(workspace, mode) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        sandbox = sandbox_of(rt)
        zygote = sandbox._acquire_zygote()
        argv = ["bash", "-c", f"sleep {token} & exit 3"]
        run = sandbox._stage(zygote, argv, workspace, sandbox._run_env(), None, 30, None)
        run.send()
        with anyio.fail_after(10):
            while run.poll() is None:
                await anyio.sleep(0.01)
            assert (run.returncode, run.left, len(children_of(sandbox.zygote_pid))) == (3, 1, 1)
            run.close()
            sandbox._release(zygote)
            while children_of(sandbox.zygote_pid):
                await anyio.sleep(0.01)
        assert [] == processes_with(token)
        assert "fine\n" == (await bash(service, "echo fine"))["stdout"]


@pytest.mark.parametrize("mode", MODES[:1])
async def test_runs_in_flight_together_each_keep_their_own_wall_time_limit(workspace: Path, mode: str) -> None:
    # The runs of one event loop share one timer, set for the earliest deadline: a short limit after
    # or beside a long one still ends its run on time, and the long one runs on.
    async with make_runtime(workspace, mode) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        assert (await bash(service, "echo long", timeout_seconds=60))["stdout"] == "long\n"
        loop = asyncio.get_running_loop()
        results: dict[str, dict] = {}

        async def one(name: str, command: str, timeout: float) -> None:
            start = loop.time()
            results[name] = await bash(service, command, timeout_seconds=timeout)
            results[name]["took"] = loop.time() - start

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "long", "sleep 1.5; echo done", 60)
                tg.start_soon(one, "short", "sleep 30", 0.5)
            await one("again", "sleep 30", 0.5)
    assert (results["long"]["timed_out"], results["long"]["stdout"]) == (False, "done\n")
    for name in ("short", "again"):
        assert results[name]["timed_out"] is True and results[name]["took"] < 5, results[name]


HOST_SCRIPT = """
import asyncio, sys
from pathlib import Path
import aleph, aleph_exec.plugin
from aleph.testing import isolated_runtime

async def main():
    toml = '[exec]\\nisolation = "none"\\ncgroup = "off"\\n'
    async with isolated_runtime(Path(sys.argv[1]), aleph_exec.plugin, config_toml=toml) as rt:
        await aleph.UnscopedToolService(rt.registry).execute("bash", {"command": sys.argv[2], "timeout_seconds": 60})

asyncio.run(main())
"""


async def test_when_the_host_dies_without_bubblewrap_what_its_runs_started_dies_too(workspace: Path) -> None:
    # The host is killed outright (SIGKILL: no clean-up of its own) while a run has a process in the
    # background, one that left its session and cleared its environment too. The zygote on the host
    # is told (PR_SET_PDEATHSIG, SIGTERM) and ends every process of its runs before it exits.
    from aleph_exec._processes import _become_subreaper

    _become_subreaper()  # the dead host's zygote comes to us to be reaped, whatever PID 1 does
    token = str(800000 + secrets.randbelow(99999))
    command = f"(setsid env -i sleep {token} &); sleep {token} & sleep {token}"
    host = subprocess.Popen([sys.executable, "-c", HOST_SCRIPT, str(workspace), command])
    try:
        with anyio.fail_after(30):
            while len(processes_with(f"sleep {token}")) < 3:
                await anyio.sleep(0.02)
        zygotes = [int(child.split()[0]) for child in children_of(host.pid)]
    finally:
        host.kill()
        host.wait()
    try:
        with anyio.fail_after(10):
            while processes_with(f"sleep {token}"):
                await anyio.sleep(0.02)
        # The zygote has exited too, re-parented to this process.
        while any(os.path.exists(f"/proc/{pid}") for pid in zygotes):
            for pid in zygotes:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            await anyio.sleep(0.02)
    finally:  # a failure leaves nothing behind either
        for line in processes_with(f"sleep {token}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
