"""A "both" question about two named people takes each one's nearest turns by vector, not its subject's only."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest
from aleph_memory import MemoryStore, NewItem


class Trigrams:
    """A real (if small) embedder: hashed character trigrams, so words sharing stems land close together."""

    name = "trigram"
    dim = 64

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                vec[int(hashlib.md5(padded[i : i + 3].encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out


def _told(store: MemoryStore, session: str, who: str, text: str) -> None:
    store.ingest("alice", [NewItem(text, "turn", speaker=who, session=session, seq=0, ref=session)])


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    pytest.importorskip("numpy")
    store = MemoryStore(tmp_path / "m.sqlite", embedder=Trigrams())
    # "kittenish" shares no stem with "kittens": only the vectors relate the question to these turns. Nate
    # tells of it in many sessions, Joanna once, in other words than his.
    for n in range(12):
        _told(store, f"n{n}", "Nate", f"So kittenish today, day {n}!")
    _told(store, "j1", "Joanna", "Kittenish mood all week long.")
    _told(store, "j2", "Joanna", "The film festival was long.")
    assert store.wait_for_vectors(60)
    return store


def test_each_named_persons_turns_are_found_by_vector(store: MemoryStore) -> None:
    hits = store.search("alice", "What kittens do both Nate and Joanna like?").hits
    people = [h.item.speaker for h in hits]
    assert "j1" in [h.item.ref for h in hits]
    assert "Joanna" in people[:2] and "Nate" in people[:2]  # the speakers are taken in turn
    assert "j2" not in [h.item.ref for h in hits[:2]]
    store.close()


def test_without_per_person_retrieval_the_second_persons_paraphrase_is_not_a_candidate(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aleph_memory._search as search

    monkeypatch.setattr(search, "PER_PERSON", False)
    # The subject (Nate, the first named) gates the vectors: Joanna's turn shares no word with the question.
    refs = [h.item.ref for h in store.search("alice", "What kittens do both Nate and Joanna like?").hits]
    assert "j1" not in refs
    store.close()


def test_a_question_about_one_person_still_takes_that_persons_turns_only(store: MemoryStore) -> None:
    refs = [h.item.ref for h in store.search("alice", "What kittens does Nate like?").hits]
    assert "j1" not in refs and refs[0].startswith("n")
    store.close()


def test_the_index_splits_one_product_by_speaker_like_its_gate(store: MemoryStore) -> None:
    import numpy as np
    from aleph_memory._providers import embed_normalised

    embedder = Trigrams()
    index = store._memory.ranker.vector_index(embedder, "alice")
    query = embed_normalised(embedder, ["kittens"])[0]
    split = index.similarities_by_speaker(query, ["Nate", "Joanna", "Nobody"])
    for (ids, sims), speaker in zip(split, ["Nate", "Joanna"], strict=False):
        all_ids, gated = index.similarities(query, speaker)
        mine = np.isfinite(gated)
        assert ids.tolist() == all_ids[mine].tolist() and np.allclose(sims, gated[mine])
    assert [len(split[0][0]), len(split[1][0]), len(split[2][0])] == [12, 2, 0]
    store.close()
