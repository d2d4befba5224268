"""aleph-memory: LoCoMo evidence recall, search latency at 100,000 items, ingest rate, concurrent writers.

Run: python bench/bench_memory.py [--skip-scale] [--skip-writers] [--embedder NAME]
Targets (aleph-memory issue):
- LoCoMo recall@10 (any evidence turn) >= 0.90, with a plain BM25 over the same turns as the baseline;
- memory_search p50 <= 20 ms at 100,000 items; ingest >= 2,000 items/s;
- 8 writer processes x 1,000 remembers: 0 lost, 0 duplicated, the ledger verifies.
The LoCoMo data is read from ../shared/data/locomo (or $LOCOMO_DIR). Every dialog turn is one memory
item (kind "turn") with its speaker, its session (and the session's date), and its dia_id as ``ref``;
each question of categories 1-4 goes through the memory_search tool (the real chokepoint) and a hit
is counted when an evidence dia_id is among the top 10. Nothing here is tuned to these conversations.
When an embedder is installed (``aleph-memory[wordllama]``) the hybrid figures are printed too.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aleph_memory.plugin
from _util import percentile
from aleph_memory import MemoryStore, NewItem

import aleph

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = Path(os.environ.get("LOCOMO_DIR", ROOT.parent.parent / "shared" / "data" / "locomo"))
if not LOCOMO.is_dir():
    LOCOMO = Path("/work/shared/data/locomo")
K = 10
WRITERS, EACH = 8, 1000
SCALE = 100_000
WORD = re.compile(r"[a-z0-9]+")
STOP = set(
    "a an the and or but if of at by for with about to from in on is are was were be been being do does did "
    "have has had i you he she it we they me him her us them my your his its our their this that these those "
    "what which who whom when where why how not no so than too very can will just".split()
)


def load_conversation(path: Path) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    data = json.loads(path.read_text())
    turns = []
    n = 1
    while f"session_{n}" in data:
        when = datetime.strptime(data[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
        for t in data[f"session_{n}"]:
            text = t["text"] + (f" [shares an image: {t['blip_caption']}]" if t.get("blip_caption") else "")
            turns.append({"id": t["dia_id"], "speaker": t["speaker"], "text": text, "session": n, "at": when})
        n += 1
    questions = []
    for q in data["qa"]:
        evidence = {e.strip() for raw in q.get("evidence", []) for e in re.split(r"[;,]", raw) if e.strip()}
        if q["category"] <= 4 and evidence:
            questions.append({"q": q["question"], "evidence": evidence})
    return path.stem, turns, questions


def bm25_baseline(turns: list[dict[str, Any]], questions: list[dict[str, Any]]) -> tuple[int, int]:
    from rank_bm25 import BM25Okapi

    def tok(text: str) -> list[str]:
        return [w for w in WORD.findall(text.lower()) if w not in STOP]

    index = BM25Okapi([tok(t["text"]) for t in turns])
    anyhit = allhit = 0
    for q in questions:
        scores = index.get_scores(tok(q["q"]))
        top = {turns[i]["id"] for i in sorted(range(len(turns)), key=lambda i: -scores[i])[:K]}
        anyhit += bool(top & q["evidence"])
        allhit += q["evidence"] <= top
    return anyhit, allhit


def runtime(ws: Path, extra: str = "") -> aleph.Aleph:
    (ws / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n{extra}')
    return aleph.load(ws / "aleph.toml", workspace=ws, plugins=[aleph_memory.plugin], entry_points=False, strict=True)


async def locomo(embedder: str | None) -> dict[str, tuple[int, int, int]]:
    out: dict[str, tuple[int, int, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        extra = f'[memory]\nembedder = "{embedder}"\n' if embedder else ""
        async with runtime(Path(tmp), extra) as rt:
            for path in sorted(LOCOMO.glob("conv-*.json")):
                name, turns, questions = load_conversation(path)
                emb = _embedder(embedder)
                store = MemoryStore.of(rt, embedder=emb)
                store.ingest(
                    name,
                    [
                        NewItem(
                            t["text"],
                            "turn",
                            speaker=t["speaker"],
                            session=f"{name}:session-{t['session']}",
                            ref=t["id"],
                            occurred_at=int(t["at"].timestamp() * 1000),
                        )
                        for t in turns
                    ],
                )
                store.close()
                service = rt.tool_service(agent=name)
                anyhit = allhit = 0
                for q in questions:
                    result = json.loads(
                        (await service.execute("memory_search", {"query": q["q"], "max_results": K})).text
                    )
                    top = {f.get("ref") for f in result["facts"]}
                    anyhit += bool(top & q["evidence"])
                    allhit += q["evidence"] <= top
                out[name] = (anyhit, allhit, len(questions))
    return out


def _embedder(name: str | None) -> Any:
    if name is None:
        return None
    providers: dict[str, Any] = {}
    aleph_memory.plugin.aleph_memory_embedders(register=lambda n, f: providers.__setitem__(n, f))
    return providers[name]()


def report_locomo(embedder: str | None) -> None:
    baseline = {}
    for path in sorted(LOCOMO.glob("conv-*.json")):
        name, turns, questions = load_conversation(path)
        baseline[name] = (*bm25_baseline(turns, questions), len(questions))
    runs = {"lexical": asyncio.run(locomo(None))}
    if embedder:
        runs[f"hybrid ({embedder})"] = asyncio.run(locomo(embedder))
    print(f"LoCoMo evidence recall@{K} over {sum(b[2] for b in baseline.values())} questions (categories 1-4)")
    header = f"{'conversation':<12} {'questions':>9} {'BM25 any':>9} {'BM25 all':>9}"
    for label in runs:
        header += f" {label + ' any':>{max(12, len(label) + 5)}} {label + ' all':>{max(12, len(label) + 5)}}"
    print(header)
    rows = [*baseline, "overall"]
    for name in rows:
        if name == "overall":
            b = tuple(sum(v[i] for v in baseline.values()) for i in range(3))
        else:
            b = baseline[name]
        line = f"{name:<12} {b[2]:>9} {b[0] / b[2]:>9.3f} {b[1] / b[2]:>9.3f}"
        for label, run in runs.items():
            r = tuple(sum(v[i] for v in run.values()) for i in range(3)) if name == "overall" else run[name]
            width = max(12, len(label) + 5)
            line += f" {r[0] / r[2]:>{width}.3f} {r[1] / r[2]:>{width}.3f}"
        print(line)
    for label, run in runs.items():
        ours = sum(v[0] for v in run.values()) / sum(v[2] for v in run.values())
        base = sum(v[0] for v in baseline.values()) / sum(v[2] for v in baseline.values())
        print(f"{label}: recall@{K} (any) {ours:.3f} vs BM25 {base:.3f} = {ours / base:.2f}x  (target >= 0.90)")


def scale() -> None:
    rng = random.Random(7)
    texts, questions = [], []
    for path in sorted(LOCOMO.glob("conv-*.json")):
        _, turns, qs = load_conversation(path)
        texts += [t["text"] for t in turns]
        questions += [q["q"] for q in qs]
    vocab = sorted({w for t in texts for w in WORD.findall(t.lower())})
    speakers = [f"Person{i}" for i in range(40)]
    items = []
    for i in range(SCALE):
        base = texts[i % len(texts)].split()
        # Each copy swaps a few words for random vocabulary, so 100,000 items are distinct and realistic.
        for _ in range(3):
            base[rng.randrange(len(base))] = rng.choice(vocab)
        items.append(
            NewItem(" ".join(base), "turn", speaker=speakers[(i // 20) % 40], session=f"s{i // 20}", seq=i % 20)
        )
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        rt = runtime(ws)
        store = MemoryStore.of(rt)
        start = time.perf_counter()
        for at in range(0, SCALE, 1000):
            store.ingest("scale", items[at : at + 1000])
        ingest_s = time.perf_counter() - start
        plain = sqlite3.connect(ws / "plain.sqlite")
        plain.execute("PRAGMA journal_mode=WAL")
        plain.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
        start = time.perf_counter()
        for at in range(0, SCALE, 1000):
            with plain:
                plain.executemany("INSERT INTO f (content) VALUES (?)", [(i.content,) for i in items[at : at + 1000]])
        plain_s = time.perf_counter() - start
        sample = rng.sample(questions, 300)
        direct = []
        for q in sample:
            t0 = time.perf_counter()
            store.search("scale", q, limit=K)
            direct.append((time.perf_counter() - t0) * 1000)
        bare = []
        for q in sample:
            words = [w for w in WORD.findall(q.lower()) if w not in STOP]
            expr = " OR ".join(f'"{w}"' for w in words) or '"x"'
            t0 = time.perf_counter()
            plain.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 10", (expr,)).fetchall()
            bare.append((time.perf_counter() - t0) * 1000)

        async def via_tool() -> list[float]:
            service = rt.tool_service(agent="scale")
            out = []
            for q in sample:
                t0 = time.perf_counter()
                await service.execute("memory_search", {"query": q, "max_results": K})
                out.append((time.perf_counter() - t0) * 1000)
            return out

        async def run() -> list[float]:
            async with rt:
                return await via_tool()

        tool = asyncio.run(run())
        store.close()
        plain.close()
    print(f"\nscale: {SCALE:,} items (LoCoMo turns with 3 words swapped each), 300 LoCoMo questions")
    print(
        f"ingest: {SCALE / ingest_s:,.0f} items/s (target >= 2,000); bare FTS5 insert {SCALE / plain_s:,.0f}/s;"
        f" ratio {plain_s / ingest_s:.2f}x of bare"
    )
    p50, p95 = percentile(direct, 0.5), percentile(direct, 0.95)
    print(
        f"search (store): p50 {p50:.1f} ms, p95 {p95:.1f} ms; bare FTS5 bm25 top-10 p50 {percentile(bare, 0.5):.1f} ms;"
        f" ratio {p50 / percentile(bare, 0.5):.2f}x"
    )
    print(
        f"memory_search through the chokepoint: p50 {percentile(tool, 0.5):.1f} ms, p95 {percentile(tool, 0.95):.1f} ms"
        " (target p50 <= 20 ms)"
    )


WRITER = """
import asyncio, sys
from pathlib import Path
import aleph, aleph_memory.plugin
async def main(config, worker, count):
    rt = aleph.load(config, workspace=config.parent, plugins=[aleph_memory.plugin], entry_points=False, strict=True)
    async with rt:
        for i in range(count):
            turn = aleph.TurnContext(session_key=f"w{worker}", run_id=f"w{worker}", call_id=f"w{worker}-{i}")
            service = rt.tool_service(agent="crowd", turn=turn)
            await service.execute("remember", {"action": "add", "content": f"worker {worker} fact number {i}"})
asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
"""


def writers() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        rt = runtime(ws)
        db = rt.config.data_dir / "memory" / "memory.sqlite"
        ledger_dir = rt.config.data_dir / "ledger"
        asyncio.run(rt.aclose())
        script = ws / "writer.py"
        script.write_text(WRITER)
        start = time.perf_counter()
        procs = [
            subprocess.Popen([sys.executable, str(script), str(ws / "aleph.toml"), str(w), str(EACH)])
            for w in range(WRITERS)
        ]
        codes = [p.wait() for p in procs]
        elapsed = time.perf_counter() - start
        conn = sqlite3.connect(db)
        contents = [r[0] for r in conn.execute("SELECT content FROM items WHERE agent = 'crowd' AND kind = 'fact'")]
        conn.close()
        expected = {f"worker {w} fact number {i}" for w in range(WRITERS) for i in range(EACH)}
        ledger = aleph.Ledger(ledger_dir)
        report = ledger.verify("crowd")
        signed = [r for r in ledger.rows("crowd") if r.refs and "memory_id" in r.refs]
    print(
        f"\nwriters: {WRITERS} processes x {EACH} remembers through their own runtimes, exit codes {sorted(set(codes))}"
    )
    print(
        f"lost {len(expected - set(contents))}, duplicated {len(contents) - len(set(contents))},"
        f" ledger verifies {report.ok} ({report.rows} rows, {len(signed)} with a memory_id);"
        f" {WRITERS * EACH / elapsed:,.0f} remembers/s overall incl. start-up ({elapsed:.1f} s)"
    )


def main() -> None:
    args = sys.argv[1:]
    embedder = args[args.index("--embedder") + 1] if "--embedder" in args else None
    if embedder is None:
        try:
            import wordllama  # noqa: F401

            embedder = "wordllama"
        except ImportError:
            pass
    report_locomo(embedder)
    if "--skip-scale" not in args:
        scale()
    if "--skip-writers" not in args:
        writers()


if __name__ == "__main__":
    main()
