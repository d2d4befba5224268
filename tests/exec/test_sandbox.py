"""The sandbox with real subprocesses: timeouts, process caps, output caps, environment, working directory."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
from pathlib import Path

import pytest
from aleph_exec._sandbox import bwrap_available

import aleph

from .conftest import make_runtime, processes_named, processes_with, run, zombie_children


def cgroup_writable() -> bool:
    return os.access("/sys/fs/cgroup/pids", os.W_OK)


NO_BWRAP = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here")
NO_CGROUP = pytest.mark.skipif(not cgroup_writable(), reason="no writable pids cgroup: root ignores RLIMIT_NPROC")


def no_zygote(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Make the zygote fail to start, so runs take the direct path (a spawn, or a bwrap, each)."""
    import aleph_exec._namespace as sandbox_module

    broken = tmp_path / "no-zygote.py"
    broken.write_text("raise SystemExit('no zygote in this test')\n")
    monkeypatch.setattr(sandbox_module, "_ZYGOTE_PATH", broken)


@pytest.fixture(params=["zygote", "direct"])
def spawn(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """How runs start: through the workspace's zygote, or directly (the fallback when it cannot start)."""
    if request.param == "direct":
        no_zygote(monkeypatch, tmp_path)
    return str(request.param)


MODES = [
    pytest.param('isolation = "none"\ncgroup = "off"\n', id="plain"),
    pytest.param('isolation = "none"\n', id="cgroup"),
    pytest.param('isolation = "bwrap"\ncgroup = "off"\n', id="bwrap", marks=NO_BWRAP),
    pytest.param('isolation = "bwrap"\n', id="bwrap-cgroup", marks=[NO_BWRAP, NO_CGROUP]),
]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_timeout_kills_grandchildren_including_setsid_ones_and_leaves_no_zombie(
    workspace: Path, mode: str, spawn: str
) -> None:
    # A copy of sleep under a unique name: its comm identifies our processes, zombies included.
    token = f"zz{secrets.token_hex(4)}"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", workspace / token)
    command = f"./{token} 1001 & setsid ./{token} 1002 & (./{token} 1003 &) ; ./{token} 1004"
    out = await run(workspace, "bash", {"command": command, "timeout_seconds": 1}, f"[exec]\n{mode}")
    assert (True, None) == (out["timed_out"], out["exit_code"])
    assert [] == processes_named(token)
    assert [] == zombie_children()


@pytest.mark.anyio
async def test_background_process_does_not_outlive_a_finished_command(workspace: Path) -> None:
    token = str(800000 + secrets.randbelow(99999))
    out = await run(workspace, "bash", {"command": f"setsid sleep {token} & echo started"})
    assert ("started\n", False) == (out["stdout"], out["timed_out"])
    assert [] == processes_with(token)


@pytest.mark.anyio
@NO_CGROUP
@pytest.mark.parametrize("isolation", ["none", pytest.param("bwrap", marks=NO_BWRAP)])
async def test_fork_loop_is_contained_by_the_process_cap(workspace: Path, isolation: str) -> None:
    token = str(700000 + secrets.randbelow(99999))
    command = f"for i in $(seq 1 500); do sleep {token} & done; wait"
    out = await run(
        workspace,
        "bash",
        {"command": command, "timeout_seconds": 3},
        f'[exec]\nisolation = "{isolation}"\nmax_processes = 32\n',
    )
    assert "Resource temporarily unavailable" in out["stderr"] or "retry" in out["stderr"]
    assert out["isolation"] == ("bwrap+userns+cgroup" if isolation == "bwrap" else "none+cgroup")
    assert [] == processes_with(token)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_endless_output_is_capped_with_a_marker_and_killed(workspace: Path, mode: str, spawn: str) -> None:
    toml = f"[exec]\n{mode}max_output_bytes = 4096\noutput_kill_bytes = 1048576\n"
    out = await run(workspace, "bash", {"command": "yes", "timeout_seconds": 60}, toml)
    assert (True, "output limit (1048576 bytes)") == (out["truncated"], out["killed"])
    assert "bytes truncated ...]" in out["stdout"]
    # The result says how the command ended and how much of its output it holds.
    assert out["exit_code"] in (128 + signal.SIGTERM, 128 + signal.SIGKILL)  # stopped by us, as a shell says it
    sizes = out["output_bytes"]["stdout"]
    assert sizes["kept"] == 4096 and sizes["dropped"] == sizes["total"] - 4096 and sizes["total"] > 1048576 - 4096
    assert len(out["stdout"]) < 4096 + 100
    assert out["stdout"].startswith("y\ny\n") and out["stdout"].endswith("y\n")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_environment_is_scrubbed_of_host_secrets(workspace: Path, mode: str, monkeypatch) -> None:
    monkeypatch.setenv("ALEPH_TEST_HOST_SECRET", "s3cr3t-value")
    monkeypatch.setenv("ALEPH_TEST_ALLOWED", "visible")
    toml = f'[exec]\n{mode}env_allow = ["ALEPH_TEST_ALLOWED"]\n'
    out = await run(workspace, "bash", {"command": "env"}, toml)
    assert "s3cr3t-value" not in out["stdout"]
    assert "ALEPH_TEST_ALLOWED=visible" in out["stdout"]
    assert f"HOME={workspace}" in out["stdout"]


@pytest.mark.anyio
async def test_working_dir_must_stay_inside_the_workspace(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    out = await run(workspace, "bash", {"command": "pwd", "working_dir": "sub"})
    assert f"{workspace}/sub\n" == out["stdout"]
    (workspace / "esc").symlink_to("/etc")
    for bad in ("..", "../..", "/etc", "esc", "sub/../../x", "nope"):
        with pytest.raises(aleph.ValidationFailed, match="working_dir"):
            await run(workspace, "bash", {"command": "pwd", "working_dir": bad})


@pytest.mark.anyio
@NO_BWRAP
@pytest.mark.parametrize("network", ["none", "proxied"])
async def test_bwrap_keeps_system_read_only_protected_files_read_only_and_network_off(
    workspace: Path, network: str
) -> None:
    command = (
        "touch /usr/aleph-probe 2>/dev/null && echo usr-writable; "
        "echo x >> aleph.toml 2>/dev/null && echo toml-writable; "
        "echo ok > inside.txt && cat inside.txt; "
        "cat /proc/net/dev | grep -c : ; "
        "echo pid=$$"
    )
    out = await run(workspace, "bash", {"command": command}, f'[exec]\nisolation = "bwrap"\nnetwork = "{network}"\n')
    assert "usr-writable" not in out["stdout"] and "toml-writable" not in out["stdout"]
    assert "ok\n" in out["stdout"]
    assert (workspace / "inside.txt").read_text() == "ok\n"
    assert "1\n" in out["stdout"]  # only the loopback interface: no network but through the proxy
    assert (network, True) == (out["network"], out["isolation"].startswith("bwrap"))
    assert int(out["stdout"].split("pid=")[1]) < 10  # own PID namespace


@pytest.mark.anyio
async def test_streaming_lines_reach_the_progress_handler(workspace: Path) -> None:
    chunks: list[tuple[str, str]] = []

    class Recorder:
        def on_tool_start(self, tool_name: str, args_summary: str) -> None: ...

        def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None: ...

        def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
            chunks.append((tool_name, chunk))

    previous = aleph.set_tool_progress_handler(Recorder())
    try:
        out = await run(workspace, "bash", {"command": "echo one; echo two; printf three"})
    finally:
        aleph.set_tool_progress_handler(previous)
    assert [("bash", "one"), ("bash", "two"), ("bash", "three")] == chunks
    assert "one\ntwo\nthree" == out["stdout"]


@pytest.mark.anyio
async def test_a_progress_handler_that_raises_changes_nothing_in_the_run(workspace: Path) -> None:
    class Broken:
        def on_tool_start(self, tool_name: str, args_summary: str) -> None: ...

        def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None: ...

        def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
            raise RuntimeError("the UI is gone")

    previous = aleph.set_tool_progress_handler(Broken())
    try:
        out = await run(workspace, "bash", {"command": "echo one; echo two; sleep 0.2; echo three; exit 4"})
    finally:
        aleph.set_tool_progress_handler(previous)
    assert (4, "one\ntwo\nthree\n", False) == (out["exit_code"], out["stdout"], out["timed_out"])


@pytest.mark.anyio
async def test_results_report_exit_code_and_isolation(workspace: Path) -> None:
    out = await run(workspace, "bash", {"command": "echo err >&2; exit 3"})
    assert (3, "err\n", False) == (out["exit_code"], out["stderr"], out["timed_out"])
    assert out["isolation"].split("+")[0] in ("bwrap", "none")


@pytest.mark.anyio
async def test_cancelling_the_caller_kills_the_run(workspace: Path) -> None:
    import anyio

    token = str(600000 + secrets.randbelow(99999))
    async with make_runtime(workspace) as rt:
        service = aleph.UnscopedToolService(rt.registry)
        with anyio.move_on_after(0.5):
            await service.execute("bash", {"command": f"sleep {token}"})
        with anyio.fail_after(10):
            while processes_with(token):
                await anyio.sleep(0.05)
    assert [] == processes_with(token)


def test_shell_command_contract_for_the_chokepoint(tmp_path: Path) -> None:
    rt = make_runtime(tmp_path)
    bash = rt.registry.get("bash").tool
    code = rt.registry.get("code_exec").tool
    assert "ls -la" == bash.shell_command({"command": "ls -la"})
    assert "rm -rf x" == code.shell_command({"language": "shell", "code": "rm -rf x"})
    assert "echo" == code.shell_command({"language": "sh", "code": "echo"})
    # python and node snippets meet the floor as the same text given to bash (issue 13)
    assert "python3 -c 'print(1)'" == code.shell_command({"language": "python", "code": "print(1)"})
    assert "node -e 'x()'" == code.shell_command({"language": "node", "code": "x()"})
    assert ("exec",) == bash.facts.tags == code.facts.tags


@pytest.mark.anyio
@pytest.mark.parametrize("launcher", ["zygote", "prlimit", "preexec"])
@pytest.mark.parametrize("mode", MODES)
async def test_resource_limits_apply_with_every_launcher(
    workspace: Path, mode: str, launcher: str, monkeypatch, tmp_path: Path
) -> None:
    import aleph_exec._namespace as sandbox

    if launcher != "zygote":
        # A direct spawn (the zygote did not start): prlimit in front of the command, or, as on a
        # machine without util-linux prlimit, the limits set in the child before exec.
        no_zygote(monkeypatch, tmp_path)
    if launcher == "preexec":
        monkeypatch.setitem(sandbox._which, "prlimit", None)
    toml = f"[exec]\n{mode}memory_mb = 1024\nmax_file_mb = 8\nmax_open_files = 256\nmax_processes = 64\n"
    out = await run(workspace, "bash", {"command": "ulimit -c -v -f -n -u -t", "timeout_seconds": 20}, toml)
    values = [line.rsplit(" ", 1)[-1] for line in out["stdout"].splitlines()]
    assert ["0", str(1024 * 1024), str(8 * 1024), "256", "64", "25"] == values
