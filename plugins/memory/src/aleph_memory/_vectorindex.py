"""The in-memory vector index of one embedder and one agent, refreshed from SQLite."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from aleph_memory._providers import _numpy

__all__ = ["VectorIndex"]


class VectorIndex:
    """Vectors of one embedder, kept in memory as float32 matrices and refreshed from SQLite.

    Each item has its own vector and, for a dialog turn, a *context* vector: the embedding of the
    turn with its neighbours (see ``_vectorwork``). An item without one (a fact) uses its
    own vector in that place. A turn's context vector is rewritten when a neighbour arrives later;
    rewritten rows carry a higher ``stamp`` and replace the old ones on the next refresh.
    """

    def __init__(self, model: str, dim: int) -> None:
        self.model = model
        self.dim = dim
        self._np = _numpy()
        self.rowids = self._np.zeros(0, dtype=self._np.int64)
        self.matrix = self._np.zeros((0, dim), dtype=self._np.float32)
        self.combined = self._np.zeros((0, dim), dtype=self._np.float32)
        """Each row's own vector plus its context vector: one matrix product scores both."""
        self._speakers = self._np.zeros(0, dtype=self._np.int32)
        """Each row's speaker as a code of ``_codes`` (0: none): comparing codes is one vector operation,
        comparing Python strings in an object array is one call per row (5 ms at 100,000 rows)."""
        self._codes: dict[str | None, int] = {None: 0}
        self._last = -1
        """The highest own-vector stamp taken in (-1: none; a file of schema 4 has its vectors at stamp 0)."""
        self._stamp = 0
        self._lock = threading.Lock()

    def refresh(
        self,
        rows: Callable[[int], list[tuple[int, bytes, str | None, int]]],
        context_rows: Callable[[int], list[tuple[int, bytes, int]]],
        newest: Callable[[str], int],
    ) -> None:
        """Take in the own vectors and the context vectors stamped after the last stamps seen.

        ``rows(after)`` reads (rowid, vector, speaker, stamp); ``context_rows(after)`` reads (rowid, vector,
        stamp); ``newest("rowid")`` / ``newest("stamp")`` are the highest stamps of the two tables: when
        nothing is newer than what was seen, nothing is read (a search reads two index entries, not the
        tables). The background worker writes vectors in no fixed rowid order (a scan for missing ones
        runs beside fresh notices), so rows are merged into rowid order, and a row written again replaces
        its own vector and keeps its context.
        """
        np = self._np
        with self._lock:
            # Context vectors first: an item's own and context vectors are written in one transaction, so
            # every context row read here belongs to an item the read of ``rows`` below already sees.
            high_stamp = newest("stamp")
            updates = context_rows(self._stamp) if high_stamp > self._stamp else []
            high_own = newest("rowid")
            fresh = rows(self._last) if high_own > self._last else []
            self._last = max(self._last, high_own, *(r[3] for r in fresh))
            self._stamp = max(self._stamp, high_stamp, *(r[2] for r in updates))
            if fresh:
                self._merge(fresh)
            if not updates or not len(self.rowids):
                return
            ids = np.fromiter((r[0] for r in updates), dtype=np.int64, count=len(updates))
            mat = np.frombuffer(b"".join(r[1] for r in updates), dtype=np.float32).reshape(len(updates), self.dim)
            at = np.searchsorted(self.rowids, ids)
            known = (at < len(self.rowids)) & (self.rowids[np.minimum(at, len(self.rowids) - 1)] == ids)
            self.combined[at[known]] = self.matrix[at[known]] + mat[known]

    def _merge(self, fresh: list[tuple[int, bytes, str | None, int]]) -> None:
        np = self._np
        latest: dict[int, tuple[int, bytes, str | None, int]] = {r[0]: r for r in fresh}  # a later stamp wins
        ordered = [latest[k] for k in sorted(latest)]
        ids = np.fromiter((r[0] for r in ordered), dtype=np.int64, count=len(ordered))
        mat = np.frombuffer(b"".join(r[1] for r in ordered), dtype=np.float32).reshape(len(ordered), self.dim)
        codes = np.array([self._codes.setdefault(r[2], len(self._codes)) for r in ordered], dtype=np.int32)
        n = len(self.rowids)
        at = np.searchsorted(self.rowids, ids)
        known = (at < n) & (self.rowids[np.minimum(at, max(n - 1, 0))] == ids) if n else np.zeros(len(ids), bool)
        if known.any():
            rows = at[known]
            context = self.combined[rows] - self.matrix[rows]
            self.matrix[rows] = mat[known]
            self.combined[rows] = mat[known] + context
        new = ~known
        if not new.any():
            return
        self.rowids = np.concatenate([self.rowids, ids[new]])
        self.matrix = np.concatenate([self.matrix, mat[new]])
        self.combined = np.concatenate([self.combined, 2 * mat[new]])
        self._speakers = np.concatenate([self._speakers, codes[new]])
        if n and int(ids[new][0]) < int(self.rowids[n - 1]):
            # Rows older than the newest one held (found by the worker's scan): back into rowid order, which
            # the binary searches over ``rowids`` need.
            order = np.argsort(self.rowids, kind="stable")
            self.rowids = self.rowids[order]
            self.matrix = self.matrix[order]
            self.combined = self.combined[order]
            self._speakers = self._speakers[order]

    def similarities(self, query: Any) -> tuple[Any, Any]:
        """(rowids, similarity) of every row to ``query`` (a unit vector), one matrix product.

        The similarity is the cosine to the item's own vector plus the cosine to its context vector (-2 to 2).
        """
        with self._lock:
            return self.rowids, self.combined @ query

    @property
    def context(self) -> Any:
        """The context vectors (a copy; a row without one holds its own vector)."""
        with self._lock:
            return self.combined - self.matrix

    def of_speaker(self, speaker: str) -> Any:
        """A boolean mask of the rows whose item was said by ``speaker``."""
        with self._lock:
            code = self._codes.get(speaker)
            if code is None:
                return self._np.zeros(len(self._speakers), dtype=bool)
            return self._speakers == code

    @property
    def speakers(self) -> Any:
        """Each row's speaker (None for an item without one), as an object array."""
        names = [None] * len(self._codes)
        for name, code in self._codes.items():
            names[code] = name
        with self._lock:
            return self._np.array(names, dtype=object)[self._speakers]

    def scores(self, query: Any, rowids: Sequence[int] | None = None) -> dict[int, float]:
        """Similarity of ``query`` to ``rowids`` (default: every row)."""
        np = self._np
        ids, sims = self.similarities(query)
        if rowids is None:
            return dict(zip(ids.tolist(), sims.tolist(), strict=True))
        wanted = np.isin(ids, np.asarray(list(rowids), dtype=np.int64))
        return dict(zip(ids[wanted].tolist(), sims[wanted].tolist(), strict=True))

    def top(self, query: Any, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest rows to ``query``."""
        np = self._np
        ids, sims = self.similarities(query)
        if len(ids) == 0 or k < 1:
            return []
        k = min(k, len(sims))
        best = np.argpartition(-sims, k - 1)[:k]
        return [(int(ids[i]), float(sims[i])) for i in best]
