"""bash through ``aleph serve`` and a real ``mcp.Client`` over stdio: runs driven by the server's own event loop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")


def serve_params(workspace: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH", "LANG"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(workspace), env=env)


async def test_bash_calls_through_aleph_serve_run_in_the_sandbox_one_after_another_and_at_once(
    workspace: Path,
) -> None:
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "full"\n')
    results: dict[str, dict] = {}
    with anyio.fail_after(60):
        async with Client(serve_params(workspace)) as client:

            async def bash(key: str, command: str) -> None:
                out = await client.call_tool("bash", {"command": command})
                assert not out.is_error, out.content
                results[key] = json.loads(out.content[0].text)  # type: ignore[union-attr]

            await bash("first", "echo one")
            await bash("second", "echo two >&2; exit 3")
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(bash, f"together{i}", f"sleep 0.2; echo {i}; pwd")
    assert ("one\n", 0) == (results["first"]["stdout"], results["first"]["exit_code"])
    assert ("two\n", 3) == (results["second"]["stderr"], results["second"]["exit_code"])
    for i in range(4):
        together = results[f"together{i}"]
        assert (f"{i}\n{workspace.resolve()}\n", 0) == (together["stdout"], together["exit_code"])
