"""Answer sets: a question that needs several pieces of evidence gets distinct events, not one event's neighbours.

"How many times did she hike the ridge?", "Which races has he run?", "What did they both do at
Christmas?" are answered by turns spread over sessions. A plain ranking fills the top of the list with
the best hit's session (its neighbours share its words and its session bonus), so the second piece of
evidence falls below the cut. For such questions the top of the ranking is re-picked greedily: each
item's score is discounted for every item of its session already picked, so the list covers the
sessions (the events) that match before it repeats one.

A question about what two people *both* did or have in common ("Which city have both Maya and Leo been to?")
needs one turn of each: there the re-picking takes the speakers in turn (the best item of whoever has had
fewest picks), so the best turns of the second person are not pushed out by the first person's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["asks_about_both", "asks_for_a_set", "diversify"]

SAME_SESSION_DECAY = 0.8
"""Each item already picked from a session multiplies the next one's score by this."""
POOL = 5
"""The re-picking looks at this many times the limit of the best items."""

_ASKS_SET = re.compile(
    r"\b(?:how many|how often|both|which (?:ones?|\w+s)|what (?:are|were) (?:some|the)|every|all the|list"
    r"|\w+ times|what \w+s (?:has|have|did|does|do))\b",
    re.I,
)


_ASKS_BOTH = re.compile(r"\b(?:both|in common)\b", re.I)


def asks_about_both(question: str) -> bool:
    """Whether ``question`` asks what several people share ("both", "in common"): evidence from each of them."""
    return _ASKS_BOTH.search(question) is not None


def asks_for_a_set(question: str) -> bool:
    """Whether ``question`` needs several pieces of evidence (a count, "both", "which ones", "every")."""
    return _ASKS_SET.search(question) is not None


def diversify(
    ranked: list[int],
    scores: Mapping[int, float],
    sessions: Mapping[int, str | None],
    limit: int,
    speakers: Mapping[int, str | None] | None = None,
) -> list[int]:
    """The ``limit`` items of ``ranked`` (best first) re-picked to spread over sessions (see module doc).

    With ``speakers`` (the person of each item, for a "both" question) the speakers are taken in turn.
    """
    pool = ranked[: max(limit, POOL * limit)]
    picked: list[int] = []
    count: dict[str, int] = {}
    said: dict[str | None, int] = {}
    speakers = speakers or None
    left = list(pool)
    while left and len(picked) < limit:

        def value(rowid: int) -> float:
            s = sessions.get(rowid)
            return scores[rowid] * SAME_SESSION_DECAY ** count.get(s, 0) if s is not None else scores[rowid]

        turn = left
        named = [said.get(speakers.get(r), 0) for r in left if speakers.get(r) is not None] if speakers else []
        if speakers is not None and named:
            # The person picked least so far goes next (ties: the one with the better item); items of
            # nobody named stay eligible.
            fewest = min(named)
            turn = [r for r in left if speakers.get(r) is None or said.get(speakers.get(r), 0) == fewest]
        best = max(turn, key=lambda r: (value(r), -left.index(r)))
        left.remove(best)
        picked.append(best)
        s = sessions.get(best)
        if s is not None:
            count[s] = count.get(s, 0) + 1
        if speakers is not None:
            who = speakers.get(best)
            said[who] = said.get(who, 0) + 1
    return picked
