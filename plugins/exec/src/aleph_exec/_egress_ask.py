"""Asking a person about a host from the egress proxy, on the caller's own event loop and context."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["bridge_ask"]


def bridge_ask(ask: Callable[[str, int], Any], loop: asyncio.AbstractEventLoop, context: Any) -> Callable[..., Any]:
    """An ``ask`` the proxy's loop can await that runs ``ask`` on the caller's ``loop`` in its ``context``.

    The approval goes through the caller's chokepoint (its principal, its requester), so it must run
    there: the proxy only waits for the answer; cancelling the wait cancels the question.
    """

    async def bridged(host: str, port: int) -> bool:
        result: concurrent.futures.Future[bool] = concurrent.futures.Future()

        def start() -> None:
            task = loop.create_task(ask(host, port), context=context)

            def done(t: asyncio.Task[bool]) -> None:
                if result.cancelled():
                    return
                if t.cancelled():
                    result.cancel()
                elif t.exception() is not None:
                    result.set_exception(t.exception())  # type: ignore[arg-type]
                else:
                    result.set_result(t.result())

            task.add_done_callback(done)

            def abandoned(f: concurrent.futures.Future[bool]) -> None:
                if f.cancelled():
                    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nothing to cancel
                        loop.call_soon_threadsafe(task.cancel)

            result.add_done_callback(abandoned)

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the caller's loop is gone: nobody can be asked
            return False
        return await asyncio.wrap_future(result)

    return bridged
