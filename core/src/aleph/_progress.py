"""Tool progress events: one process-wide handler slot, notified outside the lock.

The handler observes; it never changes a call. One that raises is logged (once per handler) and the
call goes on as if it had returned.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ToolProgressCallback",
    "get_tool_progress_handler",
    "notify_tool_result",
    "notify_tool_start",
    "notify_tool_streaming_chunk",
    "set_tool_progress_handler",
]


@runtime_checkable
class ToolProgressCallback(Protocol):
    """Receives progress of tool calls: native tools and MCP ``notifications/progress`` alike."""

    def on_tool_start(self, tool_name: str, args_summary: str) -> None:
        """A call started; ``args_summary`` is a short, redacted summary of its arguments."""

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None:
        """A call finished."""

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        """A running call produced output (a line of a shell command, an MCP progress message)."""


_lock = threading.Lock()
_handler: ToolProgressCallback | None = None
_failed: set[int] = set()  # ids of handlers whose failure was logged already
log = logging.getLogger("aleph")
CHUNK_SCRUBBER: ContextVar[Callable[[str], str] | None] = ContextVar("aleph_chunk_scrubber", default=None)
"""Set by the chokepoint while a call that was given secret values runs: chunks pass through it."""


def set_tool_progress_handler(handler: ToolProgressCallback | None) -> ToolProgressCallback | None:
    """Install ``handler`` process-wide (None clears it); returns the previous one."""
    global _handler
    with _lock:
        previous, _handler = _handler, handler
    return previous


def get_tool_progress_handler() -> ToolProgressCallback | None:
    """The installed handler, if any (reading one reference is atomic, so no lock on the hot path)."""
    return _handler


def call_handler(handler: ToolProgressCallback, method: Callable[..., Any], *args: Any) -> None:
    """Call ``method`` (one of ``handler``'s); what it raises is logged, once per handler, and dropped."""
    try:
        method(*args)
    except Exception:
        if id(handler) not in _failed:
            _failed.add(id(handler))
            log.exception("the tool progress handler %r failed; calls go on without its notice", handler)


def notify_tool_start(tool_name: str, args_summary: str) -> None:
    """Tell the handler (if any) that ``tool_name`` started."""
    handler = get_tool_progress_handler()
    if handler is not None:
        call_handler(handler, handler.on_tool_start, tool_name, args_summary)


def notify_tool_result(tool_name: str, result_summary: str, success: bool) -> None:
    """Tell the handler (if any) that ``tool_name`` finished."""
    handler = get_tool_progress_handler()
    if handler is not None:
        call_handler(handler, handler.on_tool_result, tool_name, result_summary, success)


def notify_tool_streaming_chunk(tool_name: str, chunk: str) -> None:
    """Pass a chunk of live output to the handler (if any). The handler runs outside the lock."""
    handler = get_tool_progress_handler()
    if handler is not None:
        scrub = CHUNK_SCRUBBER.get()
        call_handler(handler, handler.on_tool_streaming_chunk, tool_name, scrub(chunk) if scrub else chunk)
