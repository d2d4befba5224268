"""aleph-memory: list the questions whose evidence is not in the top 10, by kind, with what ranked above it.

Run: python bench/memory_misses.py [--data DIR] [--kind KIND] [--all-only] [--profile] [--quiet] [--save FILE]
Reads LoCoMo-format files (default: the dev split) through the store's own search (no chokepoint, so it is
quick), prints recall@10 any / all per question kind, dated and undated, then every miss: the question, each
evidence turn with its rank in the top 50 (or "-"), and the turns that ranked above the first missing one.
``--all-only``: list only questions with some but not all evidence found (the "all evidence" misses).
``--profile``: sort the evidence turns that questions with several of them miss from the top 10: not among the
first PROFILE_DEPTH at all (and whether they share a content word with the question: a paraphrase when not),
ranked 11-50 or 51-PROFILE_DEPTH, in a session the top 10 already covers or in another one; split by whether the
question is taken as a set question (``asks_for_a_set``); and how many of those questions an ideal use of the last
TAIL slots (the missing evidence of the top 50 in place of the tail's other items) would complete.
A profiling aid for designing ranking mechanisms on the dev split; never run it on the held-out set to tune.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from aleph_memory import MemoryStore
from aleph_memory._answers import asks_for_a_set
from aleph_memory._text import stems
from bench_memory import LOCOMO, load_conversation, turn_items

DEPTH = 50
K = 10
PROFILE_DEPTH = 300
TAIL = 3


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
                if profile is not None:
                    deep300 = [h.item.ref or "" for h in store.search(name, q["q"], limit=PROFILE_DEPTH).hits]
                    profile.add(q["q"], q["evidence"], [r or "" for r in refs], deep300, by_id)
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
    if profile is not None:
        profile.print()
    if save:
        Path(save).write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
