"""Process supervision: the pids cgroups a run is held in, finding what a run left behind, reaping and killing.

:class:`Supervision` is the part of :class:`~aleph_exec._sandbox.WorkspaceSandbox` that pumps a run's
output, notices its end, and kills the whole run (its group, its cgroup and every process still carrying
the run's marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread

from aleph_exec._capture import RunResult, _Output, _write_some
from aleph_exec._processes import (
    _alive,
    _Cgroup,
    _CgroupPool,
    _children,
    _nspids,
    _proc_sweep,
    _reap_orphaned_inits,
    _reap_until_gone,
)
from aleph_exec._zygote_client import _Hub, _settle, _Zygote, _ZygoteRun

_EXIT_GRACE_S = 1.0


_TERM_GRACE_S = 0.5


def _shutdown(zygotes: list[_Zygote], cgroups: _CgroupPool | None) -> None:
    """Stop every zygote of a sandbox (they may sit in its cgroups), then remove the cgroups."""
    for zygote in list(zygotes):
        zygote.close(wait=True)
    zygotes.clear()
    if cgroups is not None:
        cgroups.clear()


class Supervision:
    """Pumping a run's output, noticing its end and killing everything it started."""

    def _unclaim(self, zygote: _Zygote, cgroup: _Cgroup | None) -> None:
        """Give back what a run took: its use of the zygote, and its cgroup once nothing of the run is in it."""
        self._release(zygote)
        if cgroup is not None:
            assert self._cgroups is not None
            self._cgroups.give(cgroup, self._zygote_pids())

    async def _run_in_thread(
        self,
        argv: list[str],
        cwd: Path,
        timeout: float,
        stdin: bytes | None,
        on_line: Callable[[str], None] | None,
        layer: Path | None = None,
        network: Any = None,
    ) -> RunResult:
        cancel = threading.Event()

        def job() -> RunResult:
            return self.run(
                argv,
                cwd=cwd,
                timeout=timeout,
                stdin=stdin,
                on_line=on_line,
                cancel=cancel,
                layer=layer,
                network=network,
            )

        try:
            return await anyio.to_thread.run_sync(job, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise

    def _run_is_over(self, run: _ZygoteRun, cgroup: _Cgroup | None) -> bool:
        """The command has exited and nothing of its run is left (what :meth:`_stop_zygote_run` would find)."""
        if run.lost:
            # The zygote died: its namespace goes with it; on the host, what it started may live on.
            return run.namespaced
        if run.returncode is None:
            return False
        if run.left == 0 or cgroup is None:
            return run.left == 0
        # The zygote counts every process of the namespace no other run accounts for; the cgroup says which are ours.
        zygotes = self._zygote_pids()
        return not any(pid not in zygotes and _alive(pid) for pid in cgroup.pids())

    async def _apump(
        self,
        run: _ZygoteRun,
        stdin: bytes | None,
        output: _Output,
        deadline: float,
    ) -> tuple[bool, str | None]:
        """:meth:`_pump` as event-loop callbacks: (timed out, why it was killed) once the run is over."""
        loop = asyncio.get_running_loop()
        run.loop = loop  # its egress door is watched here until a first connection (see serve_run)
        done: asyncio.Future[tuple[bool, str | None]] = loop.create_future()
        assert run.stdout is not None and run.stderr is not None
        # The run's pipes and socket sit in a private epoll (made with them, ahead of the run), which
        # sits in the loop's hub: a wake-up is one callback however many of them are ready.
        poller = run.poller
        readers = {run.stdout.fileno(): output.out, run.stderr.fileno(): output.err}
        sock = run.sock.fileno()
        stdin_fd = -1
        pending = memoryview(stdin or b"")
        timers: list[asyncio.TimerHandle] = []

        def write() -> None:
            nonlocal pending
            assert run.stdin is not None
            pending = _write_some(stdin_fd, pending)
            if not pending:
                poller.unregister(stdin_fd)
                run.stdin.close()

        def ready() -> None:
            # Everything ready is taken first, then decided on: at the end of a run the exit report and
            # the end of both pipes usually come together, and nothing is left to stop watching.
            if done.done():
                return  # over: the loop stops watching in a moment
            exited = run.returncode is not None
            ended = []
            for fd, _ in poller.poll(0):
                if fd == sock:
                    run.receive()
                    if run.returncode is not None:
                        ended.append(fd)
                elif fd == stdin_fd:
                    write()
                elif fd in readers:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        del readers[fd]
                        ended.append(fd)
                    elif killed := output.feed(readers[fd], chunk):
                        _settle(done, (False, killed))
                        return
            if run.returncode is not None:
                if not readers:
                    _settle(done, (False, None))
                    return
                if not exited:
                    # The command exited but a background descendant may hold the pipes: stop waiting soon.
                    timers.append(loop.call_later(_EXIT_GRACE_S, _settle, done, (False, None)))
            for fd in ended:
                poller.unregister(fd)

        if run.stdin is not None:
            if pending:
                stdin_fd = run.stdin.fileno()
                os.set_blocking(stdin_fd, False)
                poller.register(stdin_fd, select.EPOLLOUT)
            else:
                run.stdin.close()
        # The run is already under way: what it has sent meanwhile makes the poller ready at once.
        hub = _Hub.of(loop)
        watched = poller.fileno()
        hub.watch(watched, ready, deadline, partial(_settle, done, (True, "timeout")))
        try:
            result = await done
        finally:
            hub.forget(watched)
            for timer in timers:
                timer.cancel()
        if result == (False, None):
            output.flush()
        return result

    def _zygote_pids(self) -> set[int]:
        """Host pids of this sandbox's live zygotes (a retired one may still sit in a pooled cgroup)."""
        with self._lock:
            self._zygotes[:] = [z for z in self._zygotes if z.alive()]
            return {z.host_pid for z in self._zygotes if z.host_pid is not None}

    def _stop_zygote_run(self, run: _ZygoteRun, cgroup: _Cgroup | None) -> None:
        """SIGTERM, then SIGKILL, what is left of a zygote run (its cgroup, else through the zygote)."""

        def targets() -> list[int]:
            if cgroup is None:
                return []
            zygotes = self._zygote_pids()
            return [pid for pid in cgroup.pids() if pid not in zygotes and _alive(pid)]

        def count() -> int:
            if run.lost:
                return 0
            return len(targets()) if cgroup is not None else run.signal(0)

        def send(sig: int) -> None:
            if cgroup is None:
                run.signal(sig)
            for pid in targets():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

        try:
            if run.lost and not run.namespaced:
                self._kill_orphaned_run(run.marker, cgroup)
            # Fast path: the command has exited and the zygote saw nothing of it left.
            left = 0 if run.poll() is not None and run.left == 0 else count()
            for sig, grace in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, 2.0)):
                if not left and run.poll() is not None:
                    break
                send(sig)
                end = time.monotonic() + grace
                while time.monotonic() < end:
                    left = count()
                    if run.poll() is not None and not left:
                        break
                    time.sleep(0.002)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.wait(timeout=5)
        finally:
            run.close()

    def _kill_orphaned_run(self, marker: str, cgroup: _Cgroup | None) -> None:
        """SIGKILL what a run started by a zygote on the host left when that zygote died, and reap it.

        Its processes were re-parented to us (a subreaper without bubblewrap). Found by the cgroup, else
        by the run's marker; one that left its session and cleared its environment, without a cgroup,
        cannot be found (as without the zygote).
        """
        end = time.monotonic() + 2.0
        signalled: set[int] = set()
        while (targets := self._targets(cgroup, marker)) and time.monotonic() < end:
            for pid in targets:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            signalled |= targets
            time.sleep(0.002)
        _reap_until_gone(signalled)

    def _pump(
        self,
        proc: subprocess.Popen[bytes] | _ZygoteRun,
        stdin: bytes | None,
        output: _Output,
        deadline: float,
        cancel: threading.Event | None,
    ) -> tuple[bool, str | None]:
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, output.out)
        sel.register(proc.stderr, selectors.EVENT_READ, output.err)
        pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if pending:
                sel.register(proc.stdin, selectors.EVENT_WRITE, None)
            else:
                proc.stdin.close()
        exited_at: float | None = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if now >= deadline:
                    return True, "timeout"
                if cancel is not None and cancel.is_set():
                    return False, "cancelled"
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                    # The command exited but a background descendant still holds the pipes: stop here.
                    break
                for key, _ in sel.select(timeout=min(0.1, max(0.0, deadline - now))):
                    if key.data is None:
                        assert proc.stdin is not None
                        pending = _write_some(proc.stdin.fileno(), pending)
                        if not pending:
                            sel.unregister(proc.stdin)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    killed = output.feed(key.data, chunk)
                    if killed:
                        return False, killed
            output.flush()
            remaining = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(0.0, min(remaining, _EXIT_GRACE_S)))
            except subprocess.TimeoutExpired:
                if remaining <= _EXIT_GRACE_S:
                    return True, "timeout"
            return False, None
        finally:
            sel.close()

    def _kill_all(self, proc: subprocess.Popen[bytes], cgroup: _Cgroup | None, marker: str) -> None:
        """SIGTERM, then SIGKILL, the process group, the cgroup and every marked process; reap the child."""
        # The direct child's own children (bubblewrap's namespace init) may be re-parented to us.
        signalled: set[int] = set(_children(proc.pid))
        # bubblewrap's namespace init (pid 1 inside): its death ends every process of the namespace. In a
        # user namespace of our own, --die-with-parent does not reach it, so it is killed here.
        inits = {pid for pid in signalled if _nspids(pid)[1:] == [1]} if self.bwrap else set()
        for sig, grace in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, 2.0)):
            targets = self._targets(cgroup, marker) | {pid for pid in inits if _alive(pid)}
            signalled |= targets
            if not targets and proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            for pid in targets:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            end = time.monotonic() + grace
            while time.monotonic() < end:
                proc.poll()
                if proc.returncode is not None and not self._targets(cgroup, marker):
                    break
                time.sleep(0.002)
        for stream in (proc.stdout, proc.stderr, proc.stdin):
            if stream is not None:
                stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if self.bwrap is not None:
            _reap_orphaned_inits()
        _reap_until_gone(signalled)

    def _targets(self, cgroup: _Cgroup | None, marker: str) -> set[int]:
        # The cgroup lists every descendant exactly; a bubblewrap PID namespace dies with its init;
        # only without both do we sweep /proc for the run's marker (catches setsid'd descendants).
        if cgroup is not None:
            pids = set(cgroup.pids())
        elif self.bwrap is not None:
            return set()
        else:
            pids = set(_proc_sweep(marker))
        pids.discard(os.getpid())
        return {pid for pid in pids if _alive(pid)}
