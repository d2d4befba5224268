"""A cheap wall-clock budget for tool calls: one watchdog task per event loop instead of one timer per call.

``asyncio.timeout`` schedules (and cancels) a timer handle on every call, which costs more than the rest
of the chokepoint together. Here a call registers its deadline in a dict (O(1)); a single watchdog task
wakes every ``TICK`` seconds while calls are in flight and cancels the tasks that overran. Budgets are
therefore enforced to within one tick.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["TICK", "run_with_budget"]

T = TypeVar("T")
TICK = 0.05


class _Watchdog:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.deadlines: dict[asyncio.Task[object], float] = {}
        self.expired: set[asyncio.Task[object]] = set()
        self.runner: asyncio.Task[None] | None = None

    def watch(self, task: asyncio.Task[object], deadline: float) -> None:
        self.deadlines[task] = deadline
        if self.runner is None or self.runner.done():
            self.runner = self.loop.create_task(self._run(), name="aleph-budget-watchdog")

    async def _run(self) -> None:
        while self.deadlines:
            await asyncio.sleep(TICK)
            now = time.monotonic()
            for task, deadline in list(self.deadlines.items()):
                if deadline <= now and task not in self.expired:
                    self.expired.add(task)
                    task.cancel()


_DOGS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watchdog] = weakref.WeakKeyDictionary()


async def run_with_budget(work: Awaitable[T], seconds: float) -> T:
    """Await ``work`` in the current task; raise TimeoutError if it runs longer than ``seconds``."""
    task = asyncio.current_task()
    if task is None:  # not inside a task (should not happen under asyncio): fall back to a timer
        async with asyncio.timeout(seconds):
            return await work
    loop = task.get_loop()
    dog = _DOGS.get(loop)
    if dog is None:
        dog = _DOGS[loop] = _Watchdog(loop)
    dog.watch(task, time.monotonic() + seconds)
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
