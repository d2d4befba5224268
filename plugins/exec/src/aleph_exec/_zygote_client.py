"""The host's side of the zygote: starting it, staging a run, sending it, and following the run to its end.

The protocol is the zygote's (:mod:`aleph_exec._zygote`): a control socket for requests, a run socket
and the run's stdio descriptors passed with ``SCM_RIGHTS``, an exit report at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from aleph_exec._capture import SandboxError, TransactionUnavailable
from aleph_exec._egress import serve_run
from aleph_exec._egress_rules import RunNetwork
from aleph_exec._processes import _Cgroup, _reap_orphaned_inits, _zygote_host_pid

# A run's socket pair (ours, the zygote's), stdout and stderr pipes (read, write ends) and private epoll.
_Kit = tuple[socket.socket, socket.socket, int, int, int, int, select.epoll]


# A kit whose far ends the zygote holds already (see _Zygote.prepare): its id, our ends, the epoll.
_Armed = tuple[int, socket.socket, int, int, select.epoll]


_ZYGOTE_START_S = 10.0


_ZYGOTE_REPLY_S = 5.0


_ZYGOTE_RETRY_S = 60.0


_EXIT_REPORT = re.compile(rb'\{"exit": (-?\d+), "left": (\d+)\}')


_ZYGOTE_INLINE = 64 * 1024  # the zygote's MAX_INLINE: a larger request follows on the run socket


class _Zygote:
    """The host's side of one zygote: a bubblewrap running :mod:`aleph_exec._zygote` (protocol there)."""

    def __init__(self, key: tuple[bool, ...], control: socket.socket) -> None:
        self.key = key
        self.control = control
        self.proc: subprocess.Popen[bytes] | None = None
        self.host_pid: int | None = None
        self.active = 0
        self.retired = False
        self.namespaced = True  # in bubblewrap's PID namespace (else on the host, see _zygote.main)
        self.exited = False  # bwrap (or the zygote on the host) has exited and been reaped
        self._keeper: threading.Thread | None = None
        # The kit the zygote holds for the next run (see prepare), and the cgroup it was last sent to
        # enter (see _ZygoteRun.send); the lock also orders the messages that depend on them.
        self._spare: _Armed | None = None
        self.cgroup: str | None = None
        self._lock = threading.Lock()
        self._kit_ids = itertools.count(1)
        self.offered_port = 0
        """The port of every run's proxy listener, each in the run's own network namespace (network ``proxied``)."""
        self.proxy_error: str | None = None
        self.proxy_port = 0  # offered_port, once the egress proxy is there to serve the runs' listeners

    @classmethod
    def start(
        cls,
        template: list[str],
        key: tuple[bool, ...],
        *,
        namespaced: bool = True,
        preexec: Callable[[], None] | None = None,
        fds: list[int] | None = None,
    ) -> _Zygote:
        """Start the zygote (in bubblewrap when ``namespaced``) and wait for its ``ready``.

        :class:`SandboxError` says why it did not come.
        """
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [str(theirs.fileno()) if a == "{control}" else a for a in template]
        err_r, err_w = os.pipe()
        zygote = cls(key, control)
        zygote.namespaced = namespaced
        spawned = threading.Event()
        failure: list[BaseException] = []

        def keep() -> None:
            # bwrap --die-with-parent ties the sandbox to the *thread* that started it (PR_SET_PDEATHSIG):
            # this thread lives exactly as long as the sandbox, and reaps bwrap when it exits.
            try:
                zygote.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err_w,
                    pass_fds=[theirs.fileno(), *(fds or [])],
                    env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                    cwd="/",
                    preexec_fn=preexec,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                failure.append(exc)
                return
            finally:
                spawned.set()
            zygote.proc.wait()
            zygote.exited = True
            _reap_orphaned_inits()

        zygote._keeper = threading.Thread(target=keep, name="aleph-exec-zygote", daemon=True)
        zygote._keeper.start()
        spawned.wait()
        theirs.close()
        os.close(err_w)
        if zygote.proc is None:
            os.close(err_r)
            control.close()
            raise SandboxError(f"could not start bwrap: {failure[0] if failure else 'unknown error'}")
        try:
            ready, _, _ = select.select([control], [], [], _ZYGOTE_START_S)
            reply: dict[str, object] = {}
            if ready:
                reply = json.loads(control.recv(4096) or b"{}")
            if "ready" not in reply:
                raise SandboxError("no ready message")
            if "proxy_error" in reply:
                zygote.proxy_error = str(reply["proxy_error"])
            zygote.offered_port = int(reply.get("proxy_port", 0))
            if namespaced:
                zygote.host_pid = _zygote_host_pid(zygote.proc.pid, int(reply["ready"]))
            else:
                zygote.host_pid = zygote.proc.pid if int(reply["ready"]) == zygote.proc.pid else None
            if zygote.host_pid is None:
                # Without it a cgroup kill could hit the zygote, which sits in the run's cgroup.
                raise SandboxError("the zygote's pid was not found")
            # bwrap and its init hold copies of the inherited socket: switch to one only the zygote has.
            zygote.control, fresh = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                socket.send_fds(control, [b"control"], [fresh.fileno()])
            finally:
                fresh.close()
                control.close()
        except (OSError, ValueError, SandboxError) as exc:
            zygote.close(wait=True)
            os.set_blocking(err_r, False)
            detail = ""
            with contextlib.suppress(OSError):
                detail = os.read(err_r, 4096).decode("utf-8", "replace").strip()
            os.close(err_r)
            raise SandboxError(f"the sandbox server did not start ({exc}): {detail or 'no output'}") from None
        os.close(err_r)
        return zygote

    def alive(self) -> bool:
        # The keeper thread reaps it (no system call here). bwrap outlives a killed zygote by a moment;
        # a run sent then fails to send (only the zygote holds the control socket) and is retried on a new one.
        return self.proc is not None and not self.exited

    def stage(
        self,
        request: bytes,
        with_stdin: bool,
        cgroup: _Cgroup | None,
        later: Callable[..., object] | None = None,
        layer: int = -1,
        offered: bytes = b"",
    ) -> _ZygoteRun:
        """A run for the zygote, ready to go; :meth:`_ZygoteRun.send` hands it over.

        ``layer``: the run's layer (a detached mount), or -1; ``offered``: the id of the layer it goes
        on when that was offered ahead (:meth:`offer_layer`).

        It takes the kit the zygote already holds (see :meth:`prepare`), else makes one whose far ends
        go with the run. Those, and the read end of a stdin pipe, are ours to close after the send; by
        ``later(fn)`` when given (an event loop's ``call_soon``: the zygote holds its copies of the
        output pipes until it reaps the command, so ours may go a moment after the command has started).
        """
        in_r, in_w = os.pipe() if with_stdin else (-1, -1)
        with self._lock:
            # A long request follows on the run socket once the kit is known: it brings its own.
            armed = self._spare if len(request) <= _ZYGOTE_INLINE else None
            if armed is not None:
                self._spare = None
        if armed is not None:
            kit_id, ours, out_r, err_r, poller = armed
            run = _ZygoteRun(ours, in_w, out_r, err_r, poller)
            run.staged = _Staged(b"%d" % kit_id, [], (), in_r, cgroup, request, later, layer, offered)
        else:
            ours, theirs, out_r, out_w, err_r, err_w, poller = _new_kit()
            run = _ZygoteRun(ours, in_w, out_r, err_r, poller)
            far = (theirs, _Fd(out_w), _Fd(err_w))
            run.staged = _Staged(
                b"+", [theirs.fileno(), out_w, err_w], far, in_r, cgroup, request, later, layer, offered
            )
        run.zygote = self
        run.namespaced = self.namespaced
        return run

    def prepare(self) -> None:
        """Hand the zygote the next run's kit now, between runs: the run then passes no descriptors.

        The kit (:func:`_new_kit`) goes in a ``kit`` message; the zygote keeps its far ends for the
        run that names it, and ours are closed here, off that run's path.
        """
        if self._spare is not None or self.retired:
            return
        ours, theirs, out_r, out_w, err_r, err_w, poller = _new_kit()
        kept = False
        with self._lock:
            if self._spare is None and not self.retired:
                kit_id = next(self._kit_ids)
                try:
                    socket.send_fds(self.control, [b"kit %d" % kit_id], [theirs.fileno(), out_w, err_w])
                except OSError:
                    pass  # gone: the next run finds out
                else:
                    self._spare = (kit_id, ours, out_r, err_r, poller)
                    kept = True
        theirs.close()
        os.close(out_w)
        os.close(err_w)
        if not kept:
            _close_armed((0, ours, out_r, err_r, poller))

    def offer_layer(self, layer: int) -> bytes | None:
        """Hand the zygote a fresh layer (a detached mount) ahead of the run that will use it; its id.

        The zygote mounts the layer's overlay while idle (message ``layer <id>``); a run naming the id
        then starts on it at once. None when it could not be sent (the zygote is gone or retired).
        """
        with self._lock:
            if self.retired:
                return None
            layer_id = b"%d" % next(self._kit_ids)
            try:
                socket.send_fds(self.control, [b"layer " + layer_id], [layer])
            except OSError:
                return None
        return layer_id

    def send_run(self, staged: _Staged) -> None:
        """Send the message that starts a staged run (step 3 of the protocol); a long request follows it."""
        fds, flags, request = staged.fds, b"", staged.request
        if staged.stdin >= 0:
            fds.append(staged.stdin)
            flags += b"i"
        cgroup = staged.cgroup
        with self._lock:  # the cgroup we were last sent to enter is the one the zygote will be in
            if cgroup is not None and cgroup.name != self.cgroup:
                fds.append(cgroup.procs_fd())
                flags += b"c"
            if staged.layer >= 0:
                fds.append(staged.layer)
                flags += b"l"
            head = b"go %s %s" % (staged.kit, flags + b"p %s" % staged.offered if staged.offered else flags or b"-")
            if len(request) > _ZYGOTE_INLINE:
                socket.send_fds(self.control, [head + b" %d" % len(request)], fds)
            elif fds:
                socket.send_fds(self.control, [head, b"\0", request], fds)
            else:
                self.control.sendmsg([head, b"\0", request])
            if cgroup is not None:
                self.cgroup = cgroup.name

    def forget_cgroup(self) -> None:
        """After a failed start: the zygote may not have entered the cgroup it was sent, so send it again."""
        with self._lock:
            self.cgroup = None

    def retire(self) -> None:
        """No new runs; the zygote stops once the runs it has are over."""
        self.retired = True
        if self.active == 0:
            self.close(wait=False)

    def close(self, *, wait: bool) -> None:
        """Close the control socket: the zygote kills its runs and exits, and bwrap with it."""
        self.control.close()
        with self._lock:
            armed, self._spare = self._spare, None
        if armed is not None:
            _close_armed(armed)
        if wait and self._keeper is not None:
            self._keeper.join(_ZYGOTE_REPLY_S)
            if self._keeper.is_alive() and self.proc is not None:
                self.proc.kill()
                self._keeper.join()


@dataclass(slots=True)
class _Staged:
    """A run staged for its zygote (see :meth:`_ZygoteRun.send` and step 3 of the protocol)."""

    kit: bytes  # the id of the kit the zygote holds, or b"+": its far ends go with the run
    fds: list[int]  # those far ends, when they go with it
    far: tuple[socket.socket | _Fd, ...]  # ours to close after the send (the same far ends)
    stdin: int  # the read end of the run's stdin pipe, or -1
    cgroup: _Cgroup | None
    request: bytes
    later: Callable[..., object] | None
    layer: int = -1  # the run's layer, a detached mount (flag ``l``), or -1
    offered: bytes = b""  # the id of the run's layer when the zygote holds it already (flag ``p``), or b""

    def close_far(self) -> None:
        for end in self.far:
            end.close()
        if self.stdin >= 0:
            os.close(self.stdin)
            self.stdin = -1
        if self.layer >= 0:
            os.close(self.layer)
            self.layer = -1


class _Fd:
    """A bare file descriptor with the ``fileno``, ``close`` and ``closed`` the pumps use (no buffer, no fstat)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


class _ZygoteRun:
    """A run started by the zygote, shaped like the parts of ``Popen`` the pump uses."""

    def __init__(self, sock: socket.socket, stdin: int, stdout: int, stderr: int, poller: select.epoll) -> None:
        self.sock = sock
        self.poller = poller  # stdout, stderr and the socket, for the event loop (see _apump)
        self.staged: _Staged | None = None
        self.zygote: _Zygote | None = None
        self.stdin = _Fd(stdin) if stdin >= 0 else None
        self.stdout = _Fd(stdout)
        self.stderr = _Fd(stderr)
        self.returncode: int | None = None
        self.marker = ""
        self.namespaced = True  # False: a zygote on the host, whose death does not end the run's processes
        self.left = 0
        self.lost = False
        self.failure: Exception | None = None
        self._buf = b""
        self._alive: int | None = None
        self.net: RunNetwork | None = None  # its egress proxy registration (network proxied)
        self.door: Callable[[], None] | None = None  # stops the proxy serving the run's own listener
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop driving the run (see _apump), if one

    def send(self) -> None:
        """Hand the staged run to the zygote (:meth:`_Zygote.stage`); :class:`SandboxError` if it is gone."""
        staged = self.staged
        assert staged is not None and self.zygote is not None
        self.staged = None
        try:
            self.zygote.send_run(staged)
            if len(staged.request) > _ZYGOTE_INLINE:
                self.sock.setblocking(True)  # the zygote reads it as it comes
                self.sock.sendall(staged.request)
                self.sock.setblocking(False)
        except OSError as exc:
            staged.close_far()
            self.close()
            raise SandboxError(f"the sandbox server is gone ({exc})") from None
        if not staged.far and staged.stdin < 0 and staged.layer < 0:
            return  # the zygote held the kit already: nothing of ours to close
        if staged.later is not None:
            staged.later(staged.close_far)
        else:
            staged.close_far()

    def _read(self, timeout: float) -> None:
        """Take the messages that arrive within ``timeout``."""
        if not self.lost and select.select([self.sock], [], [], timeout)[0]:
            self.receive()

    def receive(self) -> None:
        """Take what the socket holds (non-blocking: nothing there yet is not an end)."""
        if self.lost:
            return
        try:
            if self.net is None:
                data = self.sock.recv(65536)
            else:  # network proxied: the run's listener comes first, with {"net": 1} (SCM_RIGHTS)
                data, fds, _, _ = socket.recv_fds(self.sock, 65536, 1)
                for fd in fds:
                    self._serve_door(socket.socket(fileno=fd))
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.lost = True
            if self.returncode is None:
                self.returncode = -signal.SIGKILL
                self.failure = SandboxError(
                    "the sandbox server stopped during the run (killed or crashed); the next run starts a new one"
                )
            return
        self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            report = _EXIT_REPORT.fullmatch(line)  # the zygote's fixed form of the one message every run gets
            if report is not None:
                self.returncode, self.left = int(report[1]), int(report[2])
                continue
            message = json.loads(line)
            if "exit" in message:
                self.returncode, self.left = message["exit"], message["left"]
            elif "net" in message:
                pass  # its listener came with it (above)
            elif "alive" in message:
                self._alive = message["alive"]
            elif "error" in message:
                self.returncode = 127
                self.failure = (
                    TransactionUnavailable(message["error"]) if message.get("layer") else OSError(message["error"])
                )
                if self.zygote is not None:
                    self.zygote.forget_cgroup()

    def _serve_door(self, listener: socket.socket) -> None:
        """Have the egress proxy accept on the run's own listener: what arrives there is this run's."""
        if self.net is None or self.door is not None or self.net.closed:
            listener.close()
            return
        self.door = serve_run(listener, self.net, self.loop)

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float) -> int:
        end = time.monotonic() + timeout
        while self.returncode is None:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired("zygote run", timeout)
            self._read(remaining)
        return self.returncode

    def signal(self, signo: int) -> int:
        """Have the zygote send ``signo`` (0: none) to the run; how many of its processes are still there."""
        if self.lost:
            return 0
        self._alive = None
        try:
            self.sock.sendall(json.dumps({"signal": signo}).encode() + b"\n")
        except OSError:
            self.lost = True
            return 0
        end = time.monotonic() + _ZYGOTE_REPLY_S
        while self._alive is None and not self.lost and time.monotonic() < end:
            self._read(end - time.monotonic())
        return self._alive or 0

    def close(self) -> None:
        door, self.door = self.door, None
        if door is not None:
            door()
        if self.staged is not None:  # never sent
            self.staged.close_far()
            self.staged = None
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.sock.close()
        self.poller.close()


def _fsencode(text: str) -> bytes:
    """``text`` as the bytes a command line or environment carries (``os.fsencode`` without its checks)."""
    return text.encode("utf-8", "surrogateescape")


def _new_kit() -> _Kit:
    """A run's socket pair, stdout and stderr pipes, and the private epoll of our ends."""
    # Non-blocking at both ends: the zygote never waits on a host, and the host reads when polled.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    poller = select.epoll()
    for fd in (out_r, err_r, ours.fileno()):
        poller.register(fd, select.EPOLLIN)
    return ours, theirs, out_r, out_w, err_r, err_w, poller


def _close_armed(armed: _Armed) -> None:
    _, ours, out_r, err_r, poller = armed
    ours.close()
    poller.close()
    os.close(out_r)
    os.close(err_r)


class _Hub:
    """The event loop's one reader for the zygote runs on it, and its one timer for their deadlines.

    A run's pipes and socket sit in the run's own epoll, and that epoll in the hub's, which the loop
    watches for good: starting and ending a run adds and removes a dict entry instead of a loop reader
    and a timer each. The timer is set for the earliest deadline (as the chokepoint's budget watchdog).
    A run's epoll leaves the hub's when the run closes it.
    """

    _hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Hub] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # weak: _hubs keeps this hub as long as its loop lives, no longer
        self.epoll = select.epoll()
        self.runs: dict[int, tuple[Callable[[], None], float, Callable[[], None]]] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.wake_at = math.inf
        loop.add_reader(self.epoll.fileno(), self._ready)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _Hub:
        hub = cls._hubs.get(loop)
        if hub is None:
            hub = cls._hubs[loop] = cls(loop)
        return hub

    def watch(self, fd: int, ready: Callable[[], None], deadline: float, expire: Callable[[], None]) -> None:
        """Call ``ready()`` while ``fd`` is readable, ``expire()`` once ``deadline`` (``time.monotonic``) passes."""
        self.epoll.register(fd, select.EPOLLIN)
        self.runs[fd] = (ready, deadline, expire)
        if deadline < self.wake_at:
            self._set(deadline)

    def forget(self, fd: int) -> None:
        del self.runs[fd]

    def _ready(self) -> None:
        for fd, _ in self.epoll.poll(0):
            entry = self.runs.get(fd)
            if entry is not None:
                entry[0]()
                continue
            with contextlib.suppress(OSError):  # over, and its run has not closed it yet
                self.epoll.unregister(fd)

    def _set(self, when: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        loop = self._loop()
        if loop is None or when == math.inf:
            self.timer, self.wake_at = None, math.inf
            return
        self.wake_at = when
        # Deadlines are on time.monotonic; call_later puts them on the loop's own clock.
        self.timer = loop.call_later(max(0.0, when - time.monotonic()), self._expire)

    def _expire(self) -> None:
        self.timer = None
        now = time.monotonic()
        earliest = math.inf
        for _, deadline, expire in list(self.runs.values()):
            if deadline <= now:
                expire()
            elif deadline < earliest:
                earliest = deadline
        self._set(earliest)


def _settle(done: asyncio.Future[tuple[bool, str | None]], result: tuple[bool, str | None]) -> None:
    if not done.done():
        done.set_result(result)
