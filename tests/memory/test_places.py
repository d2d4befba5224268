"""Places an item names, for questions that ask for a kind of place (issue 33)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aleph_memory import MemoryStore, NewItem
from aleph_memory._places import asks_for_a_place, places

import aleph

pytestmark = pytest.mark.anyio


def turn(text: str, who: str, session: str, seq: int, said: str = "2023-06-01") -> NewItem:
    at = int(datetime.strptime(said, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)
    return NewItem(text, "turn", speaker=who, session=session, seq=seq, ref=f"{session}:{seq}", occurred_at=at)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Took a short trip last week to Rome to clear my mind.", ["Rome"]),
        ("I went to Woodhaven, a small town in the Midwest.", ["Woodhaven", "Midwest"]),
        ("We moved to New York City in May.", ["New York City"]),
        ("I flew to Paris on Monday.", ["Paris"]),
        ("Two weeks in Rio de Janeiro!", ["Rio de Janeiro"]),
        ("We toured the U.S. and then D.C.", ["U.S."]),
        ("Back from the East Coast. How are you?", ["East Coast"]),
        ("Nice to meet you! I sent it to Maya in March.", []),
        ("I talked to Mel about it at Christmas, in my garden.", []),
    ],
)
def test_a_place_is_a_capitalised_name_a_locative_word_introduces(text: str, found: list[str]) -> None:
    assert places(text, frozenset({"maya", "mel"})) == found


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("Which cities has Jon visited?", True),
        ("What European countries has Maria been to?", True),
        ("What state did Nate visit?", True),
        ("Where did Joanna travel to in July 2022?", True),
        ("Which Star Wars-related locations would Tim enjoy?", True),
        ("What did Joanna eat in July 2022?", False),
        ("Which books has Tim read?", False),
    ],
)
def test_a_question_asks_for_a_place_by_its_kind_or_where(question: str, asks: bool) -> None:
    assert asks_for_a_place(question) is asks


async def test_which_cities_finds_the_turns_that_name_a_city_without_the_word(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    # Turns that share no word with the question either: without places, nothing ranks the cities first.
    chatter = [turn(f"How was your week? Mine was busy ({i}).", "Jon", f"c{i}", 0) for i in range(12)]
    store.ingest(
        "alice",
        [
            *chatter,
            turn("Took a short trip last week to Rome to clear my mind.", "Jon", "s1", 0),
            turn("Spent the weekend in Lisbon, the food was great.", "Jon", "s2", 0),
            turn("Gina went to Paris, she said.", "Gina", "s3", 0),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "Which cities has Jon visited?", limit=10).hits]
    assert {"s1:0", "s2:0"} <= set(refs)
    # The question is about Jon: the other person's places are not taken as candidates for it.
    assert "s3:0" not in refs
    # A strong match of the question's words still ranks first: a place is preferred, not required.
    store.ingest("alice", [turn("I have visited every city museum there is.", "Jon", "s4", 0)])
    assert store.search("alice", "Which cities has Jon visited?", limit=1).hits[0].item.ref == "s4:0"
    store.close()


async def test_a_both_question_takes_the_places_of_each_person_it_names(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    chatter = [turn(f"How was your week? Mine was busy ({i}).", "Maya", f"c{i}", 0) for i in range(12)]
    store.ingest(
        "alice",
        [
            *chatter,
            turn("We spent a week in Lisbon, lovely.", "Maya", "s1", 0),
            turn("I flew to Lisbon for work last spring.", "Leo", "s2", 0),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "Which city have both Maya and Leo been to?", limit=5).hits]
    assert {"s1:0", "s2:0"} <= set(refs)
    store.close()


def test_a_possessive_of_a_speaker_is_not_a_place() -> None:
    assert places("I went to Jess's house, then to Paris.", frozenset({"jess"})) == ["Paris"]
