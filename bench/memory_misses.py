"""aleph-memory: list the questions whose evidence is not in the top 10, by kind, with what ranked above it.

Run: python bench/memory_misses.py [--data DIR] [--kind KIND] [--all-only] [--quiet] [--save FILE]
Reads LoCoMo-format files (default: the dev split) through the store's own search (no chokepoint, so it is
quick), prints recall@10 any / all per question kind, dated and undated, then every miss: the question, each
evidence turn with its rank in the top 50 (or "-"), and the turns that ranked above the first missing one.
``--all-only``: list only questions with some but not all evidence found (the "all evidence" misses).
A profiling aid for designing ranking mechanisms on the dev split; never run it on the held-out set to tune.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from aleph_memory import MemoryStore
from bench_memory import LOCOMO, load_conversation, turn_items

DEPTH = 50
K = 10


def _arg(name: str) -> str | None:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def main() -> None:
    data = Path(_arg("--data") or LOCOMO)
    only_kind = _arg("--kind")
    all_only = "--all-only" in sys.argv
    quiet = "--quiet" in sys.argv
    save = _arg("--save")
    totals: dict[str, list[int]] = {}
    saved: dict[str, list[bool]] = {}
    misses: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "memory.sqlite")
        for path in sorted(data.glob("*.json")):
            name, turns, questions = load_conversation(path)
            store.ingest(
                name,
                turn_items(name, turns),
            )
            by_id = {t["id"]: t for t in turns}
            for q in questions:
                hits = store.search(name, q["q"], limit=DEPTH).hits
                top10 = store.search(name, q["q"], limit=K).hits
                refs = [h.item.ref for h in top10]
                deep = [h.item.ref for h in hits]
                found = q["evidence"] & set(refs)
                ok_any, ok_all = bool(found), q["evidence"] <= set(refs)
                saved[f"{name}: {q['q']}"] = [ok_any, ok_all]
                for group in (q["kind"], "dated" if q["dated"] else "undated", "overall"):
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
    if save:
        Path(save).write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
