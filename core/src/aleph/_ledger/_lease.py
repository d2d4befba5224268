"""The chain file's lock kept across rows (a lease) while one process writes a chain alone.

Every row is written under an exclusive ``flock`` of its chain file, because several processes may append
to one chain. Taking and giving up that lock for each row, and checking with ``lseek`` that no one appended
meanwhile, cost as much as writing the row. So a process that finds the lock free keeps it after its row
(the :class:`Lease` is *held*) and writes its next rows with no lock call and no ``lseek``: nobody else can
have appended while it held the lock.

It gives the lock up:

- when another writer asks for it: a writer that finds the chain locked adds one to the request counter in
  ``<chain>.lease`` (8 bytes, mapped shared by every writer of the chain) before it waits; the holder reads
  the counter after each row (a memory read) and lets go at once when it changed. Until the committer allows
  the lease again (:data:`LEASE_HOLDOFF` after the last such request), it then locks per row, as before;
- at every pass of the committer (within ``SEAL_INTERVAL`` of the rows), so a process that stops writing
  holds nothing, and a writer that never asks (an older version) waits at most that long;
- when the chain is closed, evicted or the ledger closes; and the kernel drops it if the process dies.

The lease also keeps the chain's head (seq, hash, file size) and who writes (agent, key), so the native
``Lease`` (``_rowfast.c``) writes a row from its fields alone in one call: lock if not held, build, ``write(2)``,
advance the head, decide whether to keep the lock. :class:`PyLease` does the same in Python.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import time
from pathlib import Path
from typing import Any

from aleph._ledger._rowline import py_row_line
from aleph._ledger._speedups import native

__all__ = [
    "CONTENDED",
    "DECLINED",
    "FAILED",
    "FOREIGN",
    "LEASE_HOLDOFF",
    "PyLease",
    "ask_for",
    "close_lease",
    "open_lease",
]

CONTENDED, FOREIGN, DECLINED, FAILED = -1, -2, -3, -4
"""Why :meth:`PyLease.append` wrote nothing (a seq is positive): another process holds the lock; another process
appended since our last row; the row needs the full path (clipping, refs); the write failed or was short (cut back)."""

LEASE_HOLDOFF = 1.0
"""Seconds after another writer last asked for a chain before this process keeps its lock across rows again."""

_COUNTER = struct.Struct("=Q")


class PyLease:
    """The Python twin of ``_rowfast.Lease``: the chain's head, its lock kept across rows, one row written under it."""

    __slots__ = ("_want", "agent", "allowed", "fd", "fp", "head", "held", "key", "seen", "seq", "size")

    def __init__(self, fd: int, want: Any = None) -> None:
        self.fd = fd
        self.held = 0
        self.seen = 0
        self._want = want
        self.allowed = 1 if want is not None else 0
        self.seq = 0
        self.size = 0
        self.head: bytes | None = None
        self.agent: str | None = None
        self.fp = ""
        self.key: Any = None

    def bind(self, agent_id: str, signer_fp: str, key: Any) -> None:
        """Who the rows :meth:`append` writes are by."""
        self.agent, self.fp, self.key = agent_id, signer_fp, key

    def requests(self) -> int:
        """How many times writers asked for the chain (0 without a request counter)."""
        want = self._want
        return 0 if want is None else int(_COUNTER.unpack_from(want)[0])

    def release(self) -> None:
        """Give the chain's lock up if it is held."""
        if self.held:
            self.held = 0
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def detach(self) -> None:
        """Stop reading the request counter (before it is unmapped)."""
        self._want = None
        self.allowed = 0

    def append(self, *fields: Any) -> int:
        """Write one marked row after the head; its seq once written, else a negative reason (nothing written)."""
        if self.agent is None:
            return DECLINED
        if not self.held:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return CONTENDED
            self.held = 1
            self.seen = self.requests()
            if os.lseek(self.fd, 0, os.SEEK_END) != self.size:
                self.release()
                return FOREIGN
        at_ms = time.time_ns() // 1_000_000
        built = py_row_line(self.agent, self.seq + 1, self.head, self.fp, self.key, at_ms, *fields)
        if built is None:
            self.release()
            return DECLINED
        line, digest = built
        try:
            written = os.write(self.fd, line)
        except OSError:
            written = 0
        if written != len(line):
            if written > 0:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, self.size)
            self.release()
            return FAILED
        self.seq += 1
        self.size += len(line)
        self.head = digest
        if not self.allowed or self.requests() != self.seen:
            self.allowed = 0
            self.release()
        return self.seq


def open_lease(chain_path: Path, fd: int) -> tuple[Any, mmap.mmap | None]:
    """The lease of the chain open as ``fd``, and the mapping of its request counter (None when it cannot be had).

    Without a counter (the directory refuses the file) the lease still writes rows, but never keeps the lock.
    """
    lease_cls: Any = native.Lease if native is not None else PyLease
    try:
        counter = os.open(_lease_path(chain_path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(counter).st_size < _COUNTER.size:
                # Written, not sized with ftruncate: a hole in the file would be allocated when the mapping is
                # first read, and on a full disk (a full tmpfs) that read would kill the process (SIGBUS).
                # Under the counter's lock, so a request added meanwhile is not overwritten.
                fcntl.flock(counter, fcntl.LOCK_EX)
                try:
                    if os.fstat(counter).st_size < _COUNTER.size and os.pwrite(counter, bytes(8), 0) != 8:
                        raise OSError("short write of the lease counter")
                finally:
                    # Unlocked explicitly: the mapping keeps a duplicate of this descriptor (the same open
                    # file), which would otherwise hold the lock for as long as the chain is open.
                    fcntl.flock(counter, fcntl.LOCK_UN)
            mapped = mmap.mmap(counter, _COUNTER.size, prot=mmap.PROT_READ)
        finally:
            os.close(counter)
    except (OSError, ValueError):
        return lease_cls(fd), None
    return lease_cls(fd, mapped), mapped


def ask_for(chain_path: Path, mapped: mmap.mmap | None) -> None:
    """Tell the process holding the chain's lock that this one waits for it (add one to the request counter)."""
    if mapped is None:
        return
    with contextlib.suppress(OSError):
        counter = os.open(_lease_path(chain_path), os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(counter, fcntl.LOCK_EX)  # increments by several waiters are never lost
            # pwrite, not a store into the mapping: a failed write on a full disk is an error here, never a SIGBUS.
            value = (_COUNTER.unpack_from(mapped)[0] + 1) % (1 << 64)
            os.pwrite(counter, _COUNTER.pack(value), 0)
        finally:
            os.close(counter)


def close_lease(lease: Any, mapped: mmap.mmap | None) -> None:
    """Give the lock up and unmap the counter (the chain file itself is closed by its owner)."""
    with contextlib.suppress(OSError):
        lease.release()
    lease.detach()
    if mapped is not None:
        with contextlib.suppress(BufferError, ValueError):
            mapped.close()


def _lease_path(chain_path: Path) -> Path:
    return chain_path.with_name(chain_path.name.removesuffix(".jsonl") + ".lease")
