"""Embedding off the write path: a background worker computes stored items' vectors in batches.

``remember`` and ``ingest`` commit their items and return; they hand the new rowids to the worker
(:meth:`VectorWorker.notify`), which never blocks a writer. The hand-over is bounded: past
``QUEUE_BOUND`` rowids waiting, a notice is not kept and the worker looks in the table for items
that have no vector of its model instead. It does the same when it starts, so items committed before a
crash or a kill (their vectors not yet written) get them on the next start: nothing is lost.

The worker embeds outside the database lock, one batch at a time, on one BLAS thread at a lowered
CPU priority, and writes a batch's own and context vectors in one short transaction, each row
stamped with a number that grows with every batch (the search index reads what is newer than the
stamp it saw, whatever the rowids). Search uses vectors where they exist; an item whose vector is
not written yet is ranked by its lexical score alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import aleph
from aleph_memory._db import Database
from aleph_memory._providers import Embedder, embed_normalised, one_blas_thread

__all__ = ["QUEUE_BOUND", "VECTOR_WINDOW", "VectorWorker", "write_vectors"]

QUEUE_BOUND = 20_000
"""Rowids waiting for the worker at most; a notice beyond them is dropped and the table scanned instead."""
BATCH = 32
"""Items embedded together (with their context windows, about twice as many texts): a few seconds of a
transformer on one core, so closing the store waits at most that long for the batch in hand."""
NICENESS = 10
"""The worker thread's niceness increment: a search or a write on the same cores goes first."""
VECTOR_WINDOW = 1
"""A turn's context vector embeds it with this many turns on each side (same session)."""

_log = logging.getLogger("aleph_memory.vectors")


class VectorWorker:
    """One background thread that writes the vectors of one embedder for every item of one file."""

    def __init__(
        self,
        db: Database,
        embedder: Callable[[], Embedder],
        *,
        queue_bound: int = QUEUE_BOUND,
        batch: int = BATCH,
    ) -> None:
        if queue_bound < 1 or batch < 1:
            raise ValueError("queue_bound and batch must be at least 1")
        self._db = db
        self._load = embedder
        self.queue_bound = queue_bound
        self._batch = batch
        self._waiting: deque[int] = deque()
        self._cond = threading.Condition()
        self._scan = 1
        """Scans of the table still owed: at start, and after a notice did not fit (a counter, so a notice dropped
        while a scan runs asks for another one)."""
        self._busy = False
        self._stop = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        """Why the worker stopped (the embedder would not load, or failed on a batch); search then says so."""
        self.embedded = 0
        """Items this worker wrote vectors for."""

    # -- the writers' side ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (idempotent); it first looks for items stored without vectors."""
        with self._cond:
            if self._thread is None and not self._stop:
                self._thread = threading.Thread(target=self._run, name="aleph-memory-vectors", daemon=True)
                self._thread.start()

    def notify(self, rowids: Sequence[int]) -> None:
        """Items ``rowids`` were committed: embed them soon. Never blocks; never grows past ``queue_bound``."""
        if not rowids:
            return
        self.start()
        with self._cond:
            if len(self._waiting) + len(rowids) > self.queue_bound:
                self._scan += 1
            else:
                self._waiting.extend(rowids)
            self._cond.notify_all()

    @property
    def queued(self) -> int:
        """Rowids waiting in the hand-over (at most ``queue_bound``)."""
        with self._cond:
            return len(self._waiting)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every item handed over or found missing has its vectors; False on timeout or failure."""
        self.start()
        with self._cond:
            self._cond.wait_for(self._settled, timeout)
            return self._idle() and self.error is None

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the batch in hand (what is left is found again at the next start)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _idle(self) -> bool:
        return not self._waiting and not self._scan and not self._busy

    def _settled(self) -> bool:
        return self._idle() or self.error is not None or self._stop

    # -- the worker ------------------------------------------------------------------------------

    def _run(self) -> None:
        _lower_priority()
        try:
            embedder = self._load()
            cursor = 0
            while True:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
                    self._cond.wait_for(lambda: self._stop or self._waiting or self._scan)
                    if self._stop:
                        return
                    self._busy = True
                    scans = self._scan
                    take = min(self._batch, len(self._waiting))
                    batch = [self._waiting.popleft() for _ in range(take)]
                if not batch and scans:
                    batch = self._missing(embedder.name, cursor)
                    if not batch:
                        with self._cond:
                            self._scan -= scans  # a scan owed since this one began stays owed
                        cursor = 0
                        continue
                    cursor = batch[-1]
                self.embedded += write_vectors(self._db, embedder, batch)
        except BaseException as exc:  # kept for search to report: the thread must not die silently
            if isinstance(exc, aleph.ExecutionFailed):  # "embedder not available: ..." says it all
                _log.warning("the memory vector worker stopped: %s", exc)
            else:
                _log.exception("the memory vector worker stopped")
            with self._cond:
                self.error = exc
                self._busy = False
                self._cond.notify_all()

    def _missing(self, model: str, after: int) -> list[int]:
        """The next items (by rowid, after ``after``) that have no vector of ``model``."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT rowid FROM items i WHERE rowid > ? AND NOT EXISTS"
                " (SELECT 1 FROM vectors v WHERE v.rowid = i.rowid AND v.model = ?) ORDER BY rowid LIMIT ?",
                (after, model, self._batch),
            ).fetchall()
        return [r[0] for r in rows]


def write_vectors(db: Database, embedder: Embedder, rowids: Sequence[int]) -> int:
    """Embed the items ``rowids`` that lack a vector of ``embedder``, with the context windows they touch.

    Reads and the final write hold the database lock briefly; embedding holds none. Returns how many
    items got their own vector.
    """
    marks = ",".join("?" * len(rowids))
    with db.read() as conn:
        own = conn.execute(
            f"SELECT rowid, content FROM items i WHERE rowid IN ({marks}) AND NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.rowid = i.rowid AND v.model = ?) ORDER BY rowid",
            [*rowids, embedder.name],
        ).fetchall()
        if not own:
            return 0
        context_ids, context_texts = _context_windows(conn, [r[0] for r in own])
    texts = [content for _, content in own] + context_texts
    with one_blas_thread():
        matrix = embed_normalised(embedder, texts)
    with db.write() as conn:
        stamp = conn.execute("SELECT coalesce(max(stamp), 0) + 1 FROM vectors").fetchone()[0]
        conn.executemany(
            "INSERT OR REPLACE INTO vectors (rowid, model, dim, vector, stamp) VALUES (?, ?, ?, ?, ?)",
            [(rowid, embedder.name, embedder.dim, matrix[i].tobytes(), stamp) for i, (rowid, _) in enumerate(own)],
        )
        if context_ids:
            stamp = conn.execute("SELECT coalesce(max(stamp), 0) + 1 FROM context_vectors").fetchone()[0]
            base = len(own)
            conn.executemany(
                "INSERT OR REPLACE INTO context_vectors (rowid, model, stamp, vector) VALUES (?, ?, ?, ?)",
                [(r, embedder.name, stamp, matrix[base + i].tobytes()) for i, r in enumerate(context_ids)],
            )
    return len(own)


def _context_windows(conn: Any, rowids: Sequence[int]) -> tuple[list[int], list[str]]:
    """Each touched turn with its neighbours (VECTOR_WINDOW turns each side, same session): (rowids, texts).

    A turn alone is often a fragment ("Yep, three years now!", "this is Max!"); with the turn before
    and after it, the vector says what the exchange is about. A new turn changes its neighbours'
    windows too, so those are embedded again.
    """
    touched: dict[tuple[str, str], set[int]] = {}
    for start in range(0, len(rowids), 500):
        chunk = list(rowids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for agent, item_session, seq in conn.execute(
            f"SELECT agent, session, seq FROM items WHERE rowid IN ({marks}) AND kind = 'turn'"
            " AND session IS NOT NULL AND seq IS NOT NULL",
            chunk,
        ):
            touched.setdefault((agent, item_session), set()).add(seq)
    w = VECTOR_WINDOW
    ids: list[int] = []
    texts: list[str] = []
    for (agent, item_session), seqs in touched.items():
        rows = conn.execute(
            "SELECT rowid, seq, content FROM items INDEXED BY items_by_session WHERE session = ?"
            " AND seq BETWEEN ? AND ? AND agent = ? AND kind = 'turn' AND status = 'active' ORDER BY seq",
            (item_session, min(seqs) - 2 * w, max(seqs) + 2 * w, agent),
        ).fetchall()
        at = {seq: (rowid, content) for rowid, seq, content in rows}
        for seq in sorted({s + d for s in seqs for d in range(-w, w + 1)}):
            if seq in at:
                ids.append(at[seq][0])
                texts.append(" ".join(at[s][1] for s in range(seq - w, seq + w + 1) if s in at))
    return ids, texts


def _lower_priority() -> None:
    """Lower this thread's CPU priority (Linux schedules threads as tasks: the id is the thread's own)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
