"""Event time beside said time, "as of" bounds, and answer sets for questions that need several pieces of evidence."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from aleph_memory import MemoryStore, NewItem
from aleph_memory._events import resolve_events
from aleph_memory._when import find_window

import aleph

pytestmark = pytest.mark.anyio


def ms(day: str) -> int:
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)


def days(text: str, said: str) -> list[tuple[date, date]]:
    def day(at: int) -> date:
        return datetime.fromtimestamp(at / 1000, UTC).date()

    return [(day(e.start), day(e.end)) for e in resolve_events(text, ms(said))]


def turn(text: str, who: str, session: str, seq: int, day: str) -> NewItem:
    return NewItem(text, "turn", speaker=who, session=session, seq=seq, ref=f"{session}:{seq}", occurred_at=ms(day))


@pytest.mark.parametrize(
    ("text", "said", "span"),
    [
        ("Yesterday I met some artists in Boston", "2023-10-04", ("2023-10-03", "2023-10-04")),
        ("I ran it the day before yesterday", "2024-05-20", ("2024-05-18", "2024-05-19")),
        ("I went back three days ago", "2024-08-05", ("2024-08-02", "2024-08-03")),
        # 5 August 2024 is a Monday: last weekend is 3-4 August, two weekends ago 27-28 July.
        ("We hiked last weekend", "2024-08-05", ("2024-08-03", "2024-08-05")),
        ("Two weekends ago I ran a trail 10k", "2024-08-05", ("2024-07-27", "2024-07-29")),
        # Said on a Tuesday: last week is the calendar week before.
        ("We got married last week", "2023-12-26", ("2023-12-18", "2023-12-25")),
        ("This past Christmas I saw my grandparents", "2024-12-27", ("2024-12-24", "2024-12-27")),
        ("Last Christmas was quiet", "2024-06-01", ("2023-12-24", "2023-12-27")),
        ("The van broke down on Tuesday", "2023-01-14", ("2023-01-10", "2023-01-11")),
        ("It opens next Friday", "2023-03-03", ("2023-03-10", "2023-03-11")),
        ("I moved last month", "2024-01-15", ("2023-12-01", "2024-01-01")),
        ("I painted it in 2010", "2024-05-20", ("2010-01-01", "2011-01-01")),
        ("We met last March", "2024-03-20", ("2023-03-01", "2023-04-01")),
    ],
)
def test_relative_time_resolves_against_when_it_was_said(text: str, said: str, span: tuple[str, str]) -> None:
    assert days(text, said)[0] == (date.fromisoformat(span[0]), date.fromisoformat(span[1]))


def test_text_that_names_no_time_has_no_event_and_a_longer_phrase_wins() -> None:
    assert days("We talked about books and the garden", "2024-01-01") == []
    # "the day before yesterday" is not also "yesterday".
    assert len(days("the day before yesterday", "2024-05-20")) == 1


def test_as_of_and_until_make_a_bound_since_an_open_start() -> None:
    until = find_window("How many paintings had Nadia sold as of June 2023?")
    assert until is not None and until.bound and until.ranges[0][0] == 0
    assert ms("2023-01-05") in until and ms("2023-08-01") not in until
    since = find_window("What has she painted since 2020?")
    assert since is not None and since.bound and ms("2019-12-31") not in since and ms("2025-01-01") in since
    plain = find_window("What did she paint in June 2023?")
    assert plain is not None and not plain.bound and ms("2023-01-05") not in plain


async def test_a_dated_question_finds_what_happened_then_though_it_was_said_a_week_later(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("Work has been hectic, lots of meetings.", "Calvin", "s1", 0, "2023-10-03"),
            turn("Lunch was a sandwich at my desk again.", "Calvin", "s1", 1, "2023-10-03"),
            # 10 October 2023 is a Tuesday: "last Tuesday" is 3 October, a week before it was said.
            turn("Last Tuesday I met with some incredible artists in Boston!", "Calvin", "s2", 0, "2023-10-10"),
            turn("We should plan a trip soon.", "Calvin", "s2", 1, "2023-10-10"),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "Which city was Calvin in on 3 October, 2023?", limit=3).hits]
    # No word of the question is in it and it was said outside the window: only its event time finds it, and
    # it ranks above what was merely said that day (the session's first turn keeps its catching-up bonus).
    assert "s2:0" in refs and refs.index("s2:0") < refs.index("s1:1")
    store.close()


async def test_an_as_of_count_prefers_what_happened_before_the_bound(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("I sold a painting at the exhibition!", "Nadia", "s1", 0, "2023-05-10"),
            turn("I sold another painting, to a collector.", "Nadia", "s2", 0, "2023-09-10"),
        ],
    )
    hits = store.search("alice", "How many paintings had Nadia sold as of June 2023?", limit=2).hits
    assert [h.item.ref for h in hits] == ["s1:0", "s2:0"]
    store.close()


async def test_a_how_many_question_covers_each_session_that_tells_of_it(
    rt: aleph.Aleph, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("I hiked the ridge trail near Keswick last weekend.", "Priya", "s1", 0, "2024-03-12"),
            turn("The ridge trail hike near Keswick was muddy.", "Priya", "s1", 1, "2024-03-12"),
            turn("My sister loved the ridge trail hike too.", "Priya", "s1", 2, "2024-03-12"),
            turn("Keswick ridge trail views were gorgeous on the hike.", "Priya", "s1", 3, "2024-03-12"),
            turn("Work is busy this month.", "Priya", "s2", 0, "2024-08-05"),
            turn("I went back to hike the ridge near Keswick.", "Priya", "s2", 1, "2024-08-05"),
        ],
    )
    question = "How many times did Priya hike the ridge trail near Keswick?"
    refs = [h.item.ref for h in store.search("alice", question, limit=3).hits]
    assert "s2:1" in refs
    # The same ranking without answer sets fills the list with the first session's neighbours.
    monkeypatch.setattr("aleph_memory._search.asks_for_a_set", lambda q: False)
    assert "s2:1" not in [h.item.ref for h in store.search("alice", question, limit=3).hits]
    store.close()


def test_which_questions_ask_for_a_set() -> None:
    from aleph_memory._answers import asks_for_a_set

    for q in ("How many times did she hike?", "Which races has Tomas run?", "What did they both do?"):
        assert asks_for_a_set(q), q
    for q in ("Where did Priya hike in March?", "When did Tomas start pottery?"):
        assert not asks_for_a_set(q), q
