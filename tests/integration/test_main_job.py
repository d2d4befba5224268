"""The main job, recorded as a client sees it: `scripts/run-main` from a fresh clone, started twice by the
official SDK client in its default mode (2026-07-28 first), with an ask-gated call approved once.

What is asserted: stdout carries nothing but JSON-RPC (every line of both starts, including the first
one's install), the second start does not install again, the workspace is the directory the client
launched the server in (never the clone), and the approval reaches the client's elicitation handler. The
start times are printed (speed is measured in bench/bench_main.py, never asserted here).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

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


async def wait_for(condition: Any, limit: float = 180) -> None:
    with anyio.fail_after(limit):
        while not condition():
            await anyio.sleep(0.2)


def stop_start_server(clone: Path) -> None:
    pid_file = clone / ".venv" / ".aleph-warm" / "pid"
    try:
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


@pytest.fixture(scope="module", autouse=True)
def _no_start_server_left(clone: Path) -> Iterator[None]:
    yield
    stop_start_server(clone)


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
    clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
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

    # The first start left a start server behind; it is ready once its socket exists.
    await wait_for(lambda: (clone / ".venv" / ".aleph-warm" / "sock").exists())
    with anyio.fail_after(120):
        second, tools_again = await session(params, human, write="y.txt")
    assert tools == tools_again and tools > 20
    assert 2 == len(human.asked)
    assert "from the client\n" == (workspace / "y.txt").read_text()
    second_stderr = (logs / "stderr.log").read_text()[len(first_stderr) :]
    assert "installing" not in second_stderr, second_stderr  # the stamp was found: no install
    assert f"aleph serve: workspace {workspace}" in second_stderr and "warm start" in second_stderr

    for line in (logs / "stdout.log").read_text().splitlines():
        message = json.loads(line)  # nothing but MCP reached stdout, during the install too
        assert "2.0" == message["jsonrpc"]

    with capsys.disabled():
        print(f"\nrun-main first start {first:.2f} s (installs), second start {second:.2f} s to the first tools/list")


async def test_a_source_change_starts_cold_and_the_start_server_is_renewed(clone: Path, tmp_path: Path) -> None:
    # Runs after the session above: the clone is installed and a start server runs.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    params = wrapped(clone, workspace, logs, env)
    sock = clone / ".venv" / ".aleph-warm" / "sock"
    await wait_for(sock.exists)
    os.utime(clone / "core" / "src" / "aleph" / "_cli" / "_common.py")  # an edit of an editable install

    await session(params, Human(), write=None)
    assert "warm start" not in (logs / "stderr.log").read_text()  # the old server refused: cold, new code
    await wait_for(sock.exists)  # the cold start left a start server for the new sources
    await session(params, Human(), write=None)
    assert "warm start" in (logs / "stderr.log").read_text()


def test_the_exit_code_of_a_warm_start_is_the_servers(clone: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run(
        [str(clone / "scripts" / "run-main"), "--http", "--host", "0.0.0.0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 2 == done.returncode, done.stderr
    assert "loopback" in done.stderr
    assert "" == done.stdout


CLIENTS = ("Claude Code", "Cursor", "Claude Desktop")


def client_snippets(docs: str) -> dict[str, str]:
    """The set-up snippets under "### Clients" in docs/mcp.md, by client (named in the line above each)."""
    section = docs.split("### Clients", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^(.*?)\n\n```(?:console|json)\n(.*?)^```$", section, flags=re.M | re.S)
    found: dict[str, str] = {}
    for intro, body in blocks:
        name = next((c for c in CLIENTS if intro.strip().splitlines()[-1].startswith(c)), None)
        if name is not None:
            found[name] = body
    return found


def launch_of(client: str, snippet: str, clone: Path, project: Path) -> tuple[list[str], Path]:
    """(argv, launch directory) as the client would run it, with the snippet's paths filled in."""
    text = snippet.replace("/path/to/aleph", str(clone)).replace("/path/to/your/project", str(project))
    if client == "Claude Code":
        words = shlex.split(text.removeprefix("$ "))
        assert ["claude", "mcp", "add"] == words[:3] and "--" in words
        return words[words.index("--") + 1 :], project  # Claude Code launches in the project directory
    server = json.loads(text)["mcpServers"]["aleph"]
    args = [a.replace("${workspaceFolder}", str(project)) for a in server.get("args", [])]
    return [server["command"], *args], Path("/")  # the worst case: a client that launches from /


async def test_the_documented_client_set_ups_launch(clone: Path, tmp_path: Path) -> None:
    snippets = client_snippets((clone / "docs" / "mcp.md").read_text())
    assert set(CLIENTS) == set(snippets), list(snippets)
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    for client, snippet in snippets.items():
        argv, cwd = launch_of(client, snippet, clone, project)
        log = tmp_path / f"{client.replace(' ', '-')}.log"
        with log.open("w") as errlog:
            params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(cwd), env=env)
            with anyio.fail_after(120):
                async with Client(stdio_client(params, errlog=errlog)) as mcp_client:
                    assert (await mcp_client.list_tools()).tools, client
        assert f"aleph serve: workspace {project}," in log.read_text(), (client, log.read_text())
