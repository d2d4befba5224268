"""Writers in separate processes share one memory file and one agent's ledger chain: nothing lost or doubled."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import aleph_memory.plugin

import aleph
from aleph.testing import isolated_runtime

WORKERS = 8
EACH = 60
SHARED = 10


def test_eight_writer_processes_lose_nothing_duplicate_nothing_and_the_ledger_verifies(workspace: Path) -> None:
    # Lexical: eight processes each loading the default embedder would measure the model, not the writers.
    lexical = '[memory]\nembedder = "none"\n'
    rt = isolated_runtime(workspace, aleph_memory.plugin, config_toml=lexical)  # writes aleph.toml
    config = workspace / "aleph.toml"
    db = rt.config.data_dir / "memory" / "memory.sqlite"
    ledger_dir = rt.config.data_dir / "ledger"
    asyncio.run(rt.aclose())
    writer = Path(__file__).with_name("writer.py")
    # Each writer's stderr goes to a file (a pipe nobody reads could stall a writer holding a lock): what a
    # failed one said is in the assertion's message.
    said = [workspace.parent / f"writer-{w}.err" for w in range(WORKERS)]
    procs = []
    for w in range(WORKERS):
        with said[w].open("w") as err:
            argv = [sys.executable, str(writer), str(config), str(w), str(EACH), str(SHARED)]
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err))
    codes = [p.wait(timeout=300) for p in procs]
    failed = {w: said[w].read_text()[-3000:] for w, code in enumerate(codes) if code != 0}
    assert failed == {}, failed
    conn = sqlite3.connect(db)
    contents = [r[0] for r in conn.execute("SELECT content FROM items WHERE agent = 'crowd' AND kind = 'fact'")]
    conn.close()
    expected = {f"shared fact number {i}" for i in range(SHARED)}
    expected |= {f"worker {w} fact number {i}" for w in range(WORKERS) for i in range(SHARED, EACH)}
    assert len(contents) == len(set(contents)), "a fact was stored twice"
    assert set(contents) == expected, "a fact was lost"
    ledger = aleph.Ledger(ledger_dir)
    report = ledger.verify("crowd")
    assert report.ok, report.reason
    rows = ledger.rows("crowd")
    written = [r.refs["memory_id"] for r in rows if r.refs and "memory_id" in r.refs]
    assert len(written) == len(expected) == len(set(written))
    rejected = [r for r in rows if r.refs and r.refs.get("decision") == "rejected"]
    assert len(rejected) == SHARED * (WORKERS - 1)
