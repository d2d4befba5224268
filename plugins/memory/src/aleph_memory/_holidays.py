"""Holidays named in a turn or a question, and their date in a given year.

"This past Christmas", "over Labor Day weekend", "at Easter", "What did Maya do on Thanksgiving 2022?": the
fixed ones are a month and a day; the moving ones (Thanksgiving, Labor Day, Memorial Day, MLK Day, ...) come
from the ``holidays`` package's United States calendar, Easter and Good Friday from ``dateutil.easter``, and
Mother's and Father's Day (observances, not public holidays, so in neither) from their rule. ``holidays`` is
imported on first use (about 60 ms) and each year's calendar is built once.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from functools import lru_cache

__all__ = ["HOLIDAY", "ON_MONDAY", "holiday_date", "holiday_key"]

_NAMES: list[tuple[str, str]] = [
    # (pattern, key); longer names first so "christmas eve" is not read as "christmas".
    (r"christmas eve", "christmas eve"),
    (r"christmas(?: day| morning)?|xmas", "christmas"),
    (r"boxing day", "boxing day"),
    (r"new year'?s eve|nye", "new year's eve"),
    (r"new year'?s(?: day)?", "new year's day"),
    (r"halloween", "halloween"),
    (r"valentine'?s(?: day)?", "valentine's day"),
    (r"st\.? patrick'?s day|saint patrick'?s day", "st patrick's day"),
    (r"(?:the )?fourth of july|4th of july|independence day", "Independence Day"),
    (r"thanksgiving(?: day)?", "Thanksgiving Day"),
    (r"labou?r day", "Labor Day"),
    (r"memorial day", "Memorial Day"),
    (r"mlk day|martin luther king(?: jr\.?)? day", "Martin Luther King Jr. Day"),
    (r"presidents'? day", "Washington's Birthday"),
    (r"juneteenth", "Juneteenth National Independence Day"),
    (r"veterans'? day", "Veterans Day"),
    (r"columbus day", "Columbus Day"),
    (r"good friday", "good friday"),
    (r"easter(?: sunday| weekend)?", "easter"),
    (r"mother'?s day", "mother's day"),
    (r"father'?s day", "father's day"),
]
HOLIDAY = "(?:" + "|".join(p for p, _ in _NAMES) + ")"
"""A regular expression (no groups) matching any holiday name this module knows."""
ON_MONDAY = frozenset(
    {"Labor Day", "Memorial Day", "Martin Luther King Jr. Day", "Washington's Birthday", "Columbus Day"}
)
"""The holidays that are always a Monday: "over Labor Day" is their long weekend."""
_KEYS = [(re.compile(rf"^(?:{p})$", re.I), key) for p, key in _NAMES]
_FIXED = {
    "christmas eve": (12, 24),
    "christmas": (12, 25),
    "boxing day": (12, 26),
    "new year's eve": (12, 31),
    "new year's day": (1, 1),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
    "st patrick's day": (3, 17),
}


def holiday_key(name: str) -> str | None:
    """The canonical key of a holiday name as matched by :data:`HOLIDAY` (any case), or None."""
    name = " ".join(name.lower().replace("\u2019", "'").split())
    for pattern, key in _KEYS:
        if pattern.match(name):
            return key
    return None


def holiday_date(key: str, year: int) -> date | None:
    """The date of holiday ``key`` (see :func:`holiday_key`) in ``year``, or None if it has none that year."""
    if not 1 <= year <= 9999:
        return None
    if key in _FIXED:
        month, day = _FIXED[key]
        return date(year, month, day)
    if key in ("easter", "good friday"):
        from dateutil.easter import easter

        sunday: date = easter(year)
        return sunday - timedelta(days=2) if key == "good friday" else sunday
    if key in ("mother's day", "father's day"):
        # The second Sunday of May, the third Sunday of June.
        month, nth = (5, 2) if key == "mother's day" else (6, 3)
        first = date(year, month, 1)
        return first + timedelta(days=(6 - first.weekday()) % 7 + 7 * (nth - 1))
    return _united_states(year).get(key)


@lru_cache(maxsize=256)
def _united_states(year: int) -> dict[str, date]:
    import holidays

    calendar = holidays.country_holidays("US", years=year, observed=False)
    return {name: day for day, name in calendar.items()}
