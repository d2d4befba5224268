"""Answer sets by meaning: a set question's last places go to the sessions that tell the same kind of event.

A question that needs several pieces of evidence ("How many times did Ann go fishing?", "Which books has she
read?") is answered by turns of several sessions, and the second and third of them rarely repeat the question's
words ("caught a rainbow trout at the lake", "spent the morning with a rod out on the pier"). The lexical answer
set (``_answers.distinct_events``) gives the tail to new sessions in ranking order. With vectors the order of
those sessions is chosen by meaning:

- the list keeps the ranking's best (``KEEP`` of the limit: concentration finds the first answer);
- every session not listed yet is a candidate through its best-ranked item among the ranking's best ``POOL``
  (the item is the ranking's choice: by meaning alone a session's small talk about the same topic, "since my
  first tournament", beat its evidence, "I just won another regional tournament");
- the candidates are ordered by their score over the best + ``QUERY_WEIGHT`` x their scaled similarity to the
  question + ``SEED_WEIGHT`` x their best cosine to the own vectors of the list's first ``SEEDS`` items (the
  event told, not the question's words), and the best of them fill the remaining places.

The ranker uses it for set questions without a date or a bound: the seeds' similarity knows nothing of when
something happened, and a dated count ("as of June 2023") is the lexical ranking's (see docs/memory.md,
"Fifth round"). The extra cost is a product of at most ``POOL`` rows with ``SEEDS`` vectors, for those questions
only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aleph_memory._answers import KEEP, filled_from
from aleph_memory._providers import _numpy

__all__ = ["by_meaning"]

POOL = 100
"""The ranking's best items that may fill the tail."""
SEEDS = 3
"""The list's first items whose own vectors stand for "the event told"."""
QUERY_WEIGHT = 0.5
SEED_WEIGHT = 0.5


def _unit_rows(index: Any, rowids: list[int]) -> Any:
    """The own vectors of ``rowids`` in ``index`` (a VectorIndex), unit length; zeros for an item without one yet."""
    np = _numpy()
    out = np.zeros((len(rowids), index.dim), dtype=np.float32)
    ids = index.rowids
    if not len(ids) or not rowids:
        return out
    wanted = np.asarray(rowids, dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    found = ids[at] == wanted
    out[found] = index.matrix[at[found]]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


def by_meaning(
    ranked: list[int],
    scores: Mapping[int, float],
    sessions: Mapping[int, str | None],
    limit: int,
    index: Any,
    similarity: Mapping[int, float],
) -> list[int]:
    """The ``limit`` first items of ``ranked``: its best (a KEEP share), then new sessions in order of meaning.

    ``scores``: the ranking's scores; ``sessions``: the session of each item that may fill the tail (None: it
    may not; for a question naming one person, only that person's items have one); ``index``: the agent's
    VectorIndex; ``similarity``: each item's scaled similarity to the question as the ranking took it. When no
    new session is left the list goes on in ranking order.
    """
    np = _numpy()
    picked = list(ranked[: max(1, int(limit * KEEP))])
    seen = {sessions.get(r) for r in picked}
    firsts: dict[str, int] = {}
    for rowid in ranked[len(picked) : POOL]:
        session = sessions.get(rowid)
        if session is not None and session not in seen:
            firsts.setdefault(session, rowid)
    pool = list(firsts.values())
    if pool and len(picked) < limit:
        vectors = _unit_rows(index, picked[:SEEDS] + pool)
        seeds, candidates = vectors[: min(SEEDS, len(picked))], vectors[min(SEEDS, len(picked)) :]
        top = scores[ranked[0]] or 1.0
        value = np.array([scores[r] / top + QUERY_WEIGHT * similarity.get(r, 0.0) for r in pool], dtype=np.float32)
        value += SEED_WEIGHT * (candidates @ seeds.T).max(axis=1)
        order = np.argsort(-value, kind="stable")
        picked += [pool[i] for i in order[: limit - len(picked)].tolist()]
    return filled_from(ranked, picked, limit)
