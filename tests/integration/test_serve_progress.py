"""Live output of a long call reaches the MCP client as progress notifications, call after call."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")
LOOP = "for i in 1 2 3; do echo line$i; sleep 0.3; done"


def serve_params(workspace: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(workspace), env=env)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_bash_call_streams_its_lines_as_progress(workspace: Path, mode: str) -> None:
    # The exec family reads every run's output in one shared reader task; before the fix the chunks of
    # every call after the first were routed to the first call's (finished) request and never sent.
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "full"\n')
    async with Client(serve_params(workspace), mode=mode) as client:
        for _ in range(3):
            seen: list[str] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None, seen: list[str] = seen
            ) -> None:
                seen.append(message or "")

            with anyio.fail_after(60):
                result = await client.call_tool("bash", {"command": LOOP}, progress_callback=on_progress)
            assert not result.is_error, result.content
            assert ["line1", "line2", "line3"] == seen


async def test_the_first_browser_launch_says_so_before_its_result(workspace: Path) -> None:
    pytest.importorskip("aleph_browser")
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "full"\n')
    seen: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    async with Client(serve_params(workspace)) as client:
        with anyio.fail_after(120):
            result = await client.call_tool("browser_open", {"url": "about:blank"}, progress_callback=on_progress)
        assert not result.is_error, result.content
        assert any(m.startswith("starting Chromium") for m in seen), seen
        seen.clear()
        await client.call_tool("browser_open", {"url": "about:blank"}, progress_callback=on_progress)
        assert not any(m.startswith("starting Chromium") for m in seen)  # only the launch says it
