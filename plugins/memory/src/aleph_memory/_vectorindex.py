"""The in-memory vector index of one embedder and one agent, refreshed from SQLite."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from aleph_memory._providers import _numpy, one_blas_thread
from aleph_memory._twopass import QueryCode, exact_scores, native, quantise, row_norms, select, upper_bounds
from aleph_memory._vectorselect import SAMPLE, top_positions

__all__ = ["SAMPLE", "Nearest", "VectorIndex", "top_positions"]


class VectorIndex:
    """Vectors of one embedder, kept in memory as float32 matrices and refreshed from SQLite.

    Each item has its own vector and, for a dialog turn, a *context* vector: the embedding of the
    turn with its neighbours (see ``_vectorwork``). An item without one (a fact) uses its
    own vector in that place. A turn's context vector is rewritten when a neighbour arrives later;
    rewritten rows carry a higher ``stamp`` and replace the old ones on the next refresh.

    Rows live in buffers that grow by doubling (new vectors arrive in small batches from the worker;
    copying 100,000 rows for each would cost more than the search). With the native kernels the rows'
    sums are also kept as int8 (see ``_twopass``): about 40 MB more at 100,000 rows of 384 dimensions.
    """

    def __init__(self, model: str, dim: int) -> None:
        self.model = model
        self.dim = dim
        self._np = _numpy()
        np = self._np
        self._n = 0
        self._native = native is not None
        self._ids = np.zeros(0, dtype=np.int64)
        self._own = np.zeros((0, dim), dtype=np.float32)
        self._rows = np.zeros((0, dim), dtype=np.float32)
        """Each row's own vector plus its context vector: one score covers both. Row-major with the native
        kernels (the second pass reads a few hundred whole rows); otherwise a transposed view of ``_cols``."""
        self._cols = self._rows.T
        """The same, one column a row. Without the native kernels it is the storage: OpenBLAS's product of a
        vector with a wide matrix runs three times as fast here as a tall matrix's with a vector (6 ms against
        21 ms at 100,000 x 384 on one core)."""
        if not self._native:
            self._cols = np.zeros((dim, 0), dtype=np.float32)
            self._rows = self._cols.T
        self._q8 = np.zeros((0, dim), dtype=np.int8)
        """The rows as int8 codes, scaled by ``_scale``, with their error ``_err`` (native kernels only)."""
        self._scale = np.zeros(0, dtype=np.float32)
        self._err = np.zeros(0, dtype=np.float32)
        self._bound = np.zeros(0, dtype=np.float32)
        """Each row's norm, rounded up (inf for a row that is not finite): the rounding part of its bound."""
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
        return self._rows[: self._n]

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
                self._write(rows_at, self._own[rows_at] + mat[known])

    def _write(self, at: Any, combined: Any) -> None:
        """Rows ``at`` (positions, or a slice) take the sums ``combined``; their int8 codes and bounds follow.

        Every write of a row's sum goes through here, so the int8 copy never lags the float32 rows.
        """
        np = self._np
        self._rows[at] = combined
        fresh = self._rows[at]
        if self._native:
            self._q8[at], self._scale[at], self._err[at], self._bound[at] = quantise(np, fresh)
        else:
            self._bound[at] = row_norms(np, fresh)

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
            context = self._rows[rows] - self._own[rows]
            self._own[rows] = mat[known]
            self._write(rows, mat[known] + context)
        new = ~known
        count = int(new.sum())
        if not count:
            return
        n = self._n
        self._reserve(n + count)
        end = n + count
        self._ids[n:end] = ids[new]
        self._own[n:end] = mat[new]
        self._write(slice(n, end), 2 * mat[new])
        self._spk[n:end] = codes[new]
        self._n = end
        if n and int(ids[new][0]) < int(self._ids[n - 1]):
            # Rows older than the newest one held (found by the worker's scan): back into rowid order, which
            # the binary searches over the rowids need.
            order = np.argsort(self._ids[:end], kind="stable")
            for array in self._per_row():
                array[:end] = array[:end][order]

    def _per_row(self) -> list[Any]:
        """Every array with one entry (or row) per row, the sums by their storage's own orientation."""
        arrays = [self._ids, self._own, self._spk, self._bound]
        if self._native:
            arrays += [self._rows, self._q8, self._scale, self._err]
        else:
            arrays.append(self._cols.T)
        return arrays

    def _reserve(self, size: int) -> None:
        np = self._np
        if size <= len(self._ids):
            return
        capacity = max(size, 2 * len(self._ids), 256)

        def grown(old: Any) -> Any:
            fresh = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            fresh[: self._n] = old[: self._n]
            return fresh

        self._ids, self._own, self._spk, self._bound = (
            grown(a) for a in (self._ids, self._own, self._spk, self._bound)
        )
        if self._native:
            self._rows, self._q8, self._scale, self._err = (
                grown(a) for a in (self._rows, self._q8, self._scale, self._err)
            )
            self._cols = self._rows.T
        else:
            wide = np.zeros((self.dim, capacity), dtype=np.float32)
            wide[:, : self._n] = self._cols[:, : self._n]
            self._cols, self._rows = wide, wide.T

    def _gate(self, speaker: str | None, *, strict: bool) -> tuple[Any, int | None]:
        """(mask of ``speaker``'s rows, its code), or (None, None): every row.

        Every row when there is no speaker, or, unless ``strict``, a speaker without rows (``strict``: no row).
        """
        np = self._np
        if speaker is None:
            return None, None
        code = self._codes.get(speaker)
        mask = self._spk[: self._n] == code if code is not None else np.zeros(self._n, dtype=bool)
        if not strict and not mask.any():
            return None, None
        return mask, -1 if code is None else code

    def _first_pass(self, code: QueryCode) -> tuple[Any, Any]:
        """(rough scores, upper bounds) of every row: the int8 kernel's, else numpy's float32 product's."""
        np = self._np
        n = self._n
        if self._native and code.usable:
            scores = np.empty(n, dtype=np.float32)
            native.approx(code.codes, self._q8[:n], self._scale[:n], code.factor, scores)
            return scores, upper_bounds(np, scores, code, self._err[:n], self._bound[:n], from_int8=True)
        if not code.usable:  # a zero or broken question: every row is scored exactly
            return np.zeros(n, dtype=np.float32), np.full(n, np.inf, dtype=np.float32)
        with one_blas_thread(), np.errstate(invalid="ignore", over="ignore"):  # a broken row scores NaN
            scores = code.query @ self._cols[:, :n]
        return scores, upper_bounds(np, scores, code, None, self._bound[:n], from_int8=False)

    def _exact(self, query: Any, positions: Any) -> Any:
        return exact_scores(self._np, query, self._rows[: self._n], positions)

    def _select(self, code: QueryCode, first: tuple[Any, Any], k: int, gate: tuple[Any, int | None]) -> Nearest:
        np = self._np
        scores, upper = first
        mask, speaker = gate
        if mask is not None:
            scores, upper = scores.copy(), upper.copy()
            np.copyto(scores, -np.inf, where=~mask)
            np.copyto(upper, -np.inf, where=~mask)
        if k < 1 or not self._n:
            best, sims = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        else:
            best, sims = select(np, scores, upper, k, lambda at: self._exact(code.query, at))
        return Nearest(self, code.query, self._ids[best], sims, speaker)

    def similarities(self, query: Any, speaker: str | None = None) -> tuple[Any, Any]:
        """(rowids, similarity) of every row to ``query`` (a unit vector), each row's exact score.

        The similarity is the cosine to the item's own vector plus the cosine to its context vector (-2 to 2).
        With ``speaker`` (and when that speaker has rows), every other row's similarity is -inf. A search does
        not need every row's (see :meth:`nearest`); this scores them all, for tests and benchmarks.
        """
        np = self._np
        query = np.ascontiguousarray(query, dtype=np.float32)
        with self._lock:
            n = self._n
            sims = self._exact(query, np.arange(n))
            mask = self._gate(speaker, strict=False)[0]
            if mask is not None:
                np.copyto(sims, -np.inf, where=~mask)
            return self._ids[:n].copy(), sims

    def nearest(self, query: Any, k: int, speaker: str | None = None) -> Nearest:
        """The ``k`` rows nearest to ``query`` (a unit vector), exactly, and a way to score other rows alike.

        At most ``k`` rows (fewer when fewer rows have a finite similarity), the highest similarity first and,
        between equal ones, the lower rowid first. With ``speaker`` they are taken among that speaker's rows
        (all rows when the speaker has none), and :meth:`Nearest.similarities` scores that speaker's rows only.
        """
        code = QueryCode(self._np, query)
        with self._lock:
            return self._select(code, self._first_pass(code), k, self._gate(speaker, strict=False))

    def nearest_by_speaker(self, query: Any, speakers: Sequence[str], k: int) -> list[Nearest]:
        """:meth:`nearest` among each of ``speakers``' rows (none for a speaker without rows): one first pass.

        Taken together under one lock, so a refresh on another thread cannot come between the speakers.
        """
        code = QueryCode(self._np, query)
        with self._lock:
            first = self._first_pass(code)
            return [self._select(code, first, k, self._gate(s, strict=True)) for s in speakers]

    def similarities_by_speaker(self, query: Any, speakers: Sequence[str]) -> list[tuple[Any, Any]]:
        """(rowids, similarity) of each of ``speakers``' rows to ``query``, exact (for tests and benchmarks)."""
        np = self._np
        query = np.ascontiguousarray(query, dtype=np.float32)
        with self._lock:
            out = []
            for speaker in speakers:
                rows = np.flatnonzero(self._gate(speaker, strict=True)[0])
                out.append((self._ids[rows], self._exact(query, rows)))
            return out

    @property
    def context(self) -> Any:
        """The context vectors (a copy; a row without one holds its own vector)."""
        with self._lock:
            return self._rows[: self._n] - self._own[: self._n]

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


class Nearest:
    """The rows nearest to a question (:meth:`VectorIndex.nearest`), and the exact similarity of any other row.

    ``rowids`` and ``sims``: the nearest rows, nearest first, and their similarities.
    """

    def __init__(self, index: VectorIndex, query: Any, rowids: Any, sims: Any, speaker: int | None) -> None:
        self._index = index
        self._query = query
        self.rowids = rowids
        self.sims = sims
        self._speaker = speaker
        """The gate's speaker code (None: every row)."""

    def similarities(self, rowids: Any) -> tuple[Any, Any]:
        """(rowids, similarity) of those of ``rowids`` the index holds with a finite similarity (in the gate).

        Scored exactly like the nearest rows. When another thread's refresh took new vectors in since, a row
        is scored on its newest vectors.
        """
        index = self._index
        np = index._np
        wanted = np.asarray(rowids, dtype=np.int64)
        with index._lock:
            at, known = index._find(wanted)
            at = at[known]
            if self._speaker is not None:
                at = at[index._spk[at] == self._speaker]
            sims = index._exact(self._query, at)
            finite = np.isfinite(sims)
            return index._ids[at[finite]], sims[finite]
