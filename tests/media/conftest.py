"""Fixtures for aleph-media: a runtime over the plugin and callers bound to a principal."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aleph_media.plugin
import pytest

import aleph
from aleph.testing import isolated_runtime

Call = Callable[..., Awaitable[Any]]


def make_runtime(workspace: Path, extra_toml: str = "", plugins: tuple[object, ...] = ()) -> aleph.Aleph:
    return isolated_runtime(workspace, aleph_media.plugin, *plugins, config_toml=extra_toml)


def caller(
    rt: aleph.Aleph, agent: str = "alice", session: str = "s1", requester: aleph.ApprovalRequester | None = None
) -> Call:
    """``await call(tool, **input)`` through the real chokepoint as ``agent`` in ``session`` → parsed output.

    A session belongs to one agent, so the key is the agent's own (``alice:s1``).
    """

    async def run(tool: str, /, **payload: Any) -> Any:
        turn = aleph.TurnContext(session_key=f"{agent}:{session}")
        service = rt.tool_service(agent=agent, turn=turn, requester=requester)
        out = await service.execute(tool, payload)
        return json.loads(out.text)

    return run


@pytest.fixture
async def rt(workspace: Path) -> AsyncIterator[aleph.Aleph]:
    async with make_runtime(workspace) as runtime:
        yield runtime


@pytest.fixture
def call(rt: aleph.Aleph) -> Call:
    """``await call(tool, **input)`` as agent alice in session s1."""
    return caller(rt)
