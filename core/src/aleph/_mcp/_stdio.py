"""The stdio transport to an MCP server, reading what the server writes in bounded pieces.

The SDK's ``stdio_client`` joins the server's output into one string until it sees a newline, so a
server that writes one endless line (a hostile or broken one) made the host hold it all: memory grew
without end, and each piece was copied onto the rest (quadratic time). Here a line longer than
:data:`MAX_LINE_BYTES` is read through to its newline and dropped, in pieces, and the session gets an
error in its place (a request waiting for it ends at its idle timeout); the process is started and
stopped as the SDK does it (its own process group; stdin closed, then SIGTERM, then SIGKILL to the group).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types as types
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

__all__ = ["MAX_LINE_BYTES", "bounded_stdio"]

log = logging.getLogger("aleph.mcp")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest message a stdio server may send (64 MiB); a result Aleph passes on is cut far below it."""
_PIECE = 64 * 1024
_GRACE_S = 2.0  # the SDK's: after stdin closes, before SIGTERM; and again before SIGKILL


class OversizedMessage(ValueError):
    """A line the server wrote was longer than :data:`MAX_LINE_BYTES`; it was dropped."""


async def _lines(stream: Any, limit: int) -> AsyncIterator[bytes | None]:
    """The stream's lines without their newline; None in place of a line longer than ``limit``."""
    buffer = bytearray()
    dropping = False
    while True:
        try:
            chunk = await stream.receive(_PIECE)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not dropping:
                    buffer += chunk[start:]
                    if len(buffer) > limit:
                        buffer.clear()
                        dropping = True
                break
            if dropping:
                dropping = False
                yield None
            elif len(buffer) + end - start > limit:
                buffer.clear()
                yield None
            else:
                buffer += chunk[start:end]
                yield bytes(buffer)
                buffer.clear()
            start = end + 1


def _parse(line: bytes | None) -> SessionMessage | Exception:
    if line is None:
        log.warning("an MCP server sent a message longer than %d bytes; it was dropped", MAX_LINE_BYTES)
        return OversizedMessage(f"the server sent a message longer than {MAX_LINE_BYTES} bytes; it was dropped")
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _stop(process: Any) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(_GRACE_S):
        while process.returncode is None:
            await anyio.sleep(0.01)
    if process.returncode is None:
        await terminate_posix_process_tree(process, _GRACE_S)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


@asynccontextmanager
async def bounded_stdio(params: StdioServerParameters, limit: int = MAX_LINE_BYTES) -> AsyncIterator[Any]:
    """Start the server of ``params`` and yield the SDK's ``(read_stream, write_stream)`` pair for it."""
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=None,  # inherited: the server's stderr is this process's descriptor 2, as with the SDK
        cwd=params.cwd,
        start_new_session=True,
    )
    stdout, stdin = process.stdout, process.stdin
    assert stdout is not None and stdin is not None, "the server is started with pipes"
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        async with read_writer:
            async for line in _lines(stdout, limit):
                try:
                    await read_writer.send(_parse(line))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
            with anyio.CancelScope(shield=True), suppress(Exception):  # drain: a server never blocks on a full pipe
                while True:
                    await stdout.receive(_PIECE)

    async def writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end instead of a request hanging

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tg.cancel_scope.cancel()
