"""A stdio transport that notices the moment a server's output ends.

A stdio server that dies (SIGKILL, a crash) closes its stdout; the SDK's session then quietly stops
reading, and without this the manager would learn of it only at the next health probe. The wrapper
sets an event when the read stream ends, so the server's tools are withdrawn at once and the
restart policy starts.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters

from aleph._mcp._stdio import bounded_stdio

__all__ = ["EofWatch", "watched_stdio"]


class EofWatch:
    """A read stream proxy that sets ``ended`` when the stream it wraps reaches its end."""

    def __init__(self, inner: Any, ended: anyio.Event) -> None:
        self._inner = inner
        self.ended = ended

    def __getattr__(self, name: str) -> Any:  # e.g. the per-message ``last_context`` of a context stream
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        """The next message; sets ``ended`` when there is none left."""
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended.set()
            raise

    async def aclose(self) -> None:
        """Close the wrapped stream."""
        await self._inner.aclose()

    def __aiter__(self) -> EofWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> EofWatch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def watched_stdio(params: StdioServerParameters, ended: anyio.Event) -> Any:
    """The server's stdio transport (read in bounded pieces) whose read stream sets ``ended`` when its output ends."""
    async with bounded_stdio(params) as (read, write):
        yield EofWatch(read, ended), write
