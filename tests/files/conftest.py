from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aleph_files.plugin
import pytest

import aleph
from aleph.testing import isolated_runtime

Call = Callable[..., Awaitable[Any]]


def make_runtime(workspace: Path, extra_toml: str = "", plugins: tuple[object, ...] = ()) -> aleph.Aleph:
    return isolated_runtime(workspace, aleph_files.plugin, *plugins, config_toml=extra_toml)


@pytest.fixture
async def call(workspace: Path) -> AsyncIterator[Call]:
    """``await call(tool, **input)`` → the parsed output; raises the ToolError on failure."""
    async with make_runtime(workspace) as rt:
        service = aleph.UnscopedToolService(rt.registry)

        async def run(name: str, **payload: Any) -> Any:
            out = await service.execute(name, payload)
            return json.loads(out.text) if out.text[:1] in "{[" else out.text

        yield run
