"""MCP logging from ``aleph serve``: decisions at ``info``, refusals at ``warning``, failures at ``error``, sent
only at or above the level the client asked for (``logging/setLevel`` on handshake-era connections, the
per-request ``_meta`` opt-in from 2026-07-28), driven by a real ``mcp.Client`` against a real server."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio
# logging/setLevel is the handshake era's way to ask (deprecated for 2026-07-28, which these tests also cover).
LEGACY = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

ALEPH = str(Path(sys.executable).parent / "aleph")


def serve_params(workspace: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(workspace), env=env)


class Received:
    """The log notifications a client received, with a wait for the next one (no sleeps)."""

    def __init__(self) -> None:
        self.messages: list[types.LoggingMessageNotificationParams] = []
        self.arrived = anyio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.messages.append(params)
        self.arrived.set()

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        return [(str(m.level), m.data) for m in self.messages]


@pytest.fixture
def policy(workspace: Path) -> Path:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\nclock_now = "deny"\n')
    return workspace


@LEGACY
async def test_the_logging_capability_is_declared_and_set_level_is_honoured(policy: Path) -> None:
    got = Received()
    async with Client(serve_params(policy), mode="legacy", logging_callback=got) as client:
        assert client.server_capabilities.logging is not None
        await client.call_tool("text_stats", {"text": "before any level"})
        assert got.messages == []  # nothing before the client asks
        await client.set_logging_level("info")
        result = await client.call_tool("text_stats", {"text": "one two"})
        assert not result.is_error
        refused = await client.call_tool("clock_now", {})
        assert refused.is_error
    events = got.events()
    assert ("info", "decision", "text_stats", "allow") in [
        (lvl, d.get("event"), d.get("tool"), d.get("decision")) for lvl, d in events
    ]
    assert ("warning", "refused", "clock_now") in [(lvl, d.get("event"), d.get("tool")) for lvl, d in events]
    assert all(m.logger == "aleph.chokepoint" for m in got.messages)


@LEGACY
async def test_a_client_at_warning_gets_refusals_but_not_decisions(policy: Path) -> None:
    got = Received()
    async with Client(serve_params(policy), mode="legacy", logging_callback=got) as client:
        await client.set_logging_level("warning")
        await client.call_tool("text_stats", {"text": "quiet"})
        await client.call_tool("clock_now", {})
    assert [(lvl, d["event"]) for lvl, d in got.events()] == [("warning", "refused")]


async def test_a_modern_request_that_opts_in_gets_its_calls_log(policy: Path) -> None:
    got = Received()
    async with Client(serve_params(policy), logging_callback=got, log_level="info") as client:
        await client.call_tool("clock_now", {})
    assert ("warning", "refused") in [(lvl, d.get("event")) for lvl, d in got.events()]


async def test_a_modern_request_that_does_not_opt_in_gets_no_log(policy: Path) -> None:
    got = Received()
    async with Client(serve_params(policy), logging_callback=got) as client:
        await client.call_tool("clock_now", {})
        await client.call_tool("text_stats", {"text": "x"})
    assert got.messages == []
