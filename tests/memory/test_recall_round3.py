"""Recall, third round (issue 33): a dated question made of names and a date, how sure a long span is of one day,
month names inside other words, and answer sets that cover each part of a question."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aleph_memory import MemoryStore, NewItem
from aleph_memory._when import find_window

import aleph

pytestmark = pytest.mark.anyio


def ms(day: str) -> int:
    return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() * 1000)


def turn(text: str, who: str, session: str, seq: int, said: str) -> NewItem:
    return NewItem(text, "turn", speaker=who, session=session, seq=seq, ref=f"{session}:{seq}", occurred_at=ms(said))


def greetings(count: int) -> list[NewItem]:
    """Turns that greet Amara by name on other days: what a search for her name alone would rank first."""
    return [
        turn(f"Hey Amara! Amara, how was your week, Amara? ({i})", "Jonas", f"g{i}", 0, "2021-11-01")
        for i in range(count)
    ]


async def test_a_question_of_a_name_and_a_date_asks_what_happened_that_day(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    # 15 September 2021 is a Wednesday: "on Friday" is the 10th.
    store.ingest(
        "alice",
        [*greetings(12), turn("On Friday I went horseback riding with Yara.", "Amara", "s3", 0, "2021-09-15")],
    )
    refs = [h.item.ref for h in store.search("alice", "What did Amara do on 10 September 2021?", limit=3).hits]
    assert refs[0] == "s3:0"
    # Without a date, a query of a name still searches the name.
    assert store.search("alice", "Amara?", limit=1).hits[0].item.ref.startswith("g")
    store.close()


async def test_another_person_named_beside_the_subject_stays_in_the_query(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("Busy week, I fixed the fence and cleaned the garage.", "Nate", "s1", 0, "2022-05-25"),
            turn("I got Joanna a stuffed animal, she loved it.", "Nate", "s1", 1, "2022-05-25"),
            turn("The weather was lovely today.", "Nate", "s1", 2, "2022-05-25"),
            turn("Hi Nate!", "Joanna", "s1", 3, "2022-05-25"),
        ],
    )
    hits = store.search("alice", "What did Nate do for Joanna on 25 May, 2022?", limit=1).hits
    assert hits[0].item.ref == "s1:1"
    store.close()


async def test_a_week_is_less_sure_of_the_day_asked_than_a_weekday(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    # Said on Wednesday 15 September 2021: last week is 6-12 September, Friday the 10th.
    store.ingest(
        "alice",
        [
            turn("Last week I went to a concert in Boston.", "Amara", "s3", 0, "2021-09-15"),
            turn("On Friday I went horseback riding with Yara.", "Amara", "s3", 1, "2021-09-15"),
        ],
    )
    # The day asked is widened by a few days for said time; a span's share of it is taken of the day itself,
    # so a whole week is a seventh as sure of the 10th as a named Friday.
    refs = [h.item.ref for h in store.search("alice", "What did Amara do on 10 September 2021?", limit=2).hits]
    assert refs == ["s3:1", "s3:0"]
    store.close()


@pytest.mark.parametrize(
    "question",
    [
        "What is the name of Maria's second puppy?",
        "What did she buy in Augusta?",
        "Who lives by Decker street?",
        "What did Jan say of Junior's school?",
    ],
)
def test_a_month_name_inside_another_word_is_not_a_date(question: str) -> None:
    assert find_window(question, (2022, 2023)) is None


@pytest.mark.parametrize(("question", "text"), [("camping in Sept. 2022", "Sept. 2022"), ("in Mar 2023", "Mar 2023")])
def test_month_abbreviations_still_name_a_month(question: str, text: str) -> None:
    window = find_window(question, (2022, 2023))
    assert window is not None and window.text == text


@pytest.mark.parametrize(
    ("question", "first", "last"),
    [
        ("Where was John between August 11 and August 15 2023?", "2023-08-11", "2023-08-15"),
        ("What did she do from 3 to 9 May 2022?", "2022-05-03", "2022-05-09"),
        ("Who visited between May 30 and June 2, 2023?", "2023-05-30", "2023-06-02"),
        ("What happened from 3rd to 9th of May, 2022?", "2022-05-03", "2022-05-09"),
    ],
)
def test_a_range_of_days_is_one_window_from_its_first_day_to_its_last(question: str, first: str, last: str) -> None:
    window = find_window(question)
    assert window is not None and len(window.ranges) == 1
    start, end = window.ranges[0]
    # Widened by the same slack as a single day asked.
    assert start + window.slack == ms(first)
    assert end - window.slack == ms(last) + 86_400_000


def test_a_range_too_long_to_narrow_anything_is_not_one_window() -> None:
    window = find_window("What did he do from 2 May 2020 to 9 May 2023?")
    assert window is None or window.ranges[0][1] - window.ranges[0][0] < 400 * 86_400_000


async def test_a_question_about_a_range_finds_what_was_said_inside_it(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            turn("I was in Chicago, the city was awesome.", "John", "s6", 0, "2023-08-11"),
            turn("I was in Seattle, the city was awesome.", "John", "s2", 0, "2023-06-01"),
            turn("I was in Denver, the city was awesome.", "John", "s9", 0, "2023-10-01"),
        ],
    )
    hits = store.search("alice", "Which city was John in between August 11 and August 15 2023?", limit=1).hits
    assert hits[0].item.ref == "s6:0"
    store.close()


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("What has Melanie painted?", True),
        ("Where has Melanie camped?", True),
        ("What board games has Nate played?", True),
        ("Which cities has Jon visited?", True),
        ("What did Melanie paint last week?", False),
        ("Where did Caroline move from?", False),
        ("What has changed?", False),
    ],
)
def test_what_someone_has_done_over_time_asks_for_a_set(question: str, asks: bool) -> None:
    from aleph_memory._answers import asks_for_a_set

    assert asks_for_a_set(question) is asks


def test_a_set_keeps_the_rankings_head_and_gives_its_tail_to_sessions_not_yet_listed() -> None:
    from aleph_memory._answers import distinct_events

    ranked = list(range(1, 21))
    # Items 1-12 are one session's, 13-20 one session each.
    sessions = {r: "a" if r <= 12 else f"s{r}" for r in ranked}
    assert distinct_events(ranked, sessions, 10) == [1, 2, 3, 4, 5, 6, 7, 13, 14, 15]
    # A list of 3 keeps 2.
    assert distinct_events(ranked, sessions, 3) == [1, 2, 13]
    # No other session in the pool: the ranking goes on in order.
    assert distinct_events(ranked, dict.fromkeys(ranked, "a"), 10) == ranked[:10]


async def test_what_someone_has_painted_reaches_the_session_past_the_first_ones_neighbours(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    first = [
        turn(
            f"I painted the lake at sunrise, part {i}; painting the lake is my favourite.", "Mel", "s1", i, "2023-05-08"
        )
        for i in range(10)
    ]
    store.ingest("alice", [*first, turn("Here's a horse I painted recently.", "Mel", "s2", 0, "2023-08-23")])
    refs = [h.item.ref for h in store.search("alice", "What has Mel painted?", limit=10).hits]
    assert "s2:0" in refs
    store.close()


async def test_a_set_question_about_one_person_fills_its_list_with_that_persons_other_sessions(
    rt: aleph.Aleph,
) -> None:
    store = MemoryStore.of(rt)
    first = [
        turn(
            f"I painted the lake at sunrise, part {i}; painting the lake is my favourite.", "Mel", "s1", i, "2023-05-08"
        )
        for i in range(6)
    ]
    boat = (
        "Busy month at work and at home with the kids, but on the weekend, between everything else going on,"
        " I finally painted a small wooden boat for my nephew."
    )
    store.ingest(
        "alice",
        [
            *first,
            # The other person's turn matches better than Mel's long one, but the question is about Mel.
            turn(
                "Painted? I painted the lake, painted the sunrise, painted the lake again!",
                "Ann",
                "s2",
                0,
                "2023-06-01",
            ),
            turn(boat, "Mel", "s3", 0, "2023-07-01"),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "What has Mel painted?", limit=3).hits]
    assert refs == ["s1:5", "s1:0", "s3:0"]
    store.close()


async def test_what_the_words_date_to_the_day_asked_beats_what_was_said_the_day_after(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.ingest(
        "alice",
        [
            # Said the day after the day asked: inside the few days a said time is allowed, not on the day.
            *[turn(f"Work was calm, nothing new ({i}).", "Ann", "s2", i, "2022-04-18") for i in range(6)],
            # 17 April 2022 was Easter Sunday.
            turn("This past Easter we all went rock climbing, a new tradition maybe!", "Ann", "s3", 0, "2022-05-01"),
        ],
    )
    refs = [h.item.ref for h in store.search("alice", "What did Ann do on April 17, 2022?", limit=3).hits]
    # The session's first turn keeps its place (a session opens by catching up on the days before it).
    assert refs[:2] == ["s2:0", "s3:0"]
    store.close()


def test_a_window_tells_the_dates_named_from_the_slack_around_them() -> None:
    window = find_window("on 8 May, 2023")
    assert window is not None and window.slack
    assert window.exactly(ms("2023-05-08") + 3_600_000)
    assert ms("2023-05-09") + 3_600_000 in window and not window.exactly(ms("2023-05-09") + 3_600_000)
    year = find_window("in 2023")
    assert year is not None and year.exactly(ms("2023-01-01"))
