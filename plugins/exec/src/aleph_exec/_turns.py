"""Turns on a sandbox: commands of different principals never run in it at the same time.

Every run of a workspace goes through one zygote, in one PID namespace, as one user. A command there
can reach any other run's processes through ``/proc``: read its environment, and write into its
copy-on-write view of the workspace through ``/proc/<pid>/root``, a write the *other* run's transaction
then commits, judged under the other principal's policy and recorded on its row. Processes of one
user cannot be kept from each other's ``/proc`` entries without a PID namespace per run, so the
sandbox takes turns instead: runs of one principal (agent, channel and role, along the delegation
chain: the whole policy a call is judged by) share the sandbox as before, and a run of another
principal waits until every run of the current one is over and its processes are gone.

Turns are handed out first come, first served: once another principal waits, a new run of the current
one queues behind it, so a busy agent cannot starve another. A run waits at most its own timeout for
its turn, then fails with a message that says why.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable

from aleph_exec._capture import SandboxError

__all__ = ["PrincipalTurns", "TurnHold", "turn_key"]


def turn_key() -> str:
    """The running call's principal, as the turns tell principals apart (no session: a session is not a policy)."""
    # Imported here: the sandbox's modules also run on their own, without Aleph's core (there are no
    # principals then, and every run is the same caller's).
    try:
        from aleph import current_principal
    except ImportError:
        return ""
    principal = current_principal()
    if principal is None:
        return ""
    return "\x1e".join(f"{p.agent}\x1f{p.channel or ''}\x1f{p.role}" for p in (principal, *principal.chain))


class _Waiter:
    __slots__ = ("granted", "key", "wake")

    def __init__(self, key: str, wake: object) -> None:
        self.key = key
        self.wake = wake
        self.granted = False


class PrincipalTurns:
    """Who may start a run on the sandbox now: the principal whose runs are on it, or anyone when none are."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: str | None = None
        self._active = 0
        self._queue: deque[_Waiter] = deque()

    @property
    def active(self) -> int:
        """How many runs hold a turn now."""
        return self._active

    def try_enter(self, key: str) -> bool:
        """Take a turn at once if nobody waits and the sandbox is free or ``key``'s; never blocks."""
        with self._lock:
            if not self._queue and (self._active == 0 or self._owner == key):
                self._owner = key
                self._active += 1
                return True
            return False

    def leave(self) -> None:
        """Give a turn back once the run's processes are gone; wakes whoever may go next."""
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self._owner = None
            granted = self._grant()
        for waiter in granted:
            waiter.wake()  # type: ignore[operator]

    def enter(self, key: str, timeout: float) -> None:
        """Take a turn, waiting at most ``timeout`` seconds (a thread's caller)."""
        if self.try_enter(key):
            return
        event = threading.Event()
        waiter = self._join(key, event.set)
        if waiter.granted or event.wait(max(0.0, timeout)):
            return
        self._abandon(waiter, timeout)

    async def aenter(self, key: str, timeout: float) -> None:
        """Take a turn, waiting at most ``timeout`` seconds (an asyncio caller; cancelling gives it up)."""
        if self.try_enter(key):
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(lambda: future.done() or future.set_result(None))
            except RuntimeError:  # the waiter's loop is closed: nobody will run on this turn, so it goes back
                self.leave()

        waiter = self._join(key, wake)
        if waiter.granted:
            return
        try:
            await asyncio.wait_for(asyncio.shield(future), max(0.0, timeout))
        except TimeoutError:
            self._abandon(waiter, timeout)
        except BaseException:
            if self._abandon(waiter, None):
                self.leave()  # granted as the caller was cancelled: the turn goes back at once
            raise

    def _join(self, key: str, wake: object) -> _Waiter:
        waiter = _Waiter(key, wake)
        with self._lock:
            self._queue.append(waiter)
            self._grant()  # the sandbox may have become free between try_enter and here
        return waiter

    def _abandon(self, waiter: _Waiter, timeout: float | None) -> bool:
        """Stop waiting. True: the turn was granted meanwhile, and the caller holds it.

        Otherwise the waiter leaves the queue, and a wait that timed out raises.
        """
        with self._lock:
            if waiter.granted:
                return True
            self._queue.remove(waiter)
            granted = self._grant()
        for other in granted:
            other.wake()  # type: ignore[operator]
        if timeout is not None:
            raise SandboxError(
                f"the workspace's sandbox was busy with another agent's commands for {timeout:.0f} s: commands "
                "of different agents (or channels, or delegation chains) never run in one sandbox at the same "
                "time, since they could reach each other's processes; this one waited for its turn until its "
                "own timeout. Try again when the other agent's command is over, or give it a longer timeout."
            )
        return False

    def _grant(self) -> list[_Waiter]:
        """Hand turns to the head of the queue while it may go (called with the lock held)."""
        granted = []
        while self._queue:
            head = self._queue[0]
            if self._active and self._owner != head.key:
                break
            self._queue.popleft()
            self._owner = head.key
            self._active += 1
            head.granted = True
            granted.append(head)
        return granted


class TurnHold:
    """One run's turn: taken before the run starts, given back once, when its processes are gone.

    A run stopped in the background (its caller was cancelled) hands the turn to that stop
    (:meth:`after`), so the next principal's run cannot start while this one's processes still live.
    """

    __slots__ = ("_held", "_turns", "handed")

    def __init__(self, turns: PrincipalTurns | None) -> None:
        self._turns = turns
        self._held = False
        self.handed = False

    async def take(self, timeout: float) -> None:
        """Wait for the turn of the running call's principal (nothing to wait for without turns)."""
        if self._turns is not None:
            await self._turns.aenter(turn_key(), timeout)
            self._held = True

    def release(self) -> None:
        """Give the turn back (once)."""
        if self._held:
            self._held = False
            assert self._turns is not None
            self._turns.leave()

    def after(self, stop: Callable[[], None]) -> Callable[[], None]:
        """``stop``, then the turn given back: for a run stopped in the background."""
        self.handed = True

        def stop_then_release() -> None:
            try:
                stop()
            finally:
                self.release()

        return stop_then_release
