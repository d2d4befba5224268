"""Dates named in a query ("on 8 May, 2023", "in 2024", "in June", "on Labor Day 2021") as a time window.

Also seasons of a year ("in the summer of 2022") and holidays without a year ("for Thanksgiving").

Memory items carry when they happened (``occurred_at``: a turn's session date, a fact's time of
writing). A question that names a date asks about what happened then, so the ranker prefers items
inside the window; the date's words are dropped from the full-text query, where they only match
other dates. A month named without a year ("camping in June") is that month of each year the
store's items span (at most MAX_YEARS, the latest); so is a holiday named without a year.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from aleph_memory._holidays import HOLIDAY, holiday_date, holiday_key

__all__ = ["Window", "find_window"]

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
# The name ends at a word's end: "of Maria's" is not March, "in Augusta" not August, "by Decker" not December.
_M = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_SEASON = r"(spring|summer|fall|autumn|winter)"
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_PATTERNS = [
    ("day", re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_M},?\s*{_YEAR}\b", re.I), (1, 2, 3)),
    ("holiday", re.compile(rf"\b({HOLIDAY})(?:\s+of)?,?\s+{_YEAR}\b", re.I), (None, 1, 2)),
    ("season", re.compile(rf"\b(?:the\s+)?{_SEASON}(?:\s+of)?,?\s+{_YEAR}\b", re.I), (None, 1, 2)),
    ("day", re.compile(rf"\b{_M}\s+{_DAY},?\s*{_YEAR}\b", re.I), (2, 1, 3)),
    ("month", re.compile(rf"\b{_M}(?:\s+of)?,?\s+{_YEAR}\b", re.I), (None, 1, 2)),
    ("year", re.compile(rf"\b(?:in|during|of|since|by)\s+{_YEAR}\b", re.I), (None, None, 1)),
    # A month without a year ("in June", "the second week of November"): that month of every year the store
    # holds. The preposition keeps "may" the verb out.
    (
        "any month",
        re.compile(rf"\b(?:in|during|of|early|late|mid|since|by|until)[\s-]+{_M}(?!\s*\d)", re.I),
        (None, 1, None),
    ),
    # A holiday without a year ("for Thanksgiving", "on Christmas Eve"): that day of every year the store holds.
    (
        "any holiday",
        re.compile(rf"\b(?:on|for|at|over|during|around|since|by|until)\s+({HOLIDAY})\b", re.I),
        (None, 1, None),
    ),
]
SLACK = timedelta(days=3)
"""A day or month named in a question is matched a little loosely (a session late at night, "last Friday")."""

_SLACK_MS = int(SLACK.total_seconds() * 1000)
SLACK_SHARE = 0.5
"""What was said in the slack around the dates named (not on them) counts for this share of the window's weight."""
MAX_YEARS = 50
"""A month named without a year spans at most this many years (the latest of the store's)."""


@dataclass(frozen=True, slots=True)
class Window:
    """When a query asks about: half-open ranges of epoch ms, and the words that said so."""

    ranges: tuple[tuple[int, int], ...]
    text: str
    bound: bool = False
    """An "as of" / "until" / "since" window: everything up to (or from) the date, not the date itself."""
    slack: int = 0
    """How far (ms) each range was widened on both sides beyond the date named (see SLACK)."""
    words: str = ""
    """Words of ``text`` that stay in the full-text query: a holiday's or a season's name is how a turn says it
    ("this past Christmas"), while the digits of a date written out rarely appear in what it dates."""

    def __contains__(self, at: int) -> bool:
        return any(start <= at < end for start, end in self.ranges)

    def exactly(self, at: int) -> bool:
        """Whether ``at`` lies in the dates named themselves, not only in the slack around them."""
        s = self.slack
        return any(start + s <= at < end - s for start, end in self.ranges if end - start > 2 * s) or not s

    def said_share(self, at: int) -> float:
        """How much a time said at ``at`` (inside the window) stands for the dates named: 1, or SLACK_SHARE.

        The slack is there for a session late at night; a turn said the day after the day asked is less
        surely about it than a turn whose words date what it tells to that very day.
        """
        return 1.0 if self.exactly(at) else SLACK_SHARE


_UNTIL = re.compile(r"\b(?:as of|until|till|up to|up until|before|by)\s+(?:the\s+end\s+of\s+)?$", re.I)
_SINCE = re.compile(r"\b(?:since|after)\s+$", re.I)
EPOCH_END = 2**53
"""The open end of a "since" window (epoch ms far beyond any date)."""


def find_window(text: str, years: tuple[int, int] | None = None) -> Window | None:
    """The first date ``text`` names, or None; "as of"/"until" and "since" before it make it a bound.

    ``years`` (first, last) is the span a month named without a year is looked for in; without it
    such a month is not a window. "between August 11 and August 15 2023", "from 3 to 9 May 2022" is
    one window from the first date's start to the second's end.
    """
    span = _find_span(text)
    if span is not None:
        return span
    window = _find_date(text, years)
    if window is None or len(window.ranges) != 1:
        return window
    at = text.lower().find(window.text.lower())
    before = text[:at]
    first = window.text.split(None, 1)[0].lower()
    start, end = window.ranges[0]
    if _UNTIL.search(before) or first == "by":
        return Window(((0, end),), window.text, bound=True, words=window.words)
    if _SINCE.search(before) or first == "since":
        return Window(((start, EPOCH_END),), window.text, bound=True, words=window.words)
    return window


def _find_date(text: str, years: tuple[int, int] | None) -> Window | None:
    for kind, pattern, groups in _PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        day_g, month_g, year_g = groups
        if kind == "any holiday":
            if years is None:
                continue
            key = holiday_key(match.group(1))
            first, last = max(years[0], years[1] - MAX_YEARS + 1), years[1]
            days = [d for y in range(first, last + 1) if key and (d := holiday_date(key, y)) is not None]
            if not days:
                continue
            ranges = tuple(_around(d, d + timedelta(days=1)) for d in days)
            return Window(ranges, match.group(0), slack=_SLACK_MS, words=match.group(1))
        if kind == "any month":
            if years is None:
                continue
            assert month_g is not None
            month = _MONTHS[match.group(month_g).lower()]
            first, last = max(years[0], years[1] - MAX_YEARS + 1), years[1]
            ranges = []
            for year in range(first, last + 1):
                start = datetime(year, month, 1, tzinfo=UTC)
                end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
                ranges.append((int((start - SLACK).timestamp() * 1000), int((end + SLACK).timestamp() * 1000)))
            return Window(tuple(ranges), match.group(0), slack=_SLACK_MS)
        assert year_g is not None
        year = int(match.group(year_g))
        try:
            if kind == "holiday":
                key = holiday_key(match.group(1))
                day = holiday_date(key, year) if key else None
                if day is None:
                    continue
                return Window(
                    (_around(day, day + timedelta(days=1)),), match.group(0), slack=_SLACK_MS, words=match.group(1)
                )
            if kind == "season":
                month = _SEASONS[match.group(1).lower()]
                first_day = date(year, month, 1)
                end_day = date(year + (month + 3 > 12), (month + 2) % 12 + 1, 1)
                return Window((_around(first_day, end_day),), match.group(0), slack=_SLACK_MS, words=match.group(1))
            if kind == "day":
                assert day_g is not None and month_g is not None
                month = _MONTHS[match.group(month_g).lower()]
                start = datetime(year, month, int(match.group(day_g)), tzinfo=UTC)
                end = start + timedelta(days=1)
            elif kind == "month":
                assert month_g is not None
                month = _MONTHS[match.group(month_g).lower()]
                start = datetime(year, month, 1, tzinfo=UTC)
                end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
            else:
                start, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        except ValueError:
            continue
        slack = SLACK if kind != "year" else timedelta(0)
        return Window(
            ((int((start - slack).timestamp() * 1000), int((end + slack).timestamp() * 1000)),),
            match.group(0),
            slack=int(slack.total_seconds() * 1000),
        )
    return None


_SPAN = re.compile(
    rf"\b(?:between|from)\s+((?:{_M}\s+)?{_DAY}(?:\s+(?:of\s+)?{_M})?(?:,?\s*{_YEAR})?)"
    rf"\s*(?:and|to|until|till|through|-|\u2013)\s*((?:{_M}\s+)?{_DAY}(?:\s+(?:of\s+)?{_M})?,?\s*{_YEAR})\b",
    re.I,
)
MAX_SPAN_DAYS = 366
"""A range longer than this ("between 2 May 2020 and 9 May 2023") is too loose to narrow anything: not a window."""


def _find_span(text: str) -> Window | None:
    """A range of days the question names ("between August 11 and August 15 2023"), or None.

    The first date may leave out its year and the second its month; each takes the other's.
    """
    match = _SPAN.search(text)
    if match is None:
        return None
    first, second = match.group(1), match.group(6)
    month_a = match.group(2) or match.group(4)
    month_b = match.group(7) or match.group(9)
    if month_a is None and month_b is None:
        return None
    year = match.group(10)
    if month_a is None:
        first = f"{first} {month_b}"
    if match.group(5) is None:
        first = f"{first} {year}"
    if month_b is None:
        second = f"{month_a} {second}"
    low, high = _find_date(first, None), _find_date(second, None)
    if low is None or high is None or len(low.ranges) != 1 or len(high.ranges) != 1:
        return None
    start, end = low.ranges[0][0], high.ranges[0][1]
    if not 0 < end - start <= MAX_SPAN_DAYS * 86_400_000:
        return None
    return Window(((start, end),), match.group(0), slack=low.slack)


def _around(start: date, end: date) -> tuple[int, int]:
    """``[start, end)`` in epoch ms, widened by SLACK on both sides."""
    low = datetime(start.year, start.month, start.day, tzinfo=UTC) - SLACK
    high = datetime(end.year, end.month, end.day, tzinfo=UTC) + SLACK
    return int(low.timestamp() * 1000), int(high.timestamp() * 1000)
