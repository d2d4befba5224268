"""Ranking memory for a query: full text first, then what the data model knows about each item.

1. **Candidates** come from FTS5 (porter stems, stopwords dropped) over each item's own text and,
   at a fifth of the weight, its neighbouring turns in the same session, confined to the agent.
2. **People.** A query that names a known speaker is about that person: the name is taken out of
   the lexical query (it matches every turn that greets them) and that speaker's items are preferred.
3. **Coverage.** Items whose text and neighbours cover more of the query's distinct stems rise: BM25
   alone lets one rare word outweigh a turn that answers the whole question.
4. **Sessions.** A session in which several items match is likelier to hold the answer than one
   stray match: each item gains a share of its session's summed top scores.
5. **Vectors** (when an embedder is configured): the nearest items join the candidates and every
   candidate's similarity, standardised over the candidates, is added.

The weights are fixed constants chosen as plain round numbers, not fitted to any benchmark.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aleph_memory._db import Database
from aleph_memory._items import Item, ItemStore, scope_token
from aleph_memory._providers import Embedder, VectorIndex, embed_normalised
from aleph_memory._text import fts_query, stem, terms

__all__ = ["Hit", "Ranker", "SearchResult"]

CANDIDATES = 300
CONTEXT_WEIGHT = 0.2
COVERAGE_WEIGHT = 0.4
SPEAKER_BOOST = 1.3
SESSION_WEIGHT = 0.3
SESSION_TOP = 5
DENSE_WEIGHT = 0.1
DENSE_CANDIDATES = 50
MAX_QUERY_TERMS = 64


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked item and its score."""

    item: Item
    score: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked hits, how they were ranked (``lexical`` or ``hybrid``) and why vectors were not used, if so."""

    hits: list[Hit]
    mode: str
    degraded: str | None = None
    people: tuple[str, ...] = ()


class Ranker:
    """Searches an :class:`ItemStore`, optionally with a vector index of one embedder."""

    def __init__(self, db: Database, items: ItemStore) -> None:
        self.db = db
        self.items = items
        self._speakers: dict[str, tuple[int, set[str]]] = {}
        self._vectors: VectorIndex | None = None

    # -- vectors ---------------------------------------------------------------------------------

    def vector_index(self, embedder: Embedder) -> VectorIndex:
        """The in-memory index of ``embedder``'s vectors, brought up to date."""
        if self._vectors is None or self._vectors.model != embedder.name:
            self._vectors = VectorIndex(embedder.name, embedder.dim)

        def rows(after: int) -> list[tuple[int, bytes]]:
            with self.db.read() as conn:
                return conn.execute(
                    "SELECT rowid, vector FROM vectors WHERE model = ? AND rowid > ? ORDER BY rowid",
                    (embedder.name, after),
                ).fetchall()

        self._vectors.refresh(rows)
        return self._vectors

    def store_vectors(self, conn: sqlite3.Connection, embedder: Embedder, rowids: Sequence[int], matrix: Any) -> None:
        """Write the vectors of freshly inserted items (inside their write transaction)."""
        conn.executemany(
            "INSERT OR REPLACE INTO vectors (rowid, model, dim, vector) VALUES (?, ?, ?, ?)",
            [(r, embedder.name, embedder.dim, matrix[i].tobytes()) for i, r in enumerate(rowids)],
        )

    # -- people ----------------------------------------------------------------------------------

    def _people(self, agent: str) -> set[str]:
        with self.db.read() as conn:
            version = conn.execute("PRAGMA data_version").fetchone()[0] * 1_000_003 + conn.total_changes
        cached = self._speakers.get(agent)
        if cached is None or cached[0] != version:
            cached = (version, self.items.speakers(agent))
            self._speakers[agent] = cached
        return cached[1]

    # -- search ----------------------------------------------------------------------------------

    def search(
        self,
        agent: str,
        query: str,
        *,
        limit: int = 10,
        kinds: Sequence[str] | None = None,
        session: str | None = None,
        embedder: Embedder | None = None,
        degraded: str | None = None,
    ) -> SearchResult:
        """The ``limit`` best active items of ``agent`` for ``query`` (optionally of ``kinds`` / one ``session``)."""
        words = terms(query)[:MAX_QUERY_TERMS]
        people = self._people(agent)
        named = _named_people(words, people)
        name_words = {w for person in named for w in terms(person)}
        lexical = [w for w in words if w not in name_words] or words
        query_stems = {stem(w) for w in lexical}
        scores: dict[int, float] = {}
        if lexical:
            expr = f'scope : "{scope_token(agent)}" AND ({fts_query(lexical)})'
            with self.db.read() as conn:
                rows = conn.execute(
                    f"SELECT rowid, -bm25(items_fts, 1.0, {CONTEXT_WEIGHT}, 0.0) AS s FROM items_fts"
                    " WHERE items_fts MATCH ? ORDER BY s DESC LIMIT ?",
                    (expr, CANDIDATES),
                ).fetchall()
            top = rows[0][1] if rows and rows[0][1] > 0 else 1.0
            scores = {r: s / top for r, s in rows}
        mode = "lexical"
        dense: dict[int, float] = {}
        if embedder is not None and lexical:
            index = self.vector_index(embedder)
            qv = embed_normalised(embedder, [" ".join(lexical)])[0]
            for rowid, _ in index.top(qv, DENSE_CANDIDATES):
                scores.setdefault(rowid, 0.0)
            dense = index.scores(qv, list(scores))
            mode = "hybrid"
        if not scores:
            return SearchResult([], mode, degraded, tuple(sorted(named)))
        features = self._features(list(scores))
        final: dict[int, float] = {}
        for rowid, lex in scores.items():
            f = features.get(rowid)
            if f is None or f[4] != "active" or f[5] != agent:
                continue
            kind, speaker, item_session, own = f[0], f[1], f[2], f[3]
            if kinds is not None and kind not in kinds:
                continue
            if session is not None and item_session != session:
                continue
            value = lex
            if query_stems:
                value += COVERAGE_WEIGHT * len(query_stems & own) / len(query_stems)
            if len(named) == 1 and speaker in named:
                value *= SPEAKER_BOOST
            final[rowid] = value
        if dense:
            values = [dense[r] for r in final if r in dense]
            if len(values) > 1:
                mean = sum(values) / len(values)
                spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 or 1.0
                for rowid in final:
                    if rowid in dense:
                        final[rowid] += DENSE_WEIGHT * (dense[rowid] - mean) / spread
        by_session: dict[str, list[float]] = {}
        for rowid, value in final.items():
            s = features[rowid][2]
            if s is not None:
                by_session.setdefault(s, []).append(value)
        if by_session:
            totals = {s: sum(sorted(v, reverse=True)[:SESSION_TOP]) for s, v in by_session.items()}
            best = max(totals.values()) or 1.0
            for rowid in final:
                s = features[rowid][2]
                if s is not None:
                    final[rowid] += SESSION_WEIGHT * totals[s] / best
        ranked = sorted(final, key=lambda r: (-final[r], -r))[: max(0, limit)]
        items = self.items.by_rowids(ranked)
        hits = [Hit(items[r], round(final[r], 4)) for r in ranked if r in items]
        return SearchResult(hits, mode, degraded, tuple(sorted(named)))

    def _features(self, rowids: list[int]) -> dict[int, tuple[str, str | None, str | None, set[str], str, str]]:
        out: dict[int, tuple[str, str | None, str | None, set[str], str, str]] = {}
        with self.db.read() as conn:
            for start in range(0, len(rowids), 500):
                chunk = rowids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(
                    "SELECT rowid, kind, speaker, session, stems, ctx_stems, status, agent FROM items"
                    f" WHERE rowid IN ({marks})",
                    chunk,
                ):
                    own = set(row[4].split())
                    if row[5]:
                        own.update(row[5].split())
                    out[row[0]] = (row[1], row[2], row[3], own, row[6], row[7])
        return out


def _named_people(words: list[str], people: set[str]) -> set[str]:
    """The known people a query names (every word of the name appears in the query)."""
    present = set(words)
    found = set()
    for person in people:
        parts = terms(person)
        if parts and all(p in present for p in parts):
            found.add(person)
    return found
