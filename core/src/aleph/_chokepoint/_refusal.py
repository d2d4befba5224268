"""A call the chokepoint refused, carried from the synchronous decision to whoever records it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from aleph._errors import ToolError

__all__ = ["Refusal"]


class Refusal(Exception):
    """A refused call: the error for the caller, and how to record the refusal before raising it.

    The synchronous core raises it; the async service awaits ``record()``, the synchronous entry point
    runs it where it can wait. Never seen outside the chokepoint.
    """

    def __init__(self, error: ToolError, record: Callable[[], Coroutine[Any, Any, None]]) -> None:
        super().__init__(str(error))
        self.error = error
        self.record = record
