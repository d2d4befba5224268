"""Bounded frames for ``aleph serve``: no client can make the server hold an unbounded message.

Over stdio the SDK reads whole lines, so one line without a newline would be buffered without end.
:class:`BoundedLines` reads the wire in bounded pieces: a line longer than the limit is read through
to its newline and dropped, and the server sees a line that is not JSON in its place (the SDK turns it
into an error and goes on with the next message). Over HTTP the SDK's body limit is set to the same size.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import IO

import anyio

__all__ = ["DROPPED_FRAME", "MIN_FRAME_BYTES", "BoundedLines", "frame_limit"]

log = logging.getLogger("aleph.serve")

MIN_FRAME_BYTES = 4 * 1024 * 1024
"""The smallest frame limit: 4 MiB."""
DROPPED_FRAME = "!aleph: frame dropped, larger than the limit\n"
"""What the server reads instead of an oversized line (not JSON: the SDK reports it and goes on)."""
_PIECE = 64 * 1024


def frame_limit(max_input_bytes: int) -> int:
    """The largest frame a client may send: room for the largest tool input and the envelope, at least 4 MiB."""
    return max(MIN_FRAME_BYTES, 2 * max_input_bytes + 64 * 1024)


class BoundedLines:
    """Lines of a binary stream as text, each at most ``limit`` bytes (longer ones replaced by a marker)."""

    def __init__(self, wire: IO[bytes], limit: int) -> None:
        self.wire = wire
        self.limit = limit
        self.dropped = 0
        """How many oversized lines were dropped."""

    def _next(self) -> str | None:
        line = self.wire.readline(self.limit + 1)
        if not line:
            return None
        if len(line) > self.limit and not line.endswith(b"\n"):
            while True:  # read the rest of the oversized line through, bounded piece by piece
                rest = self.wire.readline(_PIECE)
                if not rest or rest.endswith(b"\n"):
                    break
            self.dropped += 1
            log.warning("dropped a frame larger than %d bytes", self.limit)
            return DROPPED_FRAME
        return line.decode("utf-8", errors="replace")

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            line = await anyio.to_thread.run_sync(self._next, abandon_on_cancel=True)
            if line is None:
                return
            yield line
