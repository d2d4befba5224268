"""Answer sets: a question that needs several pieces of evidence gets distinct events, not one event's neighbours.

"How many times did she hike the ridge?", "Which races has he run?", "What did they both do at
Christmas?" are answered by turns spread over sessions. A plain ranking fills the top of the list with
the best hit's session (its neighbours share its words and its session bonus), so the second piece of
evidence falls below the cut. For such questions the ranking's best items (KEEP, 7 of 10) stay where they are and
the rest of the list goes to the best items of sessions it has not reached yet (other events), from
the best POOL × limit. Keeping the head matters: concentration is what finds the first answer (a
discount on every repeat of a session, 0.5-0.1 a repeat, lost 10-19 questions' "all evidence" on
LoCoMo's dev split), while the tail of a plain top 10 is mostly the first hit's neighbours. With vectors, a set
question without a date or bound orders those new sessions by meaning instead (``_answervecs.by_meaning``).

A question asks for a set when it counts ("how many", "how often", "every"), lists ("which ones",
"what books has she read"), or asks what someone *has done* over time ("What has Melanie painted?",
"Where has she camped?": the present perfect gathers several occasions).

A question about what two people *both* did or have in common ("Which city have both Maya and Leo been to?")
needs one turn of each: there the re-picking takes the speakers in turn (the best item of whoever has had
fewest picks), so the best turns of the second person are not pushed out by the first person's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["asks_about_both", "asks_for_a_set", "distinct_events", "diversify", "filled_from"]

SAME_SESSION_DECAY = 0.8
"""Each item already picked from a session multiplies the next one's score by this."""
POOL = 5
"""The re-picking looks at this many times the limit of the best items."""
KEEP = 0.7
"""A set question's list keeps this share of the ranking's best (7 of 10); the rest goes to other sessions."""

_ASKS_SET = re.compile(
    r"\b(?:how many|how often|both|which (?:ones?|\w+s)|what (?:are|were) (?:some|the)|every|all the|list"
    r"|\w+ times|what \w+s (?:has|have|did|does|do))\b",
    re.I,
)


_HAS_DONE = re.compile(
    r"\b(?:what|where|which)\b[^?]{0,60}?\b(?:has|have)\s+(?:\w+\s+){1,3}?(?:\w+ed|been|done|made|seen|read|met|taken"
    r"|gone|won|run|had|bought|written|given|eaten|visited)\b",
    re.I,
)
"""What someone has done over time ("What has Melanie painted?", "Where has she camped?"): several occasions.

The question word and the verb are at most 60 characters apart (one clause; it also bounds the regex's work
on a long query)."""

_ASKS_BOTH = re.compile(r"\b(?:both|in common)\b", re.I)


def asks_about_both(question: str) -> bool:
    """Whether ``question`` asks what several people share ("both", "in common"): evidence from each of them."""
    return _ASKS_BOTH.search(question) is not None


def asks_for_a_set(question: str) -> bool:
    """Whether ``question`` needs several pieces of evidence (a count, "both", "which ones", "every")."""
    return _ASKS_SET.search(question) is not None or _HAS_DONE.search(question) is not None


def distinct_events(ranked: list[int], sessions: Mapping[int, str | None], limit: int) -> list[int]:
    """The ``limit`` first items of ``ranked``: its best (a KEEP share), then the best of each session not yet listed.

    ``sessions`` holds the session of each item that may fill the tail (None: it may not). For a question
    naming one person the ranker passes only that person's items' sessions: on LoCoMo's dev split 96% of
    the evidence of such questions is that person's own turns. When the pool (the best POOL × limit of
    ``ranked``) has no new session left, the list goes on in ranking order.
    """
    picked = list(ranked[: max(1, int(limit * KEEP))])
    seen = {sessions.get(r) for r in picked}
    for rowid in ranked[len(picked) : POOL * limit]:
        if len(picked) >= limit:
            break
        session = sessions.get(rowid)
        if session is not None and session not in seen:
            picked.append(rowid)
            seen.add(session)
    return filled_from(ranked, picked, limit)


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


def filled_from(ranked: list[int], picked: list[int], limit: int) -> list[int]:
    """``picked``, then the best of ``ranked`` not in it, up to ``limit`` items (``picked`` is extended)."""
    chosen = set(picked)
    for rowid in ranked:
        if len(picked) >= limit:
            break
        if rowid not in chosen:
            picked.append(rowid)
            chosen.add(rowid)
    return picked
