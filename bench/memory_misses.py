"""aleph-memory: list the questions whose evidence is not in the top 10, by kind, with what ranked above it.

Run: python bench/memory_misses.py [--data DIR] [--kind KIND] [--all-only] [--profile] [--quiet] [--save FILE]
     [--embedder NAME --cache DIR] [--store DIR]
Reads LoCoMo-format files (default: the dev split) through the store's own search (no chokepoint, so it is
quick), prints recall@10 any / all per question kind, dated and undated (and the dev split's design and confirm
groups), then every miss: the question, each
evidence turn with its rank in the top 50 (or "-"), and the turns that ranked above the first missing one.
``--all-only``: list only questions with some but not all evidence found (the "all evidence" misses).
``--profile``: sort the evidence turns that questions with several of them miss from the top 10: not among the
first PROFILE_DEPTH at all (and whether they share a content word with the question: a paraphrase when not),
ranked 11-50 or 51-PROFILE_DEPTH, in a session the top 10 already covers or in another one; split by whether the
question is taken as a set question (``asks_for_a_set``); and how many of those questions an ideal use of the last
TAIL slots (the missing evidence of the top 50 in place of the tail's other items) would complete.
``--embedder NAME``: rank with that embedder's vectors (hybrid), as memory_search does with it configured;
``--cache DIR``: keep its embeddings in DIR (keyed by the embedder's name and the text's SHA-256) so that a second
run embeds only what changed (minilm-onnx embeds the dev split in about 4 minutes, a cached run in seconds);
``--store DIR``: keep the ingested stores in DIR (one per data directory and embedder) and reuse them.
A profiling aid for designing ranking mechanisms on the dev split; never run it on the held-out set to tune.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from aleph_memory import MemoryStore
from aleph_memory._answers import asks_for_a_set
from aleph_memory._text import stems
from bench_memory import DESIGN, LOCOMO, _embedder, load_conversation, turn_items

DEPTH = 50
K = 10
PROFILE_DEPTH = 300
TAIL = 3


class CachedEmbedder:
    """``real``'s vectors kept in a SQLite file under ``folder``, keyed by the embedder's name and the text's hash.

    Same ``name`` and ``dim`` as ``real``: a store written through it holds ``real``'s own vectors. Called from
    the store's vector worker and from search, so one lock guards the file.
    """

    def __init__(self, real: Any, folder: Path) -> None:
        self.real, self.name, self.dim = real, real.name, real.dim
        folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(folder / "embeddings.sqlite", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (model TEXT, key TEXT, vec BLOB, PRIMARY KEY (model, key))")
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        with self._lock:
            found = {
                k: np.frombuffer(v, dtype=np.float32)
                for k, v in self._db.execute(
                    f"SELECT key, vec FROM v WHERE model = ? AND key IN ({','.join('?' * len(keys))})",
                    [self.name, *keys],
                )
            }
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if missing:
            vectors = np.asarray(self.real.embed([t for _, t in missing]), dtype=np.float32)
            with self._lock, self._db:
                for (k, _), vec in zip(missing, vectors, strict=True):
                    found[k] = vec
                    self._db.execute("INSERT OR REPLACE INTO v VALUES (?, ?, ?)", (self.name, k, vec.tobytes()))
        return np.stack([found[k] for k in keys]) if keys else np.zeros((0, self.dim), dtype=np.float32)


def conversations(store: MemoryStore, data: Path, *, ingest: bool) -> Iterator[tuple[str, list, list]]:
    """Each LoCoMo-format file of ``data`` as (name, turns, questions), its turns in ``store`` with their vectors.

    ``ingest`` False: the store was kept from an earlier run (``--store``) and holds them already.
    """
    for conversation in sorted(data.glob("*.json")):
        name, turns, questions = load_conversation(conversation)
        if ingest:
            store.ingest(name, turn_items(name, turns))
        if not store.wait_for_vectors(timeout=3600):
            raise SystemExit(f"the vector worker did not finish on {name}")
        yield name, turns, questions


class Profile:
    """Where the missing evidence of multi-evidence questions sits (see ``--profile``)."""

    def __init__(self) -> None:
        self.turns: dict[tuple[str, str, str], int] = {}
        self.questions: dict[tuple[str, str], int] = {}

    def add(self, question: str, evidence: set[str], top: list[str], deep: list[str], by_id: dict) -> None:
        if len(evidence) < 2:
            return
        kind = "set" if asks_for_a_set(question) else "other"
        missing = evidence - set(top)
        free = sum(1 for r in top[K - TAIL :] if r not in evidence)
        for label, hit in (
            ("multi-evidence questions", True),
            ("all evidence in the top 10", not missing),
            (f"complete with the ideal last {TAIL} slots", missing <= set(deep[:DEPTH]) and len(missing) <= free),
        ):
            self.questions[(kind, label)] = self.questions.get((kind, label), 0) + hit
        covered = {by_id[r]["session"] for r in top if r in by_id}
        asked = stems(question)
        for e in missing:
            turn = by_id.get(e)
            if turn is None:
                continue
            rank = deep.index(e) + 1 if e in deep else None
            if rank is None:
                where = "not in top 300, " + ("shares a word" if stems(turn["text"]) & asked else "paraphrase")
            else:
                band = "ranked 11-50" if rank <= DEPTH else f"ranked 51-{PROFILE_DEPTH}"
                where = band + (", session in top 10" if turn["session"] in covered else ", other session")
            self.turns[(kind, where, "")] = self.turns.get((kind, where, ""), 0) + 1

    def print(self) -> None:
        print("\nMulti-evidence questions (set: asks_for_a_set) and where their missing evidence turns are:")
        for (kind, label), n in sorted(self.questions.items()):
            print(f"  {kind:<5} {label:<42} {n:>4}")
        for (kind, where, _), n in sorted(self.turns.items()):
            print(f"  {kind:<5} missing turn {where:<36} {n:>4}")


def _arg(name: str) -> str | None:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def main() -> None:
    data = Path(_arg("--data") or LOCOMO)
    only_kind = _arg("--kind")
    all_only = "--all-only" in sys.argv
    quiet = "--quiet" in sys.argv
    save = _arg("--save")
    profile = Profile() if "--profile" in sys.argv else None
    embedder = _embedder(_arg("--embedder"))
    if embedder is not None and _arg("--cache"):
        embedder = CachedEmbedder(embedder, Path(_arg("--cache") or ""))
    kept = _arg("--store")
    totals: dict[str, list[int]] = {}
    saved: dict[str, list[bool]] = {}
    misses: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(kept) if kept else Path(tmp)
        label = f"{data.resolve().name}-{embedder.name if embedder else 'lexical'}"
        path = folder / label / "memory.sqlite"
        fresh = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        store = MemoryStore(path, embedder=embedder)
        for name, turns, questions in conversations(store, data, ingest=fresh):
            by_id = {t["id"]: t for t in turns}
            for q in questions:
                hits = store.search(name, q["q"], limit=DEPTH).hits
                top10 = store.search(name, q["q"], limit=K).hits
                refs = [h.item.ref for h in top10]
                deep = [h.item.ref for h in hits]
                if profile is not None:
                    deep300 = [h.item.ref or "" for h in store.search(name, q["q"], limit=PROFILE_DEPTH).hits]
                    profile.add(q["q"], q["evidence"], [r or "" for r in refs], deep300, by_id)
                found = q["evidence"] & set(refs)
                ok_any, ok_all = bool(found), q["evidence"] <= set(refs)
                saved[f"{name}: {q['q']}"] = [ok_any, ok_all]
                groups = [q["kind"], "dated" if q["dated"] else "undated", "overall"]
                if data.resolve() == LOCOMO.resolve():
                    groups.append("design" if name in DESIGN else "confirm")
                for group in groups:
                    row = totals.setdefault(group, [0, 0, 0])
                    row[0] += ok_any
                    row[1] += ok_all
                    row[2] += 1
                if ok_all or (only_kind and q["kind"] != only_kind) or (all_only and not ok_any):
                    continue
                lines = [f"[{q['kind']}{' dated' if q['dated'] else ''}] {name}: {q['q']}"]
                for e in sorted(q["evidence"]):
                    t = by_id.get(e)
                    rank = refs.index(e) + 1 if e in refs else (deep.index(e) + 1 if e in deep else "-")
                    text = f"{t['speaker']} s{t['session']} {t['at']:%Y-%m-%d}: {t['text'][:150]}" if t else "?"
                    lines.append(f"    evidence {e} rank {rank}: {text}")
                for h in top10:
                    t = by_id.get(h.item.ref or "")
                    if t is not None:
                        lines.append(
                            f"      top {h.score:.3f} {h.item.ref} s{t['session']} {t['at']:%Y-%m-%d}"
                            f" {t['speaker']}: {t['text'][:110]}"
                        )
                misses.append("\n".join(lines))
        store.close()
    for group in sorted(totals):
        a, b, n = totals[group]
        print(f"{group:<16} {n:>4}  any {a / n:.3f}  all {b / n:.3f}  ({a}/{b})")
    if not quiet:
        print("\n".join(misses))
    if profile is not None:
        profile.print()
    if save:
        Path(save).write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
