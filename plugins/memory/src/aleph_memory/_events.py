"""When the thing an item tells of happened, beside when it was said (bi-temporal memory).

"Yesterday I met some artists in Boston", said on 4 October 2023, happened on 3 October; a question
about "October 3, 2023" should find it first, before everything else said on the 4th. At ingest each
item's relative time expressions are resolved against the item's own timestamp (``occurred_at``: for a
turn, its session's date) into half-open intervals of epoch ms, each with a confidence:

- days: "yesterday", "the day before yesterday", "last night", "today", "this morning", "three days ago",
  "a few days ago", "the other day";
- weeks and weekends: "last week", "two weeks ago", "next week", "last weekend", "two weekends ago";
- weekdays: "last Friday", "this past Sunday", "on Tuesday" (the latest one before), "next Friday";
- months and years: "last month", "two months ago", "next month", "last year", "in 2010", "last March",
  "in June" (the latest June up to then);
- holidays: "this past Christmas", "last Christmas", "on Christmas morning", "New Year's Eve", "Halloween",
  "Thanksgiving", "Valentine's Day", "the Fourth of July", "over Labor Day", "at Easter" (``_holidays``: the
  ``holidays`` package's calendar for the moving ones);
- the current week, weekend or month ("earlier this week", "this weekend", "this month"), seasons ("last
  summer", "this past winter"), vague spans ("a few weeks ago", "a few months ago"), "back" for "ago" ("a
  couple of weekends back"), "the week / weekend before last", "a fortnight ago", short weekdays ("last fri");
- "since we last talked": from the conversation's previous said time (``previous``) to now;
- absolute dates written out ("on 8 May, 2023", "in January 2022"), through :func:`find_window`.

A cheap pre-filter (one regex of the trigger words) skips the text that names no time at all (most of
it), and resolutions are cached by (expression, day said), so ingest stays at thousands of items a
second. Rules are used rather than ``dateparser`` (1.5): measured here it finds no phrase inside a sentence by
itself (``search_dates`` is slower still), returns None for "last weekend", "two weekends ago", "the week
before last", "this past Friday", "back in March", "a few days ago", "this past Christmas", "over Easter"
and "on Labor Day", and costs about 1 ms a phrase (165 ms the first); with ``RETURN_TIME_AS_PERIOD`` it
does give a granularity for what it parses ("last month" is a month), the spans the rules build directly.
"""

from __future__ import annotations

import calendar
import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from aleph_memory._holidays import HOLIDAY, ON_MONDAY, holiday_date, holiday_key
from aleph_memory._when import find_window

__all__ = ["Event", "events_in", "mentions_last_talk", "resolve_events", "told_elsewhere", "window_holds"]

DAY = timedelta(days=1)
MAX_EVENTS = 4
"""At most this many intervals are stored for one item (a long text naming many times is rare)."""

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "a couple of": 2,
    "couple of": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_N = r"(\d{1,2}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAYS.update({"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5})
_WD = "(" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")\.?"
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MO = "(" + "|".join(_MONTHS) + ")"
_HOLIDAY = f"({HOLIDAY})"
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_SEASON = "(spring|summer|fall|autumn|winter)"
_SINCE_LAST = re.compile(
    r"\bsince (?:we|i) (?:last )?(?:talked|spoke|chatted|caught up|saw each other)"
    r"|\bsince (?:we|i) (?:talked|spoke|chatted) last|\bsince (?:our|the|my) last (?:chat|talk|conversation|catch-up)",
    re.I,
)
_PREFILTER = re.compile(
    r"\b(?:yesterday|today|tonight|this (?:morning|afternoon|evening|week|weekend|month)|last|ago|back|next"
    r"|other day|past|weekend|fortnight|since|(?:19|20)\d\d|"
    + _SEASON[1:-1]
    + "|"
    + _WD[1:-4]
    + "|"
    + _MO[1:-1]
    + "|"
    + HOLIDAY
    + r")\b",
    re.I,
)
"""Text without any of these words names no time the rules below can resolve: skipped at once."""

_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("day_before_yesterday", re.compile(r"\bthe day before yesterday\b", re.I)),
    ("yesterday", re.compile(r"\b(?:yesterday|last night)\b", re.I)),
    ("today", re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I)),
    ("few_days", re.compile(r"\b(?:a few days (?:ago|back)|the other day|a couple days ago)\b", re.I)),
    ("days_ago", re.compile(rf"\b{_N} days? (?:ago|back)\b", re.I)),
    ("weekends_ago", re.compile(rf"\b(?:{_N} weekends? (?:ago|back)|the weekend before last)\b", re.I)),
    ("last_weekend", re.compile(r"\b(?:last|this past|past|over the) weekend\b", re.I)),
    ("this_weekend", re.compile(r"\bthis weekend\b", re.I)),
    ("few_weeks", re.compile(r"\ba few weeks (?:ago|back)\b", re.I)),
    ("weeks_ago", re.compile(rf"\b(?:{_N} weeks? (?:ago|back)|the week before last|a fortnight ago)\b", re.I)),
    ("last_week", re.compile(r"\b(?:last|this past|past) week\b", re.I)),
    ("this_week", re.compile(r"\b(?:earlier )?this week\b", re.I)),
    ("next_week", re.compile(r"\bnext week\b", re.I)),
    ("few_months", re.compile(r"\ba few months (?:ago|back)\b", re.I)),
    ("months_ago", re.compile(rf"\b{_N} months? (?:ago|back)\b", re.I)),
    ("this_month", re.compile(r"\b(?:earlier )?this month\b", re.I)),
    ("last_month", re.compile(r"\blast month\b", re.I)),
    ("next_month", re.compile(r"\bnext month\b", re.I)),
    ("years_ago", re.compile(rf"\b{_N} years? (?:ago|back)\b", re.I)),
    ("season", re.compile(rf"\b(?:last|this past|past|this|in the|over the|during the) {_SEASON}\b", re.I)),
    ("since_last", _SINCE_LAST),
    ("last_year", re.compile(r"\blast year\b", re.I)),
    ("next_weekday", re.compile(rf"\b(?:next|this coming) {_WD}\b", re.I)),
    ("last_weekday", re.compile(rf"\b(?:last|this past|past|on|on the) {_WD}\b", re.I)),
    ("holiday", re.compile(rf"\b(?:(?:this )?past |last |on |at |over |for |during )?{_HOLIDAY}\b", re.I)),
    ("last_month_name", re.compile(rf"\b(?:last|this past|in|during|back in) {_MO}\b(?!,?\s*\d)", re.I)),
]
_CONFIDENCE = {
    "day_before_yesterday": 0.9,
    "yesterday": 0.9,
    "today": 0.6,
    "few_days": 0.4,
    "this_weekend": 0.5,
    "few_weeks": 0.4,
    "this_week": 0.5,
    "few_months": 0.3,
    "this_month": 0.4,
    "season": 0.4,
    "since_last": 0.4,
    "days_ago": 0.8,
    "weekends_ago": 0.7,
    "last_weekend": 0.8,
    "weeks_ago": 0.6,
    "last_week": 0.7,
    "next_week": 0.5,
    "months_ago": 0.6,
    "last_month": 0.7,
    "next_month": 0.5,
    "years_ago": 0.6,
    "last_year": 0.7,
    "next_weekday": 0.6,
    "last_weekday": 0.6,
    "holiday": 0.7,
    "last_month_name": 0.6,
    "absolute": 0.9,
}


@dataclass(frozen=True, slots=True)
class Event:
    """A resolved time an item tells of: ``[start, end)`` in epoch ms, how sure, and the words that said it."""

    start: int
    end: int
    confidence: float
    said: str


def mentions_last_talk(text: str) -> bool:
    """Whether ``text`` tells of the time since the speakers last talked (resolving it needs ``previous``)."""
    return _SINCE_LAST.search(text) is not None


def resolve_events(text: str, said_at: int, previous: int | None = None) -> list[Event]:
    """The times ``text`` names, resolved against ``said_at`` (epoch ms, when it was said), best first.

    ``previous`` (epoch ms) is when the conversation was last had before this one: "since we last talked"
    is the span from then to now (without it, the phrase resolves to nothing).
    """
    if not _PREFILTER.search(text):
        return []
    day = datetime.fromtimestamp(said_at / 1000, UTC).date()
    out: list[Event] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _RULES:
        for match in pattern.finditer(text):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue  # "the day before yesterday" is not also "yesterday"
            if kind == "since_last":
                span = None
                if previous is not None and previous < said_at:
                    since = datetime.fromtimestamp(previous / 1000, UTC).date()
                    span = (since, day + DAY) if (day - since).days <= 365 else None
            else:
                span = _resolve(kind, match.group(0).lower(), day)
            if span is not None:
                taken.append((match.start(), match.end()))
                out.append(Event(_ms(span[0]), _ms(span[1]), _CONFIDENCE[kind], match.group(0)))
    absolute = find_window(text)
    if absolute is not None and len(absolute.ranges) == 1:
        start, end = absolute.ranges[0]
        out.append(Event(start, end, _CONFIDENCE["absolute"], absolute.text))
    out.sort(key=lambda e: -e.confidence)
    return out[:MAX_EVENTS]


def events_in(
    conn: sqlite3.Connection, agent: str, ranges: tuple[tuple[int, int], ...], limit: int, slack: int = 0
) -> dict[int, float]:
    """The items of ``agent`` whose event time overlaps one of ``ranges``, with how surely it lies there.

    That is the event's confidence times its specificity: a span no longer than the range counts fully,
    a longer one ("last summer" for a question about one day) by the share of it the range can be. ``slack``
    (ms) is how much each range was widened on both sides for said time (a session late at night); event
    time resolved from words needs none, so an event that touches only the widening counts half.
    """
    out: dict[int, float] = {}
    for start, end in ranges:
        # An event is at most a year long: its start lies within a year before the range's end.
        for rowid, confidence, e_start, e_end in conn.execute(
            "SELECT rowid, confidence, start, end FROM item_events WHERE agent = ? AND start >= ? AND start < ?"
            " AND end > ? ORDER BY confidence DESC LIMIT ?",
            (agent, start - MAX_SPAN, end, start, limit),
        ):
            low, high = (start + slack, end - slack) if end - start > 2 * slack else (start, end)
            value = confidence * min(1.0, (high - low) / max(1, e_end - e_start))
            if not (e_start < high and low < e_end):
                value *= 0.5
            out[rowid] = max(out.get(rowid, 0.0), value)
    return out


def told_elsewhere(conn: sqlite3.Connection, rowids: list[int], ranges: tuple[tuple[int, int], ...]) -> set[int]:
    """Those of ``rowids`` (said inside ``ranges``) whose own words put what they tell of outside every range.

    "Two months ago I was in Denver", said on the day a question asks about, is not what happened that day:
    event time comes first, said time only stands in for it when the words name no time.
    """
    told: set[int] = set()
    inside: set[int] = set()
    for at in range(0, len(rowids), 500):
        chunk = rowids[at : at + 500]
        marks = ",".join("?" * len(chunk))
        for rowid, start, end in conn.execute(
            f"SELECT rowid, start, end FROM item_events WHERE rowid IN ({marks})", chunk
        ):
            told.add(rowid)
            if any(start < high and low < end for low, high in ranges):
                inside.add(rowid)
    return told - inside


def window_holds(conn: sqlite3.Connection, agent: str, ranges: tuple[tuple[int, int], ...]) -> bool:
    """Whether any item of ``agent`` was said, or tells of something that happened, inside ``ranges``."""
    for start, end in ranges:
        said = conn.execute(
            "SELECT 1 FROM items WHERE agent = ? AND occurred_at >= ? AND occurred_at < ? LIMIT 1", (agent, start, end)
        ).fetchone()
        if said is not None or events_in(conn, agent, ((start, end),), 1):
            return True
    return False


MAX_SPAN = 366 * 86_400_000
"""The longest interval a rule resolves to (a year), in ms: bounds the index range an overlap query scans."""


def _ms(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp() * 1000)


def _number(words: str) -> int:
    words = words.strip()
    return int(words) if words.isdigit() else _NUMBERS.get(words, 1)


def _month_start(year: int, month: int) -> date:
    year += (month - 1) // 12
    return date(year, (month - 1) % 12 + 1, 1)


@lru_cache(maxsize=65_536)
def _resolve(kind: str, said: str, day: date) -> tuple[date, date] | None:
    """The day range ``said`` (one rule's match, lower case) means when said on ``day``; None if it means none."""
    monday = day - timedelta(days=day.weekday())
    if kind == "day_before_yesterday":
        return day - 2 * DAY, day - DAY
    if kind == "yesterday":
        return day - DAY, day
    if kind == "today":
        return day, day + DAY
    if kind == "few_days":
        return day - 7 * DAY, day
    if kind == "this_week":
        return monday, day + DAY
    if kind == "this_weekend":
        # Said on Friday to Sunday, the weekend it is; earlier in the week, the coming one (a plan).
        saturday = monday + 5 * DAY
        return saturday, saturday + 2 * DAY
    if kind == "few_weeks":
        return monday - 4 * 7 * DAY, monday - 7 * DAY
    if kind == "this_month":
        return day.replace(day=1), day + DAY
    if kind == "few_months":
        return _month_start(day.year, day.month - 4), _month_start(day.year, day.month - 1)
    if kind == "season":
        return _season(said, day)
    if kind == "days_ago":
        n = _number(said.rsplit(" ", 2)[0])
        return day - n * DAY, day - (n - 1) * DAY
    if kind in ("weekends_ago", "last_weekend"):
        n = 1 if kind == "last_weekend" else 2 if said.endswith("last") else _number(said.rsplit(" ", 2)[0])
        # The latest weekend that is over (said on a Sunday, "last weekend" is the one before).
        saturday = day - timedelta(days=(day.weekday() - 5) % 7 or 7)
        saturday -= timedelta(weeks=n - 1)
        return saturday, saturday + 2 * DAY
    if kind == "weeks_ago":
        n = 2 if said.endswith("last") or "fortnight" in said else _number(said.rsplit(" ", 2)[0])
        start = monday - timedelta(weeks=n)
        return start, start + 7 * DAY
    if kind == "last_week":
        return monday - 7 * DAY, monday
    if kind == "next_week":
        return monday + 7 * DAY, monday + 14 * DAY
    if kind in ("months_ago", "last_month", "next_month"):
        shift = {"last_month": -1, "next_month": 1}.get(kind) or -_number(said.rsplit(" ", 2)[0])
        start = _month_start(day.year, day.month + shift)
        return start, _month_start(start.year, start.month + 1)
    if kind in ("years_ago", "last_year"):
        year = day.year - (1 if kind == "last_year" else _number(said.rsplit(" ", 2)[0]))
        return (date(year, 1, 1), date(year + 1, 1, 1)) if year >= 1 else None
    if kind == "next_weekday":
        target = _WEEKDAYS[said.rsplit(" ", 1)[1].rstrip(".")]
        ahead = (target - day.weekday()) % 7 or 7
        return day + ahead * DAY, day + (ahead + 1) * DAY
    if kind == "last_weekday":
        target = _WEEKDAYS[said.rsplit(" ", 1)[1].rstrip(".")]
        back = (day.weekday() - target) % 7 or 7
        return day - back * DAY, day - (back - 1) * DAY
    if kind == "holiday":
        return _holiday(said, day)
    if kind == "last_month_name":
        month = _MONTHS[said.rsplit(" ", 1)[1]]
        # The latest such month that has begun ("last March" said in March is a year ago).
        year = day.year if month < day.month or (month == day.month and not said.startswith("last")) else day.year - 1
        start = date(year, month, 1)
        return start, _month_start(year, month + 1)
    return None


def _holiday(said: str, day: date) -> tuple[date, date] | None:
    """The latest occurrence of the holiday ``said`` names on or before ``day``, with a day or two around it."""
    match = re.search(HOLIDAY, said, re.I)
    key = holiday_key(match.group(0)) if match is not None else None
    if key is None:
        return None
    when = holiday_date(key, day.year)
    if when is None or when > day:
        when = holiday_date(key, day.year - 1)
    if when is None:
        return None
    if key in ON_MONDAY:
        return when - 2 * DAY, when + DAY  # its long weekend
    return when - DAY, when + 2 * DAY


def _season(said: str, day: date) -> tuple[date, date]:
    """The season ``said`` names (meteorological, northern): "last" / "this past" the latest one over, else this one."""
    name = said.rsplit(" ", 1)[1]
    month = _SEASONS[name]
    start = date(day.year, month, 1)
    if said.startswith("this ") and not said.startswith("this past"):
        # "this summer" is this year's, past, present or planned; "this winter" in January began in December.
        if month == 12 and day.month <= 2:
            start = date(day.year - 1, 12, 1)
        return start, _month_start(start.year, start.month + 3)
    if start > day:
        start = date(day.year - 1, month, 1)
    end = _month_start(start.year, start.month + 3)
    if said.startswith(("last", "this past", "past")) and end > day:
        start = date(start.year - 1, month, 1)
        end = _month_start(start.year, start.month + 3)
    return start, end
