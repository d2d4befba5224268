"""Embedding off the write path: writes never wait for a model, vectors arrive in the background, nothing is lost."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from aleph_memory import MemoryStore, NewItem
from aleph_memory._db import Database
from aleph_memory._vectorwork import VectorWorker

import aleph

from .conftest import caller, make_runtime
from .test_search import Trigrams

pytestmark = pytest.mark.anyio
np = pytest.importorskip("numpy")


def _in_worker() -> bool:
    return threading.current_thread().name == "aleph-memory-vectors"


class Gated(Trigrams):
    """Trigram vectors; the worker's batches wait until the test opens the gate (a model busy with a long batch).

    A search's one-line question is embedded at once, as it would be beside a busy worker.
    """

    def __init__(self) -> None:
        self.gate = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if _in_worker():
            assert self.gate.wait(60), "the test never opened the gate"
        return super().embed(texts)


def _vector_count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM vectors WHERE model = 'trigram'").fetchone()[0])
    finally:
        conn.close()


def test_ingest_returns_before_any_vector_and_search_finds_by_meaning_once_the_worker_caught_up(
    tmp_path: Path,
) -> None:
    embedder = Gated()
    store = MemoryStore(tmp_path / "m.sqlite", embedder=embedder)
    store.ingest("alice", [NewItem("So kittenish today.", "turn", speaker="Ann", session="d1", seq=0)])
    store.ingest("alice", [NewItem("The film festival was long.", "turn", speaker="Bo", session="d2", seq=0)])
    # The model has not produced a single vector, and neither the writes nor a search waited for it.
    assert _vector_count(tmp_path / "m.sqlite") == 0
    assert not store.wait_for_vectors(timeout=0.05)
    assert [h.item.content for h in store.search("alice", "film festival").hits] == ["The film festival was long."]
    assert store.search("alice", "kittens").hits == []  # no shared word, no vector yet
    embedder.gate.set()
    assert store.wait_for_vectors(timeout=60)
    assert _vector_count(tmp_path / "m.sqlite") == 2
    # "kittenish" shares no stem with "kittens": only the vectors find it.
    assert store.search("alice", "kittens").hits[0].item.content == "So kittenish today."
    store.close()


async def test_remember_through_the_tool_does_not_wait_for_the_model(workspace: Path) -> None:
    gated = Gated()

    class Plugin:
        @aleph.hookimpl
        def aleph_memory_embedders(self, register):  # type: ignore[no-untyped-def]
            register("trigram", lambda: gated)

    async with make_runtime(workspace, '[memory]\nembedder = "trigram"\n', plugins=(Plugin(),)) as rt:
        call = caller(rt)
        out = await call("remember", action="add", content="Photographs of the harbour at dusk")
        assert out["written"] is True
        found = await call("memory_search", query="harbour photographs")
        assert found["mode"] == "hybrid" and found["facts"][0]["content"] == "Photographs of the harbour at dusk"
        gated.gate.set()


def test_a_killed_host_loses_no_item_and_the_next_start_computes_the_missing_vectors(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("vector_child.py")), str(path), "12"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    with child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "stored"  # committed; its worker is stuck in the model
        finally:
            child.kill()
            child.wait(timeout=30)
    assert _vector_count(path) == 0
    store = MemoryStore(path, embedder=Trigrams())
    assert store.wait_for_vectors(timeout=60)
    assert _vector_count(path) == 12
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM context_vectors WHERE model = 'trigram'").fetchone()[0] == 12
    conn.close()
    assert store.search("alice", "kittens").hits[0].item.ref == "s1:7"
    store.close()


def test_the_hand_over_is_bounded_and_what_did_not_fit_is_found_by_a_scan(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    MemoryStore(path).ingest("alice", [NewItem(f"note {i} about herons", "fact") for i in range(300)])
    db = Database(path)
    embedder = Gated()
    worker = VectorWorker(db, lambda: embedder, queue_bound=16, batch=8)
    worker.start()  # its first scan takes a batch and blocks in the model
    conn = sqlite3.connect(path)
    rowids = [r[0] for r in conn.execute("SELECT rowid FROM items ORDER BY rowid")]
    conn.close()
    for start in range(0, 300, 5):
        worker.notify(rowids[start : start + 5])
        assert worker.queued <= 16
    assert worker.queued > 0
    embedder.gate.set()
    assert worker.wait_idle(timeout=60)
    assert _vector_count(path) == 300
    worker.close()
    db.close()


def test_vectors_written_out_of_rowid_order_all_reach_the_index(tmp_path: Path) -> None:
    from aleph_memory._vectorwork import write_vectors

    path = tmp_path / "m.sqlite"
    embedder = Trigrams()
    lexical = MemoryStore(path)
    lexical.ingest("alice", [NewItem(f"Turn {i}", "turn", speaker="Ann", session="d", seq=i) for i in range(6)])
    lexical.close()
    store = MemoryStore(path)  # no worker: the test writes the vectors itself, newest first
    db = store._memory.db
    write_vectors(db, embedder, [5, 6])
    index = store._memory.ranker.vector_index(embedder, "alice")
    assert index.rowids.tolist() == [5, 6]
    write_vectors(db, embedder, [1, 2])
    write_vectors(db, embedder, [3, 4])
    index = store._memory.ranker.vector_index(embedder, "alice")
    assert index.rowids.tolist() == [1, 2, 3, 4, 5, 6]
    for at, rowid in enumerate(index.rowids.tolist()):
        own = np.asarray(embedder.embed([f"Turn {rowid - 1}"])[0], dtype=np.float32)
        assert np.allclose(index.matrix[at], own / np.linalg.norm(own), atol=1e-6)
    # Turn 4's window (turns 3-5) was embedded when 3 and 4 arrived, after 5 and 6 were indexed.
    window = np.asarray(embedder.embed(["Turn 3 Turn 4 Turn 5"])[0], dtype=np.float32)
    assert np.allclose(index.context[4], window / np.linalg.norm(window), atol=1e-6)
    store.close()


def test_an_embedder_that_fails_leaves_writes_working_and_search_says_why(tmp_path: Path) -> None:
    class Broken(Trigrams):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            if _in_worker():
                raise RuntimeError("model file is corrupt")
            return super().embed(texts)

    store = MemoryStore(tmp_path / "m.sqlite", embedder=Broken())
    store.ingest("alice", [NewItem("Herons nest by the lake", "fact")])
    assert not store.wait_for_vectors(timeout=60)  # the worker stopped: waiting says so instead of hanging
    result = store.search("alice", "herons")
    assert [h.item.content for h in result.hits] == ["Herons nest by the lake"]
    assert result.degraded is not None and "vectors are not being written" in result.degraded
    assert "model file is corrupt" in result.degraded
    store.close()


def test_an_own_vector_written_again_keeps_the_turns_context(tmp_path: Path) -> None:
    """Two workers (a host's and the tools') may embed the same item: the second write changes nothing."""
    from aleph_memory._vectorwork import write_vectors

    path = tmp_path / "m.sqlite"
    embedder = Trigrams()
    store = MemoryStore(path)
    store.ingest("alice", [NewItem(f"Turn {i}", "turn", speaker="Ann", session="d", seq=i) for i in range(3)])
    db = store._memory.db
    write_vectors(db, embedder, [1, 2, 3])
    before = store._memory.ranker.vector_index(embedder, "alice").combined.copy()
    with db.write() as conn:  # as a second worker would: the same own vector, a newer stamp
        conn.execute("UPDATE vectors SET stamp = stamp + 1 WHERE rowid = 2")
    index = store._memory.ranker.vector_index(embedder, "alice")
    assert index.rowids.tolist() == [1, 2, 3]
    assert np.allclose(index.combined, before, atol=1e-6)  # own + context, not the own vector twice
    store.close()
