"""The in-memory vector index of one embedder and one agent, refreshed from SQLite."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from aleph_memory._providers import _numpy, one_blas_thread
from aleph_memory._vectorselect import SAMPLE, top_positions

__all__ = ["SAMPLE", "VectorIndex", "top_positions"]


class VectorIndex:
    """Vectors of one embedder, kept in memory as float32 matrices and refreshed from SQLite.

    Each item has its own vector and, for a dialog turn, a *context* vector: the embedding of the
    turn with its neighbours (see ``_vectorwork``). An item without one (a fact) uses its
    own vector in that place. A turn's context vector is rewritten when a neighbour arrives later;
    rewritten rows carry a higher ``stamp`` and replace the old ones on the next refresh.

    Rows live in buffers that grow by doubling (new vectors arrive in small batches from the worker;
    copying 100,000 rows for each would cost more than the search).
    """

    def __init__(self, model: str, dim: int) -> None:
        self.model = model
        self.dim = dim
        self._np = _numpy()
        np = self._np
        self._n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._own = np.zeros((0, dim), dtype=np.float32)
        self._comb = np.zeros((dim, 0), dtype=np.float32)
        """Each row's own vector plus its context vector, one column a row: one product scores both. Stored
        transposed, since OpenBLAS's product of a vector with a wide matrix runs three times as fast here
        as a tall matrix's with a vector (6 ms against 21 ms at 100,000 x 384 on one core)."""
        self._spk = np.zeros(0, dtype=np.int32)
        """Each row's speaker as a code of ``_codes`` (0: none): comparing codes is one vector operation,
        comparing Python strings in an object array is one call per row (5 ms at 100,000 rows)."""
        self._codes: dict[str | None, int] = {None: 0}
        self._last = -1
        """The highest own-vector stamp taken in (-1: none; a file of schema 4 has its vectors at stamp 0)."""
        self._stamp = 0
        self._lock = threading.Lock()

    @property
    def rowids(self) -> Any:
        """The items' rowids, ascending."""
        return self._ids[: self._n]

    @property
    def matrix(self) -> Any:
        """Each row's own vector."""
        return self._own[: self._n]

    @property
    def combined(self) -> Any:
        """Each row's own vector plus its context vector."""
        return self._comb[:, : self._n].T

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
            if updates and self._n:
                ids = np.fromiter((r[0] for r in updates), dtype=np.int64, count=len(updates))
                mat = np.frombuffer(b"".join(r[1] for r in updates), dtype=np.float32).reshape(len(updates), self.dim)
                at, known = self._find(ids)
                rows_at = at[known]
                self._comb[:, rows_at] = (self._own[rows_at] + mat[known]).T

    def _find(self, ids: Any) -> tuple[Any, Any]:
        """Positions of ``ids`` among the rows, and which of them are there."""
        np = self._np
        held = self._ids[: self._n]
        if not self._n:
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        at = np.minimum(np.searchsorted(held, ids), self._n - 1)
        return at, held[at] == ids

    def _merge(self, fresh: list[tuple[int, bytes, str | None, int]]) -> None:
        np = self._np
        latest: dict[int, tuple[int, bytes, str | None, int]] = {r[0]: r for r in fresh}  # a later stamp wins
        ordered = [latest[k] for k in sorted(latest)]
        ids = np.fromiter((r[0] for r in ordered), dtype=np.int64, count=len(ordered))
        mat = np.frombuffer(b"".join(r[1] for r in ordered), dtype=np.float32).reshape(len(ordered), self.dim)
        codes = np.array([self._codes.setdefault(r[2], len(self._codes)) for r in ordered], dtype=np.int32)
        at, known = self._find(ids)
        if known.any():
            rows = at[known]
            context = self._comb[:, rows].T - self._own[rows]
            self._own[rows] = mat[known]
            self._comb[:, rows] = (mat[known] + context).T
        new = ~known
        count = int(new.sum())
        if not count:
            return
        n = self._n
        self._reserve(n + count)
        end = n + count
        self._ids[n:end] = ids[new]
        self._own[n:end] = mat[new]
        self._comb[:, n:end] = 2 * mat[new].T
        self._spk[n:end] = codes[new]
        self._n = end
        if n and int(ids[new][0]) < int(self._ids[n - 1]):
            # Rows older than the newest one held (found by the worker's scan): back into rowid order, which
            # the binary searches over the rowids need.
            order = np.argsort(self._ids[:end], kind="stable")
            self._ids[:end] = self._ids[:end][order]
            self._own[:end] = self._own[:end][order]
            self._comb[:, :end] = self._comb[:, :end][:, order]
            self._spk[:end] = self._spk[:end][order]

    def _reserve(self, size: int) -> None:
        np = self._np
        if size <= len(self._ids):
            return
        capacity = max(size, 2 * len(self._ids), 256)

        def grown(old: Any) -> Any:
            fresh = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            fresh[: self._n] = old[: self._n]
            return fresh

        def wider(old: Any) -> Any:
            fresh = np.zeros((old.shape[0], capacity), dtype=old.dtype)
            fresh[:, : self._n] = old[:, : self._n]
            return fresh

        self._ids, self._own, self._spk = (grown(a) for a in (self._ids, self._own, self._spk))
        self._comb = wider(self._comb)

    def similarities(self, query: Any, speaker: str | None = None) -> tuple[Any, Any]:
        """(rowids, similarity) of every row to ``query`` (a unit vector), one matrix product.

        The similarity is the cosine to the item's own vector plus the cosine to its context vector (-2 to 2).
        With ``speaker`` (and when that speaker has rows), every other row's similarity is -inf: a mask costs
        a pass over the scores, taking the speaker's rows out of the matrix would copy them.
        """
        ids, sims, _ = self.nearest(query, 0, speaker)
        return ids, sims

    def nearest(self, query: Any, k: int, speaker: str | None = None) -> tuple[Any, Any, Any]:
        """(rowids, similarity, nearest): :meth:`similarities`, and the positions of the ``k`` highest.

        ``nearest`` holds at most ``k`` positions (fewer when fewer rows have a finite similarity), the
        highest similarity first and, between equal ones, the lower rowid first. With ``speaker`` they are
        taken among that speaker's rows (all rows when the speaker has none).
        """
        np = self._np
        with self._lock:
            n = self._n
            with one_blas_thread():
                sims = query @ self._comb[:, :n]
            ids = self._ids[:n].copy()
            code = self._codes.get(speaker) if speaker is not None else None
            mine = None
            if code is not None:
                mask = self._spk[:n] == code
                if mask.any():
                    np.copyto(sims, -np.inf, where=~mask)
                    mine = np.flatnonzero(mask)
        if k < 1:
            return ids, sims, np.zeros(0, dtype=np.int64)
        if mine is None:
            return ids, sims, top_positions(np, sims, k)
        return ids, sims, mine[top_positions(np, sims[mine], k)]

    def similarities_by_speaker(self, query: Any, speakers: Sequence[str]) -> list[tuple[Any, Any]]:
        """(rowids, similarity) of each of ``speakers``' rows to ``query``: one product, split under one lock.

        A speaker without rows gets empty arrays. Taken together, so a refresh on another thread cannot come
        between the product and the masks.
        """
        np = self._np
        with self._lock:
            n = self._n
            with one_blas_thread():
                sims = query @ self._comb[:, :n]
            ids = self._ids[:n]
            out = []
            for speaker in speakers:
                code = self._codes.get(speaker)
                rows = np.flatnonzero(self._spk[:n] == code) if code is not None else np.zeros(0, dtype=np.int64)
                out.append((ids[rows], sims[rows]))
            return out

    @property
    def context(self) -> Any:
        """The context vectors (a copy; a row without one holds its own vector)."""
        with self._lock:
            return self._comb[:, : self._n].T - self._own[: self._n]

    def of_speaker(self, speaker: str) -> Any:
        """A boolean mask of the rows whose item was said by ``speaker``."""
        with self._lock:
            code = self._codes.get(speaker)
            if code is None:
                return self._np.zeros(self._n, dtype=bool)
            return self._spk[: self._n] == code

    @property
    def speakers(self) -> Any:
        """Each row's speaker (None for an item without one), as an object array."""
        names = [None] * len(self._codes)
        for name, code in self._codes.items():
            names[code] = name
        with self._lock:
            return self._np.array(names, dtype=object)[self._spk[: self._n]]
