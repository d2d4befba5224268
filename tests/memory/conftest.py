from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aleph_memory.plugin
import pytest
from aleph_memory import MemoryStore

import aleph
from aleph.testing import isolated_runtime

Call = Callable[..., Awaitable[Any]]


def make_runtime(workspace: Path, extra_toml: str = "", plugins: tuple[object, ...] = ()) -> aleph.Aleph:
    """A runtime with the memory family; lexical search unless ``extra_toml`` names an embedder (the default
    embedder's background worker would make a ranking depend on how far it got)."""
    return isolated_runtime(workspace, aleph_memory.plugin, *plugins, config_toml=lexical_unless_named(extra_toml))


def lexical_unless_named(toml: str) -> str:
    """``toml`` with ``[memory] embedder = "none"`` added when it sets no embedder."""
    if "embedder" in toml:
        return toml
    if "[memory]\n" in toml:
        return toml.replace("[memory]\n", '[memory]\nembedder = "none"\n', 1)
    return f'{toml}\n[memory]\nembedder = "none"\n'


@pytest.fixture(autouse=True, scope="session")
def _graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """minilm-onnx builds its graph once per session into a folder of its own, not the user's cache."""
    folder = tmp_path_factory.mktemp("aleph-memory-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ALEPH_MEMORY_CACHE", str(folder))
        yield folder


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


def wait_for_vectors(rt: aleph.Aleph, embedder: Any) -> None:
    """Wait until every item of ``rt``'s store has vectors of ``embedder`` (a host store's worker computes any
    the tools' worker has not written yet; both write the same vectors)."""
    store = MemoryStore.of(rt, embedder=embedder)
    try:
        assert store.wait_for_vectors(timeout=120), "the vector worker did not catch up"
    finally:
        store.close()


@pytest.fixture
async def rt(workspace: Path) -> AsyncIterator[aleph.Aleph]:
    async with make_runtime(workspace) as runtime:
        yield runtime


@pytest.fixture
def call(rt: aleph.Aleph) -> Call:
    return caller(rt)
