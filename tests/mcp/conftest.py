"""Fixtures for the MCP tests: real MCP peers (in-process MCPServer objects, stdio children, npm servers)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from aleph import ToolRegistry
from aleph._config import McpConfig, McpServerConfig
from aleph._mcp import McpManager, RestartPolicy

HERE = Path(__file__).parent
REPO = HERE.parent.parent
NPM_BIN = REPO / "tests" / "npm" / "node_modules" / ".bin"
SERVERS = HERE / "servers"

# Fast health checks so crash tests finish quickly; the same restart budget as production.
FAST = RestartPolicy(health_interval=0.2, backoff_base=0.05)


def npm_bin(name: str) -> str:
    path = NPM_BIN / name
    if not path.exists():
        pytest.skip(f"{name} not installed: run scripts/setup-system (npm peers in tests/npm)")
    return str(path)


def python_server(script: str, **kw: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[str(SERVERS / script)], **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_pids(match: str) -> list[int]:
    """Descendant processes of this test process whose command line contains ``match``."""
    me = os.getpid()
    parents: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(stat[1])
            cmd[int(entry)] = Path(f"/proc/{entry}/cmdline").read_text().replace("\0", " ")
        except OSError:
            continue
    out = []
    for pid in parents:
        p = pid
        while p in parents and p != me and p > 1:
            p = parents[p]
        if p == me and match in cmd.get(pid, ""):
            out.append(pid)
    return out


async def wait_until(registry: ToolRegistry, predicate: Callable[[], bool], *, limit: float = 30.0) -> None:
    """Wait (bounded) until ``predicate()`` holds, re-checking on every registry change and periodically."""
    with anyio.fail_after(limit):
        while not predicate():
            changed = anyio.Event()
            unsubscribe = registry.subscribe(lambda _r, ev=changed: ev.set())
            try:
                with anyio.move_on_after(0.1):
                    await changed.wait()
            finally:
                unsubscribe()


MakeManager = Callable[..., Awaitable[McpManager]]


@pytest.fixture
async def make_manager(tmp_path: Path) -> AsyncIterator[MakeManager]:
    """Build and start managers; every one is closed at the end of the test."""
    made: list[McpManager] = []

    async def make(
        servers: dict[str, McpServerConfig],
        *,
        inprocess: dict[str, Any] | None = None,
        registry: ToolRegistry | None = None,
        policy: RestartPolicy = FAST,
    ) -> McpManager:
        config = McpConfig(servers=servers)
        manager = McpManager(config, registry or ToolRegistry(), tmp_path / "data", policy=policy, inprocess=inprocess)
        made.append(manager)
        await manager.start()
        return manager

    yield make
    for manager in reversed(made):
        await manager.aclose()
