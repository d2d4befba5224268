"""A cheap wall-clock budget for tool calls: one timer per event loop instead of one timer per call.

``asyncio.timeout`` schedules (and cancels) a timer handle on every call, which costs more than the rest
of the chokepoint together. Here a call registers its deadline in a dict (O(1)). One timer per loop is
set for the earliest deadline it knows of; a call whose deadline is later than that timer (the usual
case: calls with the same budget, one after another) schedules nothing. When the timer fires it
cancels the tasks that overran and sets itself for the next deadline still registered, if any. A
finished call only removes its deadline: the timer may fire with nothing to do, which costs less than
cancelling and rescheduling it on every call.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["run_with_budget"]

T = TypeVar("T")


class _Watchdog:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: _DOGS holds this watchdog for as long as its loop lives, and no longer.
        self._loop = weakref.ref(loop)
        self.deadlines: dict[asyncio.Task[object], float] = {}
        self.expired: set[asyncio.Task[object]] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.wake_at = math.inf

    def watch(self, task: asyncio.Task[object], loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        deadline = self.deadlines[task] = loop.time() + seconds
        if deadline < self.wake_at:
            self._set(loop, deadline)

    def _set(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.wake_at = when
        self.timer = loop.call_at(when, self._fire) if when < math.inf else None

    def _fire(self) -> None:
        self.timer = None
        loop = self._loop()
        if loop is None:
            return
        now = loop.time()
        earliest = math.inf
        for task, deadline in list(self.deadlines.items()):
            if deadline <= now:
                if task not in self.expired:
                    self.expired.add(task)
                    task.cancel()
            elif deadline < earliest:
                earliest = deadline
        self._set(loop, earliest)


_DOGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = weakref.WeakKeyDictionary()


async def run_with_budget(work: Awaitable[T], seconds: float) -> T:
    """Await ``work`` in the current task; raise TimeoutError if it runs longer than ``seconds``."""
    task = asyncio.current_task()
    if task is None:  # not inside a task (should not happen under asyncio): fall back to a timer
        async with asyncio.timeout(seconds):
            return await work
    loop = task.get_loop()
    # Kept on the loop itself when it takes attributes (asyncio's do): a weak-dictionary look-up builds a
    # weak reference on every call. The watchdog refers to its loop weakly, so neither keeps the other.
    dog: _Watchdog | None = getattr(loop, "_aleph_watchdog", None)
    if dog is None:
        dog = _DOGS.get(loop)
        if dog is None:
            dog = _DOGS[loop] = _Watchdog(loop)
        try:
            loop._aleph_watchdog = dog  # type: ignore[attr-defined]
        except AttributeError:  # a loop without a __dict__ (uvloop): the weak dictionary alone
            pass
    dog.watch(task, loop, seconds)
    try:
        return await work
    except asyncio.CancelledError:
        if task in dog.expired:
            task.uncancel()
            raise TimeoutError from None
        raise
    finally:
        dog.deadlines.pop(task, None)
        if task in dog.expired:
            dog.expired.discard(task)
