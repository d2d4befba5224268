"""The persistent bubblewrap (zygote) of a workspace: shared across runs, restarted, replaced, stopped."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
from pathlib import Path

import anyio
import pytest
from aleph_exec._sandbox import bwrap_available

import aleph

from .conftest import make_runtime, processes_with, zombie_children

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here")

BWRAP = '[exec]\nisolation = "bwrap"\n'


async def bash(service: aleph.UnscopedToolService, command: str, **extra: object) -> dict:
    out = await service.execute("bash", {"command": command, **extra})
    return json.loads(out.text)


def sandbox_of(rt: aleph.Aleph):
    return rt.registry.get("bash").tool.sandbox


@pytest.mark.anyio
async def test_runs_share_one_zygote_and_each_gets_a_private_temporary_directory(workspace: Path) -> None:
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        first = await bash(service, 'echo "$TMPDIR"; echo kept > "$TMPDIR/f"; echo shared > /tmp/shared')
        zygote = sandbox_of(rt).zygote_pid
        second = await bash(service, 'echo "$TMPDIR"; ls -a /tmp; cat /tmp/shared 2>/dev/null || echo gone')
        assert zygote is not None and zygote == sandbox_of(rt).zygote_pid
    tmp_first = first["stdout"].splitlines()[0]
    lines = second["stdout"].splitlines()
    assert tmp_first.startswith("/tmp/aleph-run-") and lines[0].startswith("/tmp/aleph-run-")
    assert tmp_first != lines[0]
    # The first run's directory is gone, and so is what it wrote in /tmp: each call starts with an empty /tmp.
    assert Path(tmp_first).name not in lines
    assert "gone" == lines[-1]


@pytest.mark.anyio
async def test_concurrent_runs_in_one_workspace_each_get_their_own_result(workspace: Path) -> None:
    results: dict[int, dict] = {}
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)

        async def one(i: int) -> None:
            results[i] = await bash(service, f"sleep 0.3; echo run-{i}; echo err-{i} >&2; exit {i}")

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
    expected = {i: (i, f"run-{i}\n", f"err-{i}\n") for i in range(4)}
    assert expected == {i: (r["exit_code"], r["stdout"], r["stderr"]) for i, r in results.items()}


@pytest.mark.anyio
async def test_a_git_hooks_directory_created_between_runs_is_read_only_in_the_next_run(workspace: Path) -> None:
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        (workspace / ".git" / "hooks").mkdir(parents=True)
        out = await bash(service, "echo evil > .git/hooks/pre-commit && echo written")
    assert "written" not in out["stdout"]
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.anyio
async def test_a_killed_zygote_is_replaced_by_the_next_run(workspace: Path) -> None:
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        old = sandbox_of(rt).zygote_pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        with anyio.fail_after(10):
            while Path(f"/proc/{old}").exists():
                await anyio.sleep(0.01)
        out = await bash(service, "echo again")
        assert ("again\n", 0) == (out["stdout"], out["exit_code"])
        assert sandbox_of(rt).zygote_pid not in (None, old)


@pytest.mark.anyio
async def test_a_run_sent_to_a_zygote_that_just_died_runs_on_a_new_one(workspace: Path, monkeypatch) -> None:
    # bwrap outlives a killed zygote by a moment: a run in that window fails at the send and is run again.
    from aleph_exec._zygote_client import _Zygote

    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        old = sandbox_of(rt).zygote_pid
        assert old is not None
        dead = sandbox_of(rt)._zygote
        os.kill(old, signal.SIGKILL)
        with anyio.fail_after(10):
            while Path(f"/proc/{old}").exists():
                await anyio.sleep(0.01)
        real_alive = _Zygote.alive
        monkeypatch.setattr(_Zygote, "alive", lambda self: True if self is dead else real_alive(self))
        out = await bash(service, "echo again")
        assert ("again\n", 0) == (out["stdout"], out["exit_code"])
        assert sandbox_of(rt)._zygote is not dead and dead.retired


@pytest.mark.anyio
async def test_when_the_zygote_cannot_start_runs_fall_back_to_a_bubblewrap_each(
    workspace: Path, monkeypatch, tmp_path: Path
) -> None:
    import aleph_exec._namespace as sandbox_module

    real = sandbox_module._ZYGOTE_PATH
    broken = tmp_path / "zygote.py"
    broken.write_text("raise SystemExit('this zygote does not start')\n")
    monkeypatch.setattr(sandbox_module, "_ZYGOTE_PATH", broken)
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        out = await bash(service, "echo ok")
        sandbox = sandbox_of(rt)
        assert (None, True) == (sandbox.zygote_pid, "this zygote does not start" in (sandbox.zygote_error or ""))
        assert ("ok\n", True) == (out["stdout"], out["isolation"].startswith("bwrap"))

        # Later (after the retry interval) a zygote that can start again is used again.
        monkeypatch.setattr(sandbox_module, "_ZYGOTE_PATH", real)
        await bash(service, "true")
        assert (None, True) == (sandbox.zygote_pid, sandbox.zygote_error is not None)  # not retried yet
        monkeypatch.setattr(sandbox, "_zygote_retry_at", 0.0)
        again = await bash(service, "echo again")
        assert ("again\n", True, None) == (again["stdout"], sandbox.zygote_pid is not None, sandbox.zygote_error)


@pytest.mark.anyio
async def test_aclose_stops_the_zygote_and_leaves_no_process_or_zombie(workspace: Path) -> None:
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        zygote = sandbox_of(rt).zygote_pid
        assert zygote is not None and processes_with(str(workspace))
    assert not Path(f"/proc/{zygote}").exists()
    assert [] == processes_with(str(workspace))
    assert [] == zombie_children()
    # The run cgroups kept between runs are gone too.
    assert [] == list(Path("/sys/fs/cgroup/pids").glob(f"aleph-{os.getpid()}-*"))


@pytest.mark.anyio
async def test_commands_cannot_reach_into_the_zygote(workspace: Path) -> None:
    # Same uid, same PID namespace: the zygote is not dumpable, so its fds and memory stay closed.
    command = (
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/cmdline | grep -qx '.*/_zygote[.]py' && z=${p#/proc/}; done; "
        'echo "zygote=$z"; readlink /proc/$z/fd/0 >/dev/null 2>&1 && echo fds-readable; '
        "cat /proc/$z/environ >/dev/null 2>&1 && echo environ-readable; true"
    )
    async with make_runtime(workspace, BWRAP) as rt:
        out = await bash(aleph.UnscopedToolService(rt.registry), command)
    lines = out["stdout"].splitlines()
    assert lines[0].startswith("zygote=") and lines[0] != "zygote="
    assert [] == lines[1:]


@pytest.mark.anyio
async def test_cancelling_a_run_driven_by_the_event_loop_kills_it_and_the_zygote_serves_on(workspace: Path) -> None:
    token = str(600000 + secrets.randbelow(99999))
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        await bash(service, "true")
        zygote = sandbox_of(rt).zygote_pid
        with anyio.move_on_after(0.5):
            await service.execute("bash", {"command": f"sleep {token}"})
        with anyio.fail_after(10):
            while processes_with(token):
                await anyio.sleep(0.05)
        after = await bash(service, "echo again")
        assert ("again\n", zygote) == (after["stdout"], sandbox_of(rt).zygote_pid)
    assert [] == zombie_children()


@pytest.mark.anyio
async def test_a_request_too_large_for_one_control_message_follows_on_the_run_socket(workspace: Path) -> None:
    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        out = await bash(service, f"printf %s {'a' * 90_000} | wc -c")
    assert ("90000\n", 0) == (out["stdout"], out["exit_code"])


@pytest.mark.anyio
async def test_runs_leave_no_descriptor_behind_in_the_host_or_the_zygote(workspace: Path) -> None:
    # Each run passes a socket, pipes and an epoll, made ahead and closed late: none may pile up.
    # (Files are left out: a cgroup kept for later runs holds its cgroup.procs open.)
    def fds(pid: int | str) -> list[str]:
        kinds = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                kinds.append(os.readlink(f"/proc/{pid}/fd/{fd}").split(":")[0])
        return sorted(kind for kind in kinds if kind in ("socket", "pipe", "anon_inode"))

    async with make_runtime(workspace, BWRAP) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        for _ in range(3):
            await bash(service, "true")
        zygote = sandbox_of(rt).zygote_pid

        async def settled(want: object = None) -> tuple[list[str], list[str]]:
            # Descriptors are closed late (a cancelled run ends in a background thread): wait for the
            # condition (equal to ``want``, or unchanged between two looks), bounded, then take the view.
            seen = (fds("self"), fds(zygote))
            with anyio.move_on_after(20):
                while True:
                    await anyio.sleep(0.05)  # poll interval of the condition
                    now = (fds("self"), fds(zygote))
                    if now == want or (want is None and now == seen):
                        return now
                    seen = now
            return seen

        before = await settled()
        for i in range(30):
            await bash(service, "echo out; echo err >&2", timeout_seconds=30)
            if i % 10 == 0:
                with anyio.move_on_after(0.2):
                    await service.execute("bash", {"command": "sleep 5"})
        await bash(service, "true")
        assert (before, zygote) == (await settled(before), sandbox_of(rt).zygote_pid)


@pytest.mark.anyio
async def test_a_change_in_the_hosts_allowed_environment_reaches_the_next_run(workspace: Path, monkeypatch) -> None:
    # The environment's encoding is kept from run to run: a changed value must still get through.
    monkeypatch.setenv("ALEPH_TEST_PASSED", "one")
    async with make_runtime(workspace, f'{BWRAP}env_allow = ["ALEPH_TEST_PASSED"]\n') as rt:
        service = aleph.UnscopedToolService(rt.registry)
        first = await bash(service, 'echo "$ALEPH_TEST_PASSED $ALEPH_SANDBOX_RUN"')
        monkeypatch.setenv("ALEPH_TEST_PASSED", "two")
        second = await bash(service, 'echo "$ALEPH_TEST_PASSED $ALEPH_SANDBOX_RUN"')
    (value1, marker1), (value2, marker2) = first["stdout"].split(), second["stdout"].split()
    assert ("one", "two") == (value1, value2)
    assert marker1 != marker2 and len(marker1) == len(marker2) == 24


@pytest.mark.anyio
async def test_arguments_and_environment_reach_the_command_byte_for_byte(workspace: Path, monkeypatch) -> None:
    # The request carries them NUL-separated: spaces, empty strings, tabs, newlines, '=' and non-ASCII survive.
    monkeypatch.setenv("ALEPH_TEST_PASSED", "a=b\nnext line é")
    async with make_runtime(workspace, f'{BWRAP}env_allow = ["ALEPH_TEST_PASSED"]\n') as rt:
        service = aleph.UnscopedToolService(rt.registry)
        out = await bash(service, "printf '%s|' 'a b' '' $'tab\\there' 'é☃'\necho\nprintf '%s' \"$ALEPH_TEST_PASSED\"")
        with pytest.raises(aleph.ExecutionFailed, match="NUL byte"):
            await service.execute("bash", {"command": "echo a\x00b"})
        after = await bash(service, "echo still fine")
    assert "a b||tab\there|é☃|\na=b\nnext line é" == out["stdout"]
    assert "still fine\n" == after["stdout"]
