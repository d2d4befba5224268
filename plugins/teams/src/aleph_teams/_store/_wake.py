"""Change signals: a waiter wakes when the store changes, not on a poll.

:class:`Wakeup` is the in-process half: a version counter and the waiters of every event loop, woken
with ``call_soon_threadsafe``. The cross-process half depends on the backend: for SQLite,
:class:`SocketBus` sends one datagram to every process that listens on the same database (abstract
Unix sockets, named in a directory beside the database); PostgreSQL uses LISTEN/NOTIFY.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import threading
import uuid
from pathlib import Path

__all__ = ["SocketBus", "Wakeup"]

log = logging.getLogger("aleph.teams")


class Wakeup:
    """A version that goes up on every change, and async waiters for the next one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    @property
    def version(self) -> int:
        """The current version; read it before looking at the state you will wait on."""
        return self._version

    def bump(self) -> None:
        """Something changed: wake every waiter (safe from any thread)."""
        with self._lock:
            self._version += 1
            waiters, self._waiters = self._waiters, set()
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(_resolve, fut)

    async def wait(self, seen: int, timeout: float) -> bool:
        """Wait until the version differs from ``seen`` or ``timeout`` seconds pass; True if it changed."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if self._version != seen:
                return True
            self._waiters.add(entry)
        # A timer resolving the same future, not asyncio.wait_for: on 3.11 wait_for can swallow a
        # cancellation that races with the result, leaving a cancelled service waiting forever.
        timer = loop.call_later(timeout, _resolve, fut)
        try:
            await fut
        finally:
            timer.cancel()
            with self._lock:
                self._waiters.discard(entry)
        return self._version != seen


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class SocketBus:
    """Cross-process wake-ups for one SQLite database on one host.

    Each listening process binds an abstract Unix datagram socket and leaves a marker file named after
    it in ``<db>.wake/``; a writer sends one byte to each after its commit. A marker whose socket is
    gone (its process died) is removed by the first writer that finds it so.
    """

    def __init__(self, db_path: Path, wakeup: Wakeup) -> None:
        self.dir = db_path.with_name(db_path.name + ".wake")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._tag = hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:16]
        self._wakeup = wakeup
        self._me = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._rx.bind(self._address(self._me))
        self._tx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._tx.setblocking(False)
        (self.dir / self._me).touch()
        self._closed = False
        self._peers: list[str] = []
        self._peers_mtime = -1.0
        self._thread = threading.Thread(target=self._listen, name="aleph-teams-wake", daemon=True)
        self._thread.start()

    def _address(self, name: str) -> bytes:
        return b"\0aleph-teams-" + self._tag.encode() + b"-" + name.encode()

    def _listen(self) -> None:
        while not self._closed:
            try:
                data = self._rx.recv(64)
            except OSError:
                return
            if data == b"q" and self._closed:
                return
            self._wakeup.bump()

    def publish(self) -> None:
        """Tell every other listening process that the database changed."""
        try:
            mtime = self.dir.stat().st_mtime
            if mtime != self._peers_mtime:
                self._peers = [p for p in os.listdir(self.dir) if p != self._me]
                self._peers_mtime = mtime
        except OSError:
            return
        for peer in self._peers:
            try:
                self._tx.sendto(b"!", self._address(peer))
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    (self.dir / peer).unlink()
                self._peers_mtime = -1.0
            except (BlockingIOError, OSError):
                pass  # its queue is full: it has wake-ups pending already

    def close(self) -> None:
        """Stop listening and remove this process's marker."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            (self.dir / self._me).unlink()
        with contextlib.suppress(OSError):
            self._tx.sendto(b"q", self._address(self._me))
        self._thread.join(timeout=2)
        self._rx.close()
        self._tx.close()
