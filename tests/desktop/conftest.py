"""Desktop tests: a private Xvfb display, session bus and accessibility bus for the whole run."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aleph_desktop.plugin
import pytest
from aleph_desktop import HeadlessSession
from aleph_desktop._atspi import AtspiClient
from aleph_desktop._element import AccessibilityUnavailable

import aleph
from aleph.testing import isolated_runtime

sys.path.insert(0, str(Path(__file__).parent))  # harness.py and tasks.py, shared with bench/bench_desktop.py


def has_window_on_accessibility_bus(session: HeadlessSession, app: str) -> bool:
    """Whether ``app`` registered a top-level window on the session's accessibility bus (a fresh look)."""

    async def probe() -> bool:
        client = AtspiClient(session.bus_address)
        try:
            return bool(await client.windows(app))
        except AccessibilityUnavailable:
            return False
        finally:
            client.close()

    return asyncio.run(probe())


def desktop_toml(session: HeadlessSession, extra: str = "") -> str:
    return f'[desktop]\ndisplay = "{session.display}"\nsession_bus = "{session.bus_address}"\n{extra}\n'


@pytest.fixture(scope="session")
def session() -> Iterator[HeadlessSession]:
    with HeadlessSession(1280, 800) as s:
        yield s


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: a module's tests share one loop, one runtime and one bus connection


@pytest.fixture(scope="module")
async def rt(session: HeadlessSession, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[aleph.Aleph]:
    workspace = tmp_path_factory.mktemp("ws")
    runtime = isolated_runtime(workspace, aleph_desktop.plugin, config_toml=desktop_toml(session))
    try:
        yield runtime
    finally:
        await runtime.aclose()


@pytest.fixture(scope="module")
def call(rt: aleph.Aleph) -> Any:
    """``await call(name, input)``: run a tool through the chokepoint, return its output value."""
    service = rt.tool_service()

    async def run(name: str, payload: dict[str, Any]) -> Any:
        return (await service.execute(name, payload)).value

    return run
