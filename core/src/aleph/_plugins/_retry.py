"""Retrying a plugin's registration that failed only because another process held a lock.

Several servers starting together on a new data directory all create the same stores at once: a
family's SQLite file may answer "database is locked" to all but one of them for a moment. That is not
a broken plugin, so its registration is rolled back and tried again a few times before it counts as a
failure (which is then recorded and shown by ``aleph plugins``, ``aleph doctor`` and ``aleph serve``).
"""

from __future__ import annotations

import errno
import logging
import sys
import time
from collections.abc import Callable

__all__ = ["RETRY_DELAYS_S", "call_retrying", "is_contention"]

RETRY_DELAYS_S = (0.05, 0.2, 0.5, 1.0, 2.0)
"""Waits between attempts (about 4 s in all, longer than SQLite's own busy timeouts take to clear here)."""

log = logging.getLogger("aleph.plugins")


def is_contention(exc: BaseException) -> bool:
    """Whether ``exc`` says another process holds something for a moment (a lock, a busy file)."""
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    return isinstance(exc, OSError) and exc.errno in (errno.EAGAIN, errno.EBUSY, errno.EINTR)


def call_retrying(name: str, call: Callable[[], object], undo: Callable[[], None]) -> None:
    """Run ``call``; after a contention error, ``undo`` what it did and try again; other errors propagate."""
    for delay in RETRY_DELAYS_S:
        try:
            call()
            return
        except Exception as exc:
            if not is_contention(exc):
                raise
            log.info("plugin %r met contention while registering (%s); retrying in %.2f s", name, exc, delay)
            undo()
            time.sleep(delay)  # a back-off between attempts: the other process holds the lock for a moment
    call()
