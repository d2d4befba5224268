"""Tool-name repair and "did you mean" suggestions (edit distances from rapidfuzz, bounded by a cut-off).

``repair_tool_name`` maps a name a model emitted onto one offered tool, or gives
up when the match is ambiguous: exact → case → separator → unique fuzzy.
``suggest_candidates`` ranks names for an error message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from rapidfuzz.distance import Levenshtein

__all__ = ["repair_tool_name", "suggest_candidates"]

RepairTier = Literal["exact", "case", "separator", "fuzzy"]


def _encodable(name: str) -> bool:
    """Whether ``name`` is text at all: a lone surrogate (U+DCFF alone) cannot name an offered tool."""
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def _unique(matches: list[str]) -> str | None:
    return matches[0] if len(matches) == 1 else None


def repair_tool_name(emitted: str, offered: Sequence[str]) -> tuple[str, RepairTier] | None:
    """The single offered name ``emitted`` most plausibly means, with the tier that matched.

    Any ambiguity returns None, so the caller reports "not found" instead of guessing.
    """
    if not emitted or not _encodable(emitted):
        return None
    if emitted in offered:
        return emitted, "exact"
    lowered = emitted.lower()
    hit = _unique([name for name in offered if name.lower() == lowered])
    if hit:
        return hit, "case"
    if "." in emitted or "_" in emitted:
        folded = lowered.replace(".", "_")
        hit = _unique([name for name in offered if name.lower().replace(".", "_") == folded])
        if hit:
            return hit, "separator"
    if len(lowered.encode()) < 3:
        return None
    threshold = 1 if len(lowered) <= 6 else 2
    best: list[str] = []
    best_distance = threshold + 1
    for name in offered:
        distance = Levenshtein.distance(lowered, name.lower(), score_cutoff=threshold)
        if distance < best_distance:
            best, best_distance = [name], distance
        elif distance == best_distance and distance <= threshold:
            best.append(name)
    if best_distance <= threshold and len(best) == 1:
        return best[0], "fuzzy"
    return None


def suggest_candidates(emitted: str, offered: Iterable[str], limit: int = 5) -> list[str]:
    """Up to ``limit`` offered names close to ``emitted``, best first (case fold, substring, edit distance)."""
    names = list(offered)
    if not emitted or not names or limit <= 0 or not _encodable(emitted):
        return []
    needle = emitted.lower()
    bound = 1 if len(needle.encode()) < 3 else 3
    scored: list[tuple[int, str]] = []
    for name in names:
        hay = name.lower()
        if hay == needle:
            score = 0
        elif len(needle) >= 3 and len(hay) >= 3 and (needle in hay or hay in needle):
            score = 1
        else:
            distance = Levenshtein.distance(needle, hay, score_cutoff=bound)
            if distance > bound:
                continue
            score = 1 + distance
        scored.append((score, name))
    scored.sort()
    return [name for _, name in scored[:limit]]
