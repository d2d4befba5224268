"""What makes "acknowledged" mean "recorded": durable acknowledgements and the ledger's health.

A caller that must not answer before its row is on disk (the chokepoint, for every mutating call)
queues the record with an :class:`Ack` and awaits it; the writer thread settles the ack after the
``fsync`` of the batch that holds the row, or with the reason the row could not be stored. Waiting
costs no thread hop: the writer wakes the caller's event loop directly.

:class:`Reserve` is a small preallocated file next to the chains. When the disk fills, the writer
frees it and writes the rows of calls that already ran into the space it held, so a full disk does
not cost the audit trail of those calls; the ledger then reports itself unavailable until the reserve
can be made again, and the chokepoint refuses mutating calls meanwhile (``[ledger] on_failure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import threading
from pathlib import Path

import anyio.to_thread

from aleph._errors import ExecutionFailed

__all__ = ["RESERVE_BYTES", "Ack", "Reserve", "UnrecordedCall", "describe_os_error", "is_full"]

RESERVE_BYTES = 1 << 20
"""Space kept back for rows of calls that already ran when the disk fills (about 1,000 rows)."""


class UnrecordedCall(ExecutionFailed):
    """A call that ran (its effect is real) but whose ledger row could not be stored: never a success.

    The result store keeps such a call's idempotency claim, so a retry under the same key is not run
    again as if nothing had happened.
    """


def _resolve(future: asyncio.Future[str | None], error: str | None) -> None:
    if not future.done():
        future.set_result(error)


class Ack:
    """One caller waiting until its record is durable (``None``) or known lost (the reason)."""

    __slots__ = ("_event", "_future", "_loop", "error", "seq")

    def __init__(self) -> None:
        self.error: str | None = None
        self.seq: int | None = None
        """The row's seq in its chain, once durable."""
        self._loop: asyncio.AbstractEventLoop | None
        self._future: asyncio.Future[str | None] | None
        self._event: threading.Event | None = None
        try:
            self._loop = asyncio.get_running_loop()
            self._future = self._loop.create_future()
        except RuntimeError:  # not under asyncio (trio, or a plain thread): wait on an event instead
            self._loop = self._future = None
            self._event = threading.Event()

    def settle(self, error: str | None) -> None:
        """Called by the writer thread, once: the row is durable (None) or why it is not."""
        self.error = error
        if self._future is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody waits any more
                self._loop.call_soon_threadsafe(_resolve, self._future, error)
        elif self._event is not None:
            self._event.set()

    async def wait(self) -> str | None:
        """Wait until :meth:`settle`; cancelling the wait does not withdraw the record."""
        if self._future is not None:
            return await self._future
        event = self._event
        assert event is not None
        await anyio.to_thread.run_sync(event.wait, abandon_on_cancel=True)
        return self.error


def describe_os_error(exc: OSError, path: Path | str) -> str:
    """What a failed write of ``path`` means for a person, naming the cause rather than the errno."""
    code = exc.errno
    if code == errno.ENOSPC:
        cause = "the disk holding the ledger is full"
    elif code == errno.EDQUOT:
        cause = "the disk quota of the ledger's owner is used up"
    elif code in (errno.EACCES, errno.EPERM):
        cause = "permission denied"
    elif code == errno.EROFS:
        cause = "the ledger's filesystem is read-only"
    elif code == errno.EIO:
        cause = "an I/O error (the disk may be failing)"
    else:
        cause = exc.strerror or type(exc).__name__
    return f"{cause} (writing {path})"


def is_full(exc: OSError) -> bool:
    """Whether ``exc`` says the disk (or the quota) is full, which the reserve can help with."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


class Reserve:
    """A preallocated file whose space the writer gives back when the disk fills (see the module docstring).

    One per ledger directory, shared by every process writing there: whoever finds it missing makes it
    again, and whichever writer first meets a full disk frees it.
    """

    def __init__(self, path: Path, size: int = RESERVE_BYTES) -> None:
        self.path = path
        self.size = size

    def present(self) -> bool:
        """Whether the reserve holds its space now."""
        try:
            return self.path.stat().st_blocks * 512 >= self.size
        except OSError:
            return False

    def make(self) -> str | None:
        """Allocate the reserve (a no-op when it is there); None on success, else why it could not be."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            return describe_os_error(exc, self.path)
        try:
            os.posix_fallocate(fd, 0, self.size)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                return None  # a filesystem without preallocation: run without a reserve
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # give back the part that was allocated
            return describe_os_error(exc, self.path)
        finally:
            os.close(fd)
        return None

    def release(self) -> bool:
        """Free the reserve's space for the writer; False when there was none to free."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError:
            return False
        return True
