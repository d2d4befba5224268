"""aleph-memory: could a ranker learned from the dev split's labels complete more "all evidence" questions?

Run: python bench/memory_rerank.py --cache DIR [--store DIR] [--embedder NAME]
Needs ``lightgbm`` and ``scikit-learn`` (``pip install lightgbm scikit-learn``: a check of the ranking, not a
dependency of the family). Replays every dev question through the store's own hybrid search (minilm-onnx unless
``--embedder`` says otherwise; ``--cache`` / ``--store`` as in ``memory_misses.py``), takes the best 50 items and
describes each by what the ranking knows of it: its place and score, its cosine to the question and to the best
three items, its session's share of the top 10, its distance in turns to a best item of the same session, the
question's stems it holds, whether its speaker is named, its length, whether it asks or shares an image, and the
question's kind (a set, "both", "how many", dated, "when"). A LambdaRank model (and a classifier filling only the
last slots of set questions) is trained on four conversations and ranks the fifth, for each of the five: a
leave-one-conversation-out estimate of what learning the combination would gain. Prints recall@10 any / all for
the ranking as it is and for each learned variant, on the design and confirm groups and overall.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from aleph_memory import MemoryStore
from aleph_memory._answers import asks_about_both, asks_for_a_set
from aleph_memory._text import stems
from bench_memory import DESIGN, LOCOMO, _embedder
from memory_misses import CachedEmbedder, _arg, conversations

DEPTH = 50
K = 10


def questions(embedder: Any, store_dir: Path) -> list[dict[str, Any]]:
    """Each dev question with its top 10, its best 50 and what the features need of them."""
    path = store_dir / f"{LOCOMO.resolve().name}-{embedder.name}" / "memory.sqlite"
    fresh = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    store = MemoryStore(path, embedder=embedder)
    out: list[dict[str, Any]] = []
    for name, turns, asked in conversations(store, LOCOMO, ingest=fresh):
        by_id = {t["id"]: (i, t) for i, t in enumerate(turns)}
        vectors = np.asarray(embedder.embed([t["text"] for t in turns]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for q in asked:
            top = [h.item.ref for h in store.search(name, q["q"], limit=K).hits]
            deep = store.search(name, q["q"], limit=DEPTH).hits
            refs = [r for r in dict.fromkeys(top + [h.item.ref for h in deep]) if r in by_id]
            question = np.asarray(embedder.embed([q["q"]])[0], dtype=np.float32)
            out.append(
                {
                    "conversation": name,
                    "q": q["q"],
                    "dated": q["dated"],
                    "evidence": q["evidence"],
                    "top": top,
                    "refs": refs,
                    "score": {h.item.ref: h.score for h in deep},
                    "question": question / np.linalg.norm(question),
                    "turns": {r: by_id[r][1] | {"pos": by_id[r][0], "vector": vectors[by_id[r][0]]} for r in refs},
                    "design": name in DESIGN,
                }
            )
    store.close()
    return out


def features(q: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """One row of features per candidate, and whether it is evidence."""
    refs, turns, score = q["refs"], q["turns"], q["score"]
    high, low = max(score.values(), default=1.0), min(score.values(), default=0.0)
    matrix = np.stack([turns[r]["vector"] for r in refs])
    to_question = matrix @ q["question"]
    by_meaning = np.argsort(np.argsort(-to_question))
    best = refs[:3]
    to_best = matrix @ np.stack([turns[r]["vector"] for r in best]).T
    text, asked = q["q"].lower(), stems(q["q"])
    kind = [asks_for_a_set(q["q"]), asks_about_both(q["q"]), "how many" in text, q["dated"], text.startswith("when")]
    in_top: dict[Any, int] = {}
    for r in refs[:K]:
        in_top[turns[r]["session"]] = in_top.get(turns[r]["session"], 0) + 1
    rows = []
    for i, r in enumerate(refs):
        t = turns[r]
        near = [abs(t["pos"] - turns[b]["pos"]) for b in best if b != r and turns[b]["session"] == t["session"]]
        shared = len(stems(t["text"]) & asked)
        rows.append(
            [
                np.log1p(i),
                (score.get(r, low) - low) / (high - low + 1e-9),
                to_question[i],
                by_meaning[i],
                max((to_best[i, j] for j, b in enumerate(best) if b != r), default=0.0),
                t["session"] == turns[refs[0]]["session"],
                in_top.get(t["session"], 0),
                min(near, default=20),
                shared,
                shared / (len(asked) or 1),
                (t["speaker"] or "").lower() in text,
                len(t["text"].split()),
                "?" in t["text"],
                "[shares" in t["text"],
                *kind,
                len(asked),
            ]
        )
    return np.asarray(rows, dtype=float), np.asarray([r in q["evidence"] for r in refs], dtype=float)


def learned(qs: list[dict[str, Any]], rows: list[tuple[np.ndarray, np.ndarray]], keep: int | None) -> list[list[str]]:
    """Each question's top 10 from a model trained on the other conversations.

    ``keep`` None: a LambdaRank model orders the whole 50. Else set questions keep the ranking's first ``keep``
    and a classifier's most likely evidence fills the rest; other questions keep their top 10.
    """
    import lightgbm

    tops: list[list[str]] = [[] for _ in qs]
    for held in sorted({q["conversation"] for q in qs}):
        train = [i for i, q in enumerate(qs) if q["conversation"] != held]
        x = np.vstack([rows[i][0] for i in train])
        y = np.concatenate([rows[i][1] for i in train])
        params = {"n_estimators": 100, "learning_rate": 0.05, "num_leaves": 7, "min_child_samples": 50, "verbose": -1}
        if keep is None:
            model: Any = lightgbm.LGBMRanker(**params).fit(x, y, group=[len(rows[i][1]) for i in train])
        else:
            model = lightgbm.LGBMClassifier(**params).fit(x, y)
        for i, q in enumerate(qs):
            if q["conversation"] != held:
                continue
            if keep is None:
                order = np.argsort(-model.predict(rows[i][0]), kind="stable")
                tops[i] = [q["refs"][j] for j in order[:K]]
            elif not asks_for_a_set(q["q"]):
                tops[i] = q["top"]
            else:
                likely = model.predict_proba(rows[i][0])[:, 1]
                first = q["top"][:keep]
                rest = sorted((r for r in q["refs"] if r not in first), key=lambda r: -likely[q["refs"].index(r)])
                tops[i] = first + rest[: K - keep]
    return tops


def report(label: str, qs: list[dict[str, Any]], tops: list[list[str]]) -> None:
    cells = []
    for group in ("design", "confirm", "overall"):
        chosen = [i for i, q in enumerate(qs) if group == "overall" or q["design"] == (group == "design")]
        found = sum(bool(qs[i]["evidence"] & set(tops[i])) for i in chosen)
        complete = sum(qs[i]["evidence"] <= set(tops[i]) for i in chosen)
        cells.append(f"{group} {found / len(chosen):.3f} / {complete / len(chosen):.3f} ({found}/{complete})")
    print(f"{label:<36} " + "   ".join(cells))


def main() -> None:
    try:
        import lightgbm  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"this check needs lightgbm and scikit-learn ({e.name} is missing)") from None
    cache = _arg("--cache")
    if not cache:
        raise SystemExit("--cache DIR is required (the dev split's embeddings are kept there)")
    embedder = CachedEmbedder(_embedder(_arg("--embedder") or "minilm-onnx"), Path(cache))
    qs = questions(embedder, Path(_arg("--store") or cache))
    rows = [features(q) for q in qs]
    report("the ranking as it is", qs, [q["top"] for q in qs])
    report("LambdaRank over the best 50", qs, learned(qs, rows, None))
    for keep in (9, 8, 7, 6):
        report(f"set questions: keep {keep}, learned tail", qs, learned(qs, rows, keep))


if __name__ == "__main__":
    sys.exit(main())
