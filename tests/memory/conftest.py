from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aleph_memory.plugin
import pytest

import aleph
from aleph.testing import isolated_runtime

Call = Callable[..., Awaitable[Any]]


def make_runtime(workspace: Path, extra_toml: str = "", plugins: tuple[object, ...] = ()) -> aleph.Aleph:
    return isolated_runtime(workspace, aleph_memory.plugin, *plugins, config_toml=extra_toml)


def caller(rt: aleph.Aleph, agent: str = "alice", session: str = "s1", run: str = "r1") -> Call:
    """``await call(tool, **input)`` through the real chokepoint as ``agent`` in ``session`` → parsed output."""
    counter = iter(range(1, 1_000_000))

    async def run_call(name: str, **payload: Any) -> Any:
        turn = aleph.TurnContext(session_key=session, run_id=run, call_id=f"{run}-c{next(counter)}")
        service = rt.tool_service(agent=agent, turn=turn)
        out = await service.execute(name, payload)
        try:
            return json.loads(out.text)
        except ValueError:
            return out.text

    return run_call


@pytest.fixture
async def rt(workspace: Path) -> AsyncIterator[aleph.Aleph]:
    async with make_runtime(workspace) as runtime:
        yield runtime


@pytest.fixture
def call(rt: aleph.Aleph) -> Call:
    return caller(rt)
