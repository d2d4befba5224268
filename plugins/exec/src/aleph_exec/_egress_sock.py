"""A socket of the egress proxy, read and written with the event loop's ``sock_*`` calls.

The proxy's connections use plain non-blocking sockets instead of asyncio's transports and streams:
``loop.sock_recv_into`` and ``loop.sock_sendall`` make the system call at once and only wait on the
selector when the socket is not ready, so a relayed chunk costs one ``recv_into`` into a buffer the
relay allocated once and one ``send`` of a view of it: no transport callback, no stream buffer to copy
through, no future per chunk while data keeps coming. The flow control is the kernel's: a direction
reads its next chunk only when the previous one was sent, so at most one chunk per direction is held.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
import socket

__all__ = ["Stream", "connect"]


class Stream:
    """One connection's socket on the proxy's loop, with the bytes read past a head or a chunk line kept."""

    __slots__ = ("_buf", "loop", "sock")

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            # A head, a chunk line or a small answer goes out at once, never held back for an ACK.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.loop = loop
        self._buf = bytearray()  # read but not yet consumed (after a head or a chunk-size line)

    async def readuntil(self, separator: bytes, limit: int) -> bytes:
        """The bytes up to and including ``separator``, which must come within ``limit`` bytes.

        Raises :class:`asyncio.LimitOverrunError` past ``limit`` and :class:`asyncio.IncompleteReadError`
        when the peer ends first (as :meth:`asyncio.StreamReader.readuntil` does).
        """
        start = 0
        while True:
            found = self._buf.find(separator, start)
            if found >= 0:
                end = found + len(separator)
                if end > limit:
                    break
                out = bytes(self._buf[:end])
                del self._buf[:end]
                return out
            if len(self._buf) >= limit:
                break
            start = max(0, len(self._buf) - len(separator) + 1)
            data = await self.loop.sock_recv(self.sock, limit - len(self._buf))
            if not data:
                raise asyncio.IncompleteReadError(bytes(self._buf), None)
            self._buf += data
        raise asyncio.LimitOverrunError(f"no {separator!r} within {limit} bytes", len(self._buf))

    async def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (what is kept first); ``b""`` when the peer has ended."""
        if self._buf:
            out = bytes(self._buf[:n])
            del self._buf[:n]
            return out
        return await self.loop.sock_recv(self.sock, n)

    async def recv_into(self, buffer: bytearray) -> int:
        """Read into ``buffer`` (what is kept first); 0 when the peer has ended."""
        if self._buf:
            n = min(len(buffer), len(self._buf))
            buffer[:n] = self._buf[:n]
            del self._buf[:n]
            return n
        return await self.loop.sock_recv_into(self.sock, buffer)

    async def send(self, data: bytes | memoryview) -> None:
        """Send all of ``data`` (waits while the peer's side is full)."""
        await self.loop.sock_sendall(self.sock, data)

    def write_eof(self) -> None:
        """Tell the peer nothing more comes this way (the other way stays open)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


async def connect(loop: asyncio.AbstractEventLoop, address: str, port: int, family: int) -> Stream:
    """A connection to ``address`` (already resolved and checked) on ``port``; raises ``OSError``."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        code = sock.connect_ex((address, port))
        if code not in (0, errno.EINPROGRESS):
            raise OSError(code, f"connect to {address}:{port} failed: {os.strerror(code)}")
        if code and not _connected(sock, address, port):
            await loop.sock_connect(sock, (address, port))  # in progress: waits for it, raises its error
    except BaseException:
        sock.close()
        raise
    return Stream(sock, loop)


def _connected(sock: socket.socket, address: str, port: int) -> bool:
    """Whether a connection just begun is made already (on loopback and near hosts the handshake often is).

    Then it costs no turn of the loop. False while it is in progress; raises ``OSError`` when it failed.
    """
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    if not poller.poll(0):
        return False
    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if code:
        raise OSError(code, f"connect to {address}:{port} failed: {os.strerror(code)}")
    return True
