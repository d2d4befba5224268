"""A set question's tail: the new sessions that tell the same kind of event as the list's best, by their vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aleph_memory import MemoryStore, NewItem

np = pytest.importorskip("numpy")


class Index:
    """The two things ``by_meaning`` reads of a VectorIndex: the rowids (ascending) and each row's own vector."""

    def __init__(self, vectors: dict[int, list[float]]) -> None:
        self.dim = len(next(iter(vectors.values())))
        self.rowids = np.array(sorted(vectors), dtype=np.int64)
        self.matrix = np.array([vectors[r] for r in sorted(vectors)], dtype=np.float32)


FISHING, WEATHER, FOOD = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]


def _case(**extra: Any) -> dict[str, Any]:
    # Rowids 1-7: the list's head (session "a", fishing); 8-11: candidates of new sessions.
    ranked = list(range(1, 12))
    scores = {r: 1.0 - r / 20 for r in ranked}
    sessions: dict[int, str | None] = {r: "a" for r in range(1, 8)}
    sessions |= {8: "b", 9: "c", 10: "c", 11: "d"}
    vectors = {r: FISHING for r in range(1, 8)} | {8: WEATHER, 9: FOOD, 10: FISHING, 11: FISHING}
    case = {"ranked": ranked, "scores": scores, "sessions": sessions, "limit": 10, "vectors": vectors, "similarity": {}}
    return case | extra


def _run(case: dict[str, Any]) -> list[int]:
    from aleph_memory._answervecs import by_meaning

    return by_meaning(
        case["ranked"], case["scores"], case["sessions"], case["limit"], Index(case["vectors"]), case["similarity"]
    )


def test_the_tail_takes_the_sessions_that_tell_the_same_kind_of_event() -> None:
    out = _run(_case())
    assert out[:7] == list(range(1, 8))  # the head stays where the ranking put it
    # Session d tells of fishing again (11), session b of the weather (8, ranked higher): d comes first.
    assert out[7] == 11


def test_a_session_is_represented_by_its_best_ranked_item_not_its_most_similar_one() -> None:
    # Session c: 9 ranks above 10, which is more like the head. The ranking chooses the item.
    out = _run(_case())
    assert 9 in out and 10 not in out


def test_the_questions_own_similarity_counts_beside_the_lists_vectors() -> None:
    out = _run(_case(similarity={8: 1.0}))
    assert out[7] == 8


def test_items_that_may_not_fill_the_tail_stay_in_ranking_order_after_it() -> None:
    case = _case(limit=11)
    case["sessions"][11] = None  # the other person's turn (fishing too), for a question about one person
    out = _run(case)
    assert out[7:9] == [8, 9]  # the new sessions first, in order of meaning (none tells of fishing)
    assert out[9:] == [10, 11]  # then the ranking's order


def test_a_missing_vector_counts_as_no_similarity() -> None:
    case = _case(limit=10)
    del case["vectors"][11]  # its vector is not written yet
    assert _run(case)[7:] == [8, 9, 11]


class Topics:
    """A small real embedder: each text's vector counts its topic words (fishing, weather, food)."""

    name = "topics"
    dim = 3
    WORDS = (("rod", "trout", "lake", "fishing", "fish"), ("rain", "sunny", "weather"), ("pasta", "cake", "food"))

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[0.1 + sum(t.lower().count(w) for w in words) for words in self.WORDS] for t in texts]


def test_a_count_question_lists_the_paraphrased_telling_of_another_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aleph_memory._search as search

    # The question's own similarity weighs little here, as it does for a paraphrase among hundreds of turns in a
    # real store: what finds the telling is its likeness to the events already listed.
    monkeypatch.setattr(search, "DENSE_WEIGHT", 0.1)
    store = MemoryStore(tmp_path / "m.sqlite", embedder=Topics())
    items = [NewItem(f"I went fishing, fishing day {n}!", "turn", speaker="Ann", session="s0", seq=n) for n in range(9)]
    # Sessions that say "fishing" but tell of food, and one that tells of fishing in other words.
    for n in range(1, 5):
        items.append(
            NewItem(
                f"Fishing? No: pasta, cake, pasta, cake, food, food {n}.", "turn", speaker="Ann", session=f"f{n}", seq=0
            )
        )
    items.append(
        NewItem("Caught a trout at the lake with my rod.", "turn", speaker="Ann", session="t1", seq=0, ref="told")
    )
    store.ingest("alice", items)
    assert store.wait_for_vectors(60)

    def refs() -> list[str | None]:
        return [h.item.ref for h in store.search("alice", "How many times did Ann go fishing?").hits]

    assert "told" in refs()
    monkeypatch.setattr(search, "VECTOR_SETS", False)
    assert "told" not in refs()  # by rank, the sessions that say "fishing" take the tail
    store.close()
