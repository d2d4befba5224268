"""The main job, recorded as a client sees it: `scripts/run-main` from a fresh clone, started twice by the
official SDK client in its default mode (2026-07-28 first), with an ask-gated call approved once.

What is asserted: stdout carries nothing but JSON-RPC (every line of both starts, including the first
one's install), the second start does not install again, the workspace is the directory the client
launched the server in (never the clone), and the approval reaches the client's elicitation handler. The
start times are printed and recorded (speed is measured in bench/bench_main.py, never asserted here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
POLICY = '[policies.tool_permissions.overrides]\nfile_write = "ask"\n'


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout as a new user gets it: the committed tree, no .venv, no build output."""
    target = tmp_path_factory.mktemp("clone") / "aleph"
    if (REPO / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)], check=True, timeout=120)
    else:  # a source tree without git (an unpacked archive)
        shutil.copytree(
            REPO, target, ignore=shutil.ignore_patterns(".venv", ".tox", "node_modules", ".artifacts", "__pycache__")
        )
    assert not (target / ".venv").exists()
    return target


def wrapped(clone: Path, workspace: Path, logs: Path, env: dict[str, str]) -> StdioServerParameters:
    """run-main launched in ``workspace``, with a copy of its stdout and its stderr kept in ``logs``."""
    script = f'"{clone}/scripts/run-main" 2>>"{logs}/stderr.log" | tee -a "{logs}/stdout.log"'
    return StdioServerParameters(command="bash", args=["-c", script], cwd=str(workspace), env=env)


class Human:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(request.message)
        return types.ElicitResult(action="accept", content={"decision": "approve_once"})


async def session(params: StdioServerParameters, human: Human, *, write: str | None) -> tuple[float, int]:
    started = time.perf_counter()
    async with Client(params, elicitation_callback=human, read_timeout_seconds=600) as client:
        assert "2026-07-28" == client.protocol_version
        tools = (await client.list_tools()).tools
        first_list = time.perf_counter() - started
        if write is not None:
            result = await client.call_tool("file_write", {"path": write, "content": "from the client\n"})
            assert not result.is_error, result.content
    return first_list, len(tools)


async def test_run_main_twice_from_a_fresh_clone(
    clone: Path, tmp_path: Path, record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "client-project"
    workspace.mkdir()
    (workspace / "aleph.toml").write_text(POLICY)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "PIP_INDEX_URL")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    params = wrapped(clone, workspace, logs, env)

    human = Human()
    with anyio.fail_after(900):
        first, tools = await session(params, human, write="x.txt")
    assert 1 == len(human.asked) and "file_write" in human.asked[0]
    assert "from the client\n" == (workspace / "x.txt").read_text()
    assert not (clone / "x.txt").exists()
    first_stderr = (logs / "stderr.log").read_text()
    assert "run-main: installing Aleph" in first_stderr

    with anyio.fail_after(120):
        second, tools_again = await session(params, human, write=None)
    assert tools == tools_again and tools > 20
    second_stderr = (logs / "stderr.log").read_text()[len(first_stderr) :]
    assert "installing" not in second_stderr, second_stderr  # the stamp was found: straight to aleph serve
    assert f"aleph serve: workspace {workspace}" in second_stderr

    for line in (logs / "stdout.log").read_text().splitlines():
        message = json.loads(line)  # nothing but MCP reached stdout, during the install too
        assert "2.0" == message["jsonrpc"]

    record_property("run_main_first_start_s", round(first, 2))
    record_property("run_main_second_start_s", round(second, 2))
    with capsys.disabled():
        print(f"\nrun-main first start {first:.2f} s (installs), second start {second:.2f} s to the first tools/list")
