"""Small timing helpers shared by the benchmarks (figures, not assertions)."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable


def per_call_us(fn: Callable[[], object], n: int, repeat: int = 5) -> float:
    """Best-of-``repeat`` mean microseconds per call of a sync ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def alternating_us(fns: list[Callable[[], object]], n: int, rounds: int = 10, *, cpu: bool = False) -> list[float]:
    """Best per-call µs of each sync ``fn``, timed in turns (a, b, a, b, ...); see :func:`alternating_us_async`."""
    clock = time.process_time if cpu else time.perf_counter
    best = [float("inf")] * len(fns)
    batch = max(1, n // rounds)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = clock()
            for _ in range(batch):
                fn()
            best[i] = min(best[i], (clock() - start) / batch * 1e6)
    return best


def per_call_us_async(fn: Callable[[], Awaitable[object]], n: int, repeat: int = 5) -> float:
    """Best-of-``repeat`` mean microseconds per awaited call, measured inside one event loop."""

    async def run() -> float:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(n):
                await fn()
            best = min(best, (time.perf_counter() - start) / n * 1e6)
        return best

    return asyncio.run(run())


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``samples``."""
    return statistics.quantiles(samples, n=100, method="inclusive")[max(0, min(98, round(q * 100) - 1))]


def alternating_us_async(
    fns: list[Callable[[], Awaitable[object]]], n: int, rounds: int = 10, *, cpu: bool = False
) -> list[float]:
    """Best per-call µs of each awaited ``fn``, timed in turns (a, b, a, b, ...) inside one event loop.

    Taking turns in short batches puts a baseline and its measured call under the same machine load, so a
    burst of load elsewhere moves both rather than the ratio. ``cpu=True`` times this process's CPU time
    instead of the wall clock: on a machine shared with other work, time spent waiting for a core is not
    counted (use it only for calls that never wait on I/O).
    """
    clock = time.process_time if cpu else time.perf_counter

    async def run() -> list[float]:
        best = [float("inf")] * len(fns)
        batch = max(1, n // rounds)
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                start = clock()
                for _ in range(batch):
                    await fn()
                best[i] = min(best[i], (clock() - start) / batch * 1e6)
        return best

    return asyncio.run(run())
