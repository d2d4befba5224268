"""Ranking on real SQLite/FTS5: people, neighbouring turns, sessions, kinds, and vectors from the family's hook."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import pytest
from aleph_memory import MemoryStore, NewItem

import aleph

from .conftest import caller, make_runtime, wait_for_vectors

pytestmark = pytest.mark.anyio


def dialog(store: MemoryStore, agent: str, session: str, turns: list[tuple[str, str]]) -> None:
    store.ingest(
        agent,
        [
            NewItem(text, "turn", speaker=who, session=session, seq=i, ref=f"{session}:{i}")
            for i, (who, text) in enumerate(turns)
        ],
    )


FILLER = [
    ("Caroline", "Morning! How was the weekend?"),
    ("Mel", "Busy, the kids had a football match."),
    ("Caroline", "Did they win?"),
    ("Mel", "They drew, but they played well."),
]


async def test_a_reply_is_found_through_the_question_beside_it(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    dialog(
        store,
        "alice",
        "d1",
        [*FILLER, ("Caroline", "Do you have any pets at home?"), ("Mel", "Yes, two cats and a dog.")],
    )
    dialog(store, "alice", "d2", [("Caroline", "I read about pets in flats."), ("Mel", "Interesting article.")])
    hits = store.search("alice", "What pets does Mel keep at home?", limit=3).hits
    # "Yes, two cats and a dog." shares no word with the query: only its neighbour's "pets" finds it.
    assert "d1:5" in [h.item.ref for h in hits]
    store.close()


async def test_a_named_person_is_preferred_and_their_name_is_not_a_search_word(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    dialog(
        store,
        "alice",
        "d1",
        [("Caroline", "Thanks Mel, I started pottery classes."), ("Mel", "I love pottery too, I made a bowl.")],
    )
    result = store.search("alice", "What did Mel make in pottery?", limit=2)
    assert result.people == ("Mel",)
    assert result.hits[0].item.speaker == "Mel"
    call = caller(rt)
    out = await call("memory_search", query="What did Mel make in pottery?", kinds=["turn"])
    assert out["about"] == ["Mel"] and out["facts"][0]["speaker"] == "Mel"
    assert out["mode"] == "lexical" and out["degraded"] == "no embedding provider configured"
    store.close()


async def test_kinds_and_the_current_session_scope_filter_results(rt: aleph.Aleph) -> None:
    call = caller(rt, session="here")
    await call("remember", action="add", content="The orchard has apple trees")
    other = caller(rt, session="there")
    await other("remember", action="add", content="The orchard also has pear trees")
    local = await call("memory_search", query="orchard trees", scope="current_session")
    assert [f["content"] for f in local["facts"]] == ["The orchard has apple trees"]
    both = await other("memory_search", query="orchard trees", scope="both")
    assert both["facts"][0]["content"] == "The orchard also has pear trees"
    assert (await call("memory_search", query="orchard", kinds=["turn"]))["facts"] == []


class Trigrams:
    """A real (if small) embedder: hashed character trigrams, so words sharing stems land close together."""

    name = "trigram"
    dim = 64

    def embed(self, texts):  # type: ignore[no-untyped-def]
        out = []
        for text in texts:
            vec = [0.0] * self.dim
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                vec[int(hashlib.md5(padded[i : i + 3].encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out


class TrigramPlugin:
    @aleph.hookimpl
    def aleph_memory_embedders(self, register):  # type: ignore[no-untyped-def]
        register("trigram", Trigrams)


async def test_an_embedder_from_the_family_hook_adds_vectors_to_the_ranking(workspace: Path) -> None:
    pytest.importorskip("numpy")
    async with make_runtime(workspace, '[memory]\nembedder = "trigram"\n', plugins=(TrigramPlugin(),)) as rt:
        call = caller(rt)
        await call("remember", action="add", content="Photographs of the harbour at dusk")
        await call("remember", action="add", content="Invoices for the accountant")
        wait_for_vectors(rt, Trigrams())
        out = await call("memory_search", query="photography harbour")
        assert out["mode"] == "hybrid" and "degraded" not in out
        assert out["facts"][0]["content"] == "Photographs of the harbour at dusk"
        # No shared word at all: only the vectors can find it.
        vec_only = await call("memory_search", query="photographic")
        assert vec_only["facts"][0]["content"] == "Photographs of the harbour at dusk"


def test_a_turn_is_embedded_with_its_neighbours_and_again_when_a_neighbour_arrives(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    from aleph_memory._providers import embed_normalised

    embedder = Trigrams()
    store = MemoryStore(tmp_path / "m.sqlite", embedder=embedder)
    dialog(store, "alice", "d1", [("Ann", "Guess who came home today?"), ("Bo", "Tell me!")])
    assert store.wait_for_vectors(60)
    ranker = store._memory.ranker
    index = ranker.vector_index(embedder, "alice")
    first, second = index.rowids.tolist()
    expected = embed_normalised(embedder, ["Guess who came home today? Tell me!"])[0]
    assert np.allclose(index.context[0], expected) and np.allclose(index.context[1], expected)
    assert np.allclose(index.matrix[1], embed_normalised(embedder, ["Tell me!"])[0])  # its own vector stays its own
    # A later turn of the session changes the window of the turn before it: that one is embedded again.
    store.ingest("alice", [NewItem("This is Max, my new puppy.", "turn", speaker="Ann", session="d1", seq=2)])
    assert store.wait_for_vectors(60)
    index = ranker.vector_index(embedder, "alice")
    assert index.rowids.tolist()[:2] == [first, second]
    assert np.allclose(index.context[0], expected)  # seq 0 is two turns away: unchanged
    grown = embed_normalised(embedder, ["Guess who came home today? Tell me! This is Max, my new puppy."])[0]
    assert np.allclose(index.context[1], grown)
    assert np.allclose(index.context[2], embed_normalised(embedder, ["Tell me! This is Max, my new puppy."])[0])
    # Another agent's turns are not this agent's; this agent's next turn after them still arrives.
    dialog(store, "bob", "d9", [("Cy", "Unrelated."), ("Di", "Quite.")])
    store.ingest("alice", [NewItem("He loves the beach.", "turn", speaker="Ann", session="d1", seq=3)])
    assert store.wait_for_vectors(60)
    index = ranker.vector_index(embedder, "alice")
    assert len(index.rowids) == 4 and set(index.speakers.tolist()) == {"Ann", "Bo"}
    after = embed_normalised(embedder, ["Tell me! This is Max, my new puppy. He loves the beach."])[0]
    assert np.allclose(index.context[2], after)
    store.close()


def test_a_question_naming_one_person_takes_its_nearest_vectors_among_that_persons_turns(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    store = MemoryStore(tmp_path / "m.sqlite", embedder=Trigrams())
    # "kittenish" shares no stem with "kittens" (no full-text match); only the vectors find these turns.
    dialog(store, "alice", "d1", [("Nate", "So kittenish today."), ("Joanna", "So kittenish today!")])
    dialog(store, "alice", "d2", [("Joanna", "The film festival was long.")])
    assert store.wait_for_vectors(60)
    named = [h.item.ref for h in store.search("alice", "What about Nate and kittens?").hits]
    assert named[0] == "d1:0" and "d1:1" not in named
    anyone = [h.item.ref for h in store.search("alice", "What about kittens?").hits]
    assert {"d1:0", "d1:1"} <= set(anyone)
    store.close()


def test_a_question_naming_two_people_takes_its_nearest_vectors_among_its_subjects_turns(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    store = MemoryStore(tmp_path / "m.sqlite", embedder=Trigrams())
    dialog(store, "alice", "d1", [("Nate", "So kittenish today."), ("Joanna", "So kittenish today!")])
    dialog(store, "alice", "d2", [("Joanna", "The film festival was long.")])
    assert store.wait_for_vectors(60)
    # The subject is the first person named who is not named as an owner ("Joanna's").
    nate = [h.item.ref for h in store.search("alice", "What kittens did Nate buy for Joanna?").hits]
    assert nate[0] == "d1:0" and "d1:1" not in nate
    owner = [h.item.ref for h in store.search("alice", "What kittens did Joanna's friend Nate buy?").hits]
    assert owner[0] == "d1:0" and "d1:1" not in owner
    joanna = [h.item.ref for h in store.search("alice", "What kittens did Joanna buy for Nate?").hits]
    assert joanna[0] == "d1:1" and "d1:0" not in joanna
    store.close()


def test_a_turn_that_asks_near_the_question_lifts_its_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    import aleph_memory._search as search

    store = MemoryStore(tmp_path / "m.sqlite", embedder=Trigrams())
    # "kittenish" shares no stem with "kittens": only the vectors relate the question to these turns.
    dialog(store, "alice", "d1", [("Ann", "Are the kittenish twins yours?"), ("Bo", "Yep, the twins are ours!")])
    for n in range(2, 6):
        dialog(store, "alice", f"d{n}", [("Cy", f"Kittenish weather on day {n}, kittenish!")])
    assert store.wait_for_vectors(60)

    def best() -> str | None:
        return store.search("alice", "Who has the kitten twins?", limit=1).hits[0].item.ref

    assert best() == "d1:1"  # the answer, above the question that found it
    monkeypatch.setattr(search, "DENSE_REPLY_SHARE", 0.0)
    assert best() == "d1:0"
    store.close()


async def test_a_configured_embedder_that_is_not_installed_is_a_clear_error(workspace: Path) -> None:
    async with make_runtime(workspace, '[memory]\nembedder = "nope"\n') as rt:
        with pytest.raises(aleph.ExecutionFailed, match=r"embedder not available: .*'nope' is not registered"):
            await caller(rt)("memory_search", query="anything")


async def test_the_bundled_wordllama_embedder_loads_offline(workspace: Path) -> None:
    try:
        import wordllama  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise  # the memory tox env installs it: missing there is a failure, not a skip
        pytest.skip("wordllama not installed (tox -e memory installs it)")
    async with make_runtime(workspace, '[memory]\nembedder = "wordllama"\n') as rt:
        call = caller(rt)
        await call("remember", action="add", content="My daughter adores her kitten")
        await call("remember", action="add", content="The quarterly tax filing is due")
        from aleph_memory._wordllama import WordLlamaEmbedder

        wait_for_vectors(rt, WordLlamaEmbedder())
        out = await call("memory_search", query="child pet cat")
        assert out["mode"] == "hybrid"
        assert out["facts"][0]["content"] == "My daughter adores her kitten"


async def test_memory_explore_reaches_superseded_versions_and_neighbouring_turns(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    dialog(
        store,
        "alice",
        "d1",
        [("Ann", "We adopted a greyhound"), ("Bo", "Lovely!"), ("Ann", "Yes"), ("Bo", "Does it sleep a lot?")],
    )
    store.close()
    call = caller(rt)
    await call("remember", action="add", content="Comet eats salmon kibble", subject="comet.food")
    await call("remember", action="add", content="Comet now eats lamb kibble", subject="comet.food")
    out = await call("memory_explore", query="salmon kibble")
    via = {(e["content"], e["via"]) for e in out["expanded_facts"]}
    assert [s["content"] for s in out["seed_facts"]] == ["Comet now eats lamb kibble"]
    assert ("Comet eats salmon kibble", "another version of this fact") in via
    walk = await call("memory_explore", query="adopted greyhound", max_hops=3, max_per_hop=1)
    assert sorted(s["content"] for s in walk["seed_facts"]) == ["Lovely!", "We adopted a greyhound", "Yes"]
    chain = [(e["hop"], e["content"], e["via"]) for e in walk["expanded_facts"]]
    assert chain == [(1, "Does it sleep a lot?", "neighbouring turn")]
    assert walk["hops_performed"] == 1
