"""The zygote: a small server, one per workspace sandbox, that starts the runs of that workspace.

Executed by path as ``python -I -S _zygote.py CONTROL_FD SELF_LIMITS [host]``, inside ``bwrap`` or, when
there is no bubblewrap, on the host (``host``); standard library only, and it never imports ``aleph``.
Starting bubblewrap per run costs several times a bare process spawn, and a run's limits and cgroup
need work between fork and exec that CPython can only do by a slow ``fork``, so
:class:`aleph_exec.WorkspaceSandbox` starts one server per workspace and asks it for each run instead.
What stays per run: the process (its own session and process group), its pids cgroup, rlimits,
environment, working directory, pipes and temporary directory.

Arguments (after the script path):
* ``CONTROL_FD``: this end of an ``AF_UNIX`` ``SOCK_SEQPACKET`` socketpair with the host.
* ``SELF_LIMITS``: JSON ``{"AS": [soft, hard], ...}``, ``resource.RLIMIT_<name>`` values the server sets on
  itself at start so every run inherits them (those fixed per sandbox: address space, file size, core).
* ``host``: no PID namespace. The server ends with the thread that started it (``PR_SET_PDEATHSIG``
  sends it ``SIGTERM``, on which it kills every process of its runs, then exits; in bubblewrap
  ``--die-with-parent`` and the namespace do that), and everything it looks at is its own descendants.

The server is a subreaper, so every process a run starts stays its descendant (an orphan comes back
to it, not to init): :func:`processes` lists a run's processes from the ``children`` lists of
``/proc``, in a namespace or on a host full of other processes alike. It makes itself non-dumpable,
so the commands it starts (same uid, no capabilities) cannot ptrace it or take its file descriptors;
they can still kill it, which fails the runs in flight and makes the host start a new one (on the
host, the host then kills what those runs left, by cgroup or marker).

Protocol (the request as below; on a run socket, JSON objects one per line):

1. server → host, control socket: ``{"ready": <pid in the namespace>}``.
2. host → server, control socket: the payload ``control`` carrying, by ``SCM_RIGHTS``, one end of a fresh
   socketpair that becomes the control socket. bubblewrap and its init keep copies of the inherited
   one; only this server holds the fresh one.
3. host → server, control socket, one message per run (one wake-up):
   ``go <kit> <flags>``, a NUL byte and the request. A run's *kit* is its run socket (one end of a
   fresh non-blocking ``AF_UNIX`` ``SOCK_STREAM`` socketpair: the rest of the run's traffic goes over
   it, so concurrent runs never share a channel) and the write ends of its stdout and stderr pipes.
   The host hands the next run's kit over between runs, in a message ``kit <id>`` carrying those three
   fds by ``SCM_RIGHTS``, and ``<kit>`` names it; ``+`` says the three come with this message instead.
   ``<flags>`` says which fds come with it after those: ``i``, the read end of the run's stdin (else
   ``/dev/null``); ``c``, the ``cgroup.procs`` of the run's pids cgroup opened for writing (``/sys`` is
   not mounted in the sandbox), sent only when the server is not already in that cgroup. A request
   longer than ``MAX_INLINE`` bytes comes as ``go <kit> <flags> <length>``, and its bytes follow on the
   run socket. A run with no kit to take, or a kit that never came, gets its run socket closed.
4. The request: NUL-separated fields, as a command line and an environment are NUL-free C strings:
   ``id, cwd, cgroup name ("" for none), CPU soft, CPU hard, NOFILE soft, NOFILE hard, NPROC soft, NPROC
   hard, argc, argv[0..argc), then name, value, name, value, ...`` for the environment. The server adds
   ``ALEPH_SANDBOX_RUN=<id>`` to the environment and gives the run a private ``/tmp/aleph-run-<random>``
   (mode 0700; the next one is made while idle), to which it sets ``TMPDIR``. It sets its own soft
   limits to the run's (see :meth:`Zygote.spawn`), moves itself into the run's cgroup unless it is there
   already (it stays: moving back would cost a second migration per run; the host leaves it out of what
   it kills and counts it in ``pids.max``), ``posix_spawnp``s the command (new session, the three fds as
   0/1/2, signal dispositions reset; ``argv[0]`` looked up in the run's ``PATH``) from ``cwd``, puts its
   open-file soft limit back and sets the command's limits with ``prlimit``. It keeps its copies of
   stdout and stderr until the command is reaped, so the host sees their end together with the exit
   report. When
   nothing could be started it answers ``{"error": "<why>"}`` and the run is over.
5. server → host, run socket: ``{"exit": <returncode as in subprocess>, "left": <n>}`` once the command is
   reaped; ``left`` counts the processes of the namespace that no other open run accounts for (what
   this run may have left behind, zombies included). The server is a subreaper, so every process a
   run starts stays its descendant: with no other run open, an empty children list means ``left`` is 0.
6. host → server, run socket: ``{"signal": <signo>}`` sends that signal (0: none) to every process of the
   run (its process group or session, or an environment carrying ``ALEPH_SANDBOX_RUN=<id>``, and once the
   command is reaped every process no other open run accounts for); answer ``{"alive": <n>}``, the
   processes of the run still present (signalled ones until reaped).
7. The host closes the run socket when it is done: unless ``left`` was 0, the server SIGKILLs what is
   left of the run and every other process of the namespace no open run accounts for (one that left
   its session and cleared its environment included); it removes the run's temporary directory and
   forgets it. When the host closes the control socket, the server kills every run and exits;
   bubblewrap then tears the namespace down.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time

MARKER = "ALEPH_SANDBOX_RUN"
MARKER_B = MARKER.encode()
MAX_FDS = 6
MAX_KITS = 4
MAX_INLINE = 64 * 1024  # a request up to this size comes with the fds, in the same control message
MAX_LINE = 8 * 1024 * 1024
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
DYING_POLL_S = 0.005  # how often killed processes are looked for, until they are reaped
SHUTDOWN_S = 5.0  # the longest the server waits for killed descendants to be reaped before it exits
CLOSER_DELAY_S = 0.02  # how long the closer waits before it tears a namespace down


RLIMITS = {name: getattr(resource, f"RLIMIT_{name}") for name in ("AS", "CORE", "CPU", "FSIZE", "NOFILE", "NPROC")}
CPU, NOFILE, NPROC = RLIMITS["CPU"], RLIMITS["NOFILE"], RLIMITS["NPROC"]


def encode(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class Run:
    """One command started for the host."""

    def __init__(self, sock: int, fds: list[int], stdin: int, cgroup: int, layer: int = -1) -> None:
        self.sock = sock  # the run socket's fd (non-blocking: the host makes it so)
        self.fds = fds  # stdout and stderr
        self.given = (stdin, cgroup, layer)  # until the start: descriptors that came with the request (-1: none)
        self.buf = b""
        self.id = ""
        self.pid = 0
        self.tmp = ""
        self.signalled: set[int] = set()
        self.strays: set[int] | None = None  # what was left when the command was reaped
        self.expect = 0  # bytes of a request still to come on the run socket

    def send(self, message: dict[str, object]) -> None:
        self.write(encode(message))

    def write(self, line: bytes) -> None:
        data = memoryview(line)
        try:
            while data:
                data = data[os.write(self.sock, data) :]
        except OSError:
            pass  # the host is gone or stuck; the run ends when its socket is read as closed

    def members(self) -> set[int]:
        """Pids of the run's processes in this namespace: its session or group, or its marker."""
        if not self.pid:
            return set()
        needle = f"{MARKER}={self.id}".encode()
        found = set()
        for name in processes():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                if self.pid in (int(fields[2]), int(fields[3])):
                    found.add(int(name))
                    continue
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in fh.read():
                        found.add(int(name))
            except (OSError, IndexError, ValueError):
                continue
        return found

    def signal(self, signo: int, others: set[int]) -> int:
        """Send ``signo`` (0: none) to the run's processes and ``others``; how many of them still exist.

        Signalled ones count until they are reaped.
        """
        targets = self.members() | others
        if signo:
            for pid in targets:
                try:
                    os.kill(pid, signo)
                except OSError:
                    pass
            self.signalled |= targets
        self.signalled = {pid for pid in self.signalled if os.path.exists(f"/proc/{pid}")}
        return len(targets | self.signalled)


class Zygote:
    """The server loop: one control socket, one socket per run, a pidfd per running command.

    A command's exit wakes the loop through its pidfd, not through ``SIGCHLD``: no signal interrupts
    the wait, and no handler runs. Other children (a run's orphans, which come back to this subreaper)
    are reaped whenever a command exits or the host asks about a run, and those this server killed
    are polled for until they are reaped.
    """

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.cgroup = b""  # the run cgroup this server is in (b"": the one it started in)
        self.spare_tmp = ""  # the next run's temporary directory, made while idle
        self.path = b""  # the PATH last set in our environment (posix_spawnp searches it)
        self.own_limits: dict[int, tuple[int, int]] = {}  # (soft, hard) as we started, per resource
        self.soft: dict[int, int] = {}  # our soft limits as set for a run, per resource
        self.runs: dict[int, Run] = {}
        self.by_pid: dict[int, Run] = {}
        self.dying: set[int] = set()  # processes we killed that may not be reaped yet
        self.kits: dict[bytes, list[int]] = {}  # id -> [run socket, stdout, stderr], for a later run
        self.devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)  # stdin of runs given none
        # A bare epoll and what each fd stands for: "control", a Run (its socket) or a pid (its pidfd).
        self.poller = select.epoll()
        self.watched: dict[int, Run | int | str] = {}
        self.hardening: dict[str, object] = {}  # set by main(): see harden()
        self.base_ns = -1  # our own mount namespace (set by main() when overlays are possible)
        self.prepared: tuple[int, list[tuple[int, str]]] | None = None  # the next overlay run's namespace
        self.layered = False  # a run has used an overlay: keep one namespace ready
        self.held: dict[int, int] = {}  # command pid -> its mount namespace, until it is reaped
        self.closer_sock: socket.socket | None = None
        self.private_tmp = False  # /tmp is the sandbox's own tmpfs (in bubblewrap), not the host's (set by main())
        # Our own CPU time may pass the soft limit we keep set for the runs.
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        self.watch(self.control.fileno(), "control")

    def watch(self, fd: int, what: Run | int | str) -> None:
        self.poller.register(fd, select.EPOLLIN)
        self.watched[fd] = what

    def unwatch(self, fd: int) -> None:
        self.poller.unregister(fd)
        del self.watched[fd]

    def serve(self) -> None:
        self.control.send(json.dumps({"ready": os.getpid()}).encode())
        while True:
            # What each ready fd stands for is read before any is handled (a handler may close an fd).
            ready = [(fd, self.watched.get(fd)) for fd, _ in self.poller.poll(DYING_POLL_S if self.dying else -1)]
            for fd, data in ready:
                if type(data) is int:  # a command's pidfd: it has exited
                    del self.watched[fd]
                    os.close(fd)  # which takes it out of the epoll
                    self.reap()
                elif data == "control":
                    if not self.accept():
                        self.shutdown()
                        return
                elif isinstance(data, Run):
                    self.readable(data)
            if self.dying:
                self.reap()
                self.dying = {pid for pid in self.dying if os.path.exists(f"/proc/{pid}")}

    def accept(self) -> bool:
        """Take a message from the control socket; False when the host has closed it."""
        try:
            msg, ancdata, flags, _ = self.control.recvmsg(
                MAX_INLINE + 16, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
            )
        except OSError:
            return False
        fds: list[int] = []
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data) - 3, 4)]
        if msg == b"control" and len(fds) == 1:
            self.unwatch(self.control.fileno())
            self.control.close()
            self.control = socket.socket(fileno=fds[0])
            self.watch(fds[0], "control")
            return True
        if msg.startswith(b"kit ") and len(fds) == 3 and len(self.kits) < MAX_KITS:
            self.kits[msg[4:]] = fds  # the host has at most one ready; the bound is for a confused one
            return True
        run = None if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC) else self.take(msg, fds)
        if run is None:
            # Closed (empty message), or unusable: without a run socket there is no one to answer,
            # and the host sees its run socket closed.
            for fd in fds:
                os.close(fd)
            return bool(msg)
        self.runs[run.sock] = run
        if not run.expect:
            self.start(run, msg.partition(b"\0")[2])  # the spawn first: watching the run socket can wait
        self.watch(run.sock, run)
        return True

    def take(self, msg: bytes, fds: list[int]) -> Run | None:
        """The run a ``go`` message starts (step 3 of the protocol); None if it is not one."""
        head, inline, _ = msg.partition(b"\0")
        parts = head.split(b" ")
        if len(parts) != (3 if inline else 4) or parts[0] != b"go":
            return None
        _, kit_id, flags, *size = parts
        wanted = (3 if kit_id == b"+" else 0) + (b"i" in flags) + (b"c" in flags) + (b"l" in flags)
        if len(fds) != wanted or (size and not size[0].isdigit()):
            return None
        kit = fds[:3] if kit_id == b"+" else self.kits.pop(kit_id, None)
        if kit is None:
            return None
        rest = fds[3:] if kit_id == b"+" else fds
        stdin = rest.pop(0) if b"i" in flags else -1
        cgroup = rest.pop(0) if b"c" in flags else -1
        layer = rest.pop(0) if b"l" in flags else -1
        run = Run(kit[0], kit[1:], stdin, cgroup, layer)
        if size:
            run.expect = int(size[0])  # the request follows on the run socket
        return run

    def readable(self, run: Run) -> None:
        try:
            data = os.read(run.sock, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.finish(run)
            return
        run.buf += data
        if len(run.buf) > MAX_LINE:
            run.send({"error": "request too large"})
            self.finish(run)
            return
        if run.expect:
            if len(run.buf) < run.expect:
                return
            body, run.buf, run.expect = run.buf[: run.expect], run.buf[run.expect :], 0
            self.start(run, body)
        while b"\n" in run.buf:
            line, run.buf = run.buf.split(b"\n", 1)
            self.request(run, line)

    def request(self, run: Run, line: bytes) -> None:
        message = json.loads(line)
        if "signal" in message:
            self.reap()
            # Once the command is reaped, what is left of it includes a process that left its session
            # and cleared its environment: the strays, which the host then waits for like the rest.
            others = self.strays(run) if run.strays is not None else set()
            run.send({"alive": run.signal(int(message["signal"]), others)})

    def start(self, run: Run, request: bytes) -> None:
        """Start the run a request describes (its fields: step 4 of the protocol)."""
        stdout, stderr = run.fds
        stdin, cgroup, layer = run.given
        run.fds, run.given = [], (-1, -1, -1)
        try:
            fields = request.split(b"\0")
            marker, cwd, cgroup_name = fields[0], fields[1], fields[2]
            run.id = marker.decode("ascii")
            if not run.id.isalnum():
                raise ValueError(f"bad run id {run.id!r}")
            limits = {res: (int(fields[i]), int(fields[i + 1])) for i, res in ((3, CPU), (5, NOFILE), (7, NPROC))}
            argc = int(fields[9])
            argv = fields[10 : 10 + argc]
            pairs = fields[10 + argc :]
            if not argv or len(pairs) % 2:
                raise ValueError("malformed request")
            env = dict(zip(pairs[0::2], pairs[1::2], strict=True))
            env[MARKER_B] = marker
            run.tmp, self.spare_tmp = self.spare_tmp or self.make_tmp(), ""
            env[b"TMPDIR"] = run.tmp.encode()
            if cgroup_name and cgroup_name != self.cgroup:
                # A new process starts in its parent's cgroup: enter the run's (and stay, see step 4).
                if cgroup < 0:
                    raise OSError(f"the descriptor of cgroup {cgroup_name.decode(errors='replace')} did not come")
                os.write(cgroup, b"0")
                self.cgroup = cgroup_name
            stdio = (self.devnull if stdin < 0 else stdin, stdout, stderr)
            if layer >= 0:
                self.layered = True
                pid = self.layer_spawn(argv, env, cwd, stdio, limits, layer)
            else:
                pid = self.spawn(argv, env, cwd, stdio, limits)
            self.watch_exit(pid)
        except LayerError as exc:
            run.send({"error": str(exc), "layer": True})
            for fd in (stdout, stderr):
                os.close(fd)
            return
        except (OSError, ValueError, IndexError, TypeError) as exc:
            run.send({"error": str(exc)})
            for fd in (stdout, stderr):
                os.close(fd)
            return
        finally:
            for fd in (stdin, cgroup, layer):
                if fd >= 0:
                    os.close(fd)
        # Held until the command is reaped: the host's end of the pipes sees EOF together with the exit.
        run.fds = [stdout, stderr]
        run.pid = pid
        self.by_pid[pid] = run

    def watch_exit(self, pid: int) -> None:
        """Have the loop woken when ``pid`` exits (its pidfd); without one it is killed, never left unwatched."""
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            self.kill(pid)
            raise OSError(f"could not watch the command: {exc}") from None
        self.watch(pidfd, pid)

    def kill(self, pid: int) -> None:
        """SIGKILL ``pid``; the loop reaps it."""
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            return
        self.dying.add(pid)

    def spawn(
        self,
        argv: list[bytes],
        env: dict[bytes, bytes],
        cwd: bytes,
        stdio: tuple[int, int, int],
        limits: dict[int, tuple[int, int]],
    ) -> int:
        """``posix_spawn`` (vfork speed, where ``fork`` of even this small interpreter costs a millisecond more).

        The command is born with its soft limits: this server sets its own to the run's before the
        spawn. Those of CPU time and processes stay set for the next run, which most likely wants the
        same: they bound nothing this server does but its spawns (its hard limits stay its own, and it
        ignores ``SIGXCPU``). The open-file one is put back after the spawn, as this server holds
        descriptors for every run in flight; and as glibc refuses a spawn whose descriptors are
        numbered at or above the caller's open-file limit, it is lowered no further than the highest of
        the three passed on. ``prlimit`` then sets the command's limits, hard ones included, which this
        server cannot lower on itself without losing them for good.
        ``RLIMIT_NPROC`` is checked at our own spawn against every process of the uid: when the uid
        already has more processes than the run's limit (possible only for a non-root uid; root is
        exempt from the check), the spawn is repeated with our own limit, and the command gets the
        run's from ``prlimit`` alone, a moment after it starts.
        """
        # glibc's posix_spawnp searches the PATH of the caller (this server), from the run's cwd, as execvp would.
        path = env.get(b"PATH") or os.defpath.encode()
        if path != self.path:
            os.environb[b"PATH"] = self.path = path
        os.chdir(cwd)  # it may stay: the next spawn sets its own
        try:
            for res, (soft, _) in limits.items():
                self.set_soft(res, max(soft, max(stdio) + 1) if res == NOFILE else soft)
            try:
                pid = self._posix_spawn(argv, env, stdio)
            except BlockingIOError:
                if NPROC not in limits:
                    raise
                self.set_soft(NPROC, None)
                pid = self._posix_spawn(argv, env, stdio)
        finally:
            self.set_soft(NOFILE, None)
        try:
            for res, value in limits.items():
                resource.prlimit(pid, res, value)
        except OSError as exc:
            self.kill(pid)  # it must not run without its limits
            raise OSError(f"could not set resource limits: {exc}") from None
        return pid

    def layer_spawn(
        self,
        argv: list[bytes],
        env: dict[bytes, bytes],
        cwd: bytes,
        stdio: tuple[int, int, int],
        limits: dict[int, tuple[int, int]],
        layer: int,
    ) -> int:
        """Start a command on an overlay of the workspace, in a mount namespace of its own.

        This server enters the namespace made for the run ahead of time (:meth:`prepare`), mounts the
        overlay (:func:`mount_overlay`), ``posix_spawn``s the command there (it is born in that namespace)
        and goes back to its own. :class:`LayerError` when the overlay cannot be mounted: nothing started.
        The namespace is held until the command is reaped (its teardown, an RCU grace period, would
        otherwise delay the command's exit), then handed to the closer process (see :func:`closer`).
        """
        prepared, self.prepared = self.prepared, None
        if prepared is None:
            prepared = self.prepare_ns()
        ns, clones = prepared
        try:
            setns(ns)
            try:
                mount_overlay(self.hardening, layer, clones)
            except OSError as exc:
                raise LayerError(f"the copy-on-write view could not be set up: {exc}") from None
            pid = self.spawn(argv, env, cwd, stdio, limits)
        except BaseException:
            os.close(ns)
            raise
        finally:
            self.back_home()
            for fd, _ in clones:
                os.close(fd)
        self.held[pid] = ns
        return pid

    def start_closer(self) -> None:
        """Fork the closer process (``aleph-closer``): it is never counted among a run's processes."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return
        if pid == 0:  # pragma: no cover - the child
            ours.close()
            closer(theirs)
        theirs.close()
        self.closer_sock = ours
        EXCLUDED.add(pid)

    def prepare_ns(self) -> tuple[int, list[tuple[int, str]]]:
        """A fresh mount namespace (private propagation) and read-only clones of the protected binds."""
        check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        try:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            self.back_home()
        return ns, protected_clones(self.hardening)

    def back_home(self) -> None:
        """Return to our own mount namespace; if that fails, end (a later run must never see another's view)."""
        try:
            setns(self.base_ns)
        except OSError:
            os._exit(70)  # the namespace dies with us (pid 1); the host starts a new server

    def prepare(self) -> None:
        """Between runs: make the next overlay run's namespace (once a run has used one)."""
        if self.prepared is None and self.base_ns >= 0 and self.layered:
            try:
                self.prepared = self.prepare_ns()
            except OSError:
                self.prepared = None  # made at the run, which reports the error

    def release_ns(self, pid: int) -> None:
        """The command ``pid`` is reaped: its namespace goes to the closer, which tears it down."""
        ns = self.held.pop(pid, -1)
        if ns < 0:
            return
        if self.closer_sock is not None:
            try:
                socket.send_fds(self.closer_sock, [b"x"], [ns])
            except OSError:
                pass  # no closer: closed here (slower)
        os.close(ns)

    def set_soft(self, res: int, soft: int | None) -> None:
        """Set our own soft limit of ``res`` (None: the one we started with), within our hard limit."""
        own = self.own_limits.get(res)
        if own is None:
            own = self.own_limits[res] = resource.getrlimit(res)
        start, hard = own
        if soft is None:
            soft = start
        elif hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        if self.soft.get(res, start) != soft:
            resource.setrlimit(res, (soft, hard))
            self.soft[res] = soft

    @staticmethod
    def _posix_spawn(argv: list[bytes], env: dict[bytes, bytes], stdio: tuple[int, int, int]) -> int:
        return os.posix_spawnp(
            argv[0],
            argv,
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio)],
            setsid=True,
            # Ignored here (by Python, or around the spawn); a command starts with the defaults.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGXCPU),
        )

    def reap(self) -> None:
        exited: list[tuple[Run, int]] = []
        released: list[int] = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                # No child at all, not even a zombie: as a subreaper, every process a run starts stays
                # our descendant, so nothing of any run is left in the namespace.
                childless = True
                break
            if pid == 0:
                childless = False
                break
            run = self.by_pid.pop(pid, None)
            if run is not None:
                exited.append((run, status))
            if pid in self.held:
                released.append(pid)
        for run, status in exited:
            report = b""
            if self.runs.get(run.sock) is run:
                run.strays = set() if childless else self.strays(run)
                # The same JSON as encode() makes, without the encoder: this is on every run's way out.
                report = b'{"exit": %d, "left": %d}\n' % (os.waitstatus_to_exitcode(status), len(run.strays))
            # The report and the end of the output go out back to back: the host, woken by the first,
            # finds the other there too and does not sleep in between.
            if report:
                run.write(report)
            for fd in run.fds:
                os.close(fd)
            run.fds = []
        for pid in released:  # after the reports: the teardown it starts is not on their way
            self.release_ns(pid)

    def strays(self, done: Run) -> set[int]:
        """Processes of the namespace that no other open run accounts for (its session, group or marker).

        Everything a finished run left behind, including a process that left its session and cleared
        its environment: the namespace outlives runs now, so only this sweep ends such a process.
        A run still open loses its own escaped processes early this way, which it would at its end anyway.
        """
        keep: set[int] = set()
        for other in self.runs.values():
            if other is not done and other.pid:
                keep |= other.members()
                keep.add(other.pid)
        return processes() - keep

    def finish(self, run: Run) -> None:
        """The host is done with ``run``: kill what is left of it (and any stray), remove its temporary directory."""
        # Nothing was left when the command was reaped: nothing of it can have started since.
        if run.pid and run.strays != set():
            for _ in range(3):  # a process forking while we look can hide a child from one pass
                strays = self.strays(run)
                for pid in strays:
                    self.kill(pid)
                if not strays:
                    break
        self.unwatch(run.sock)
        del self.runs[run.sock]
        os.close(run.sock)
        for fd in (*run.fds, *run.given):
            if fd >= 0:
                os.close(fd)
        run.fds, run.given = [], (-1, -1, -1)
        if run.tmp:
            try:
                os.rmdir(run.tmp)
            except OSError:
                remove_tmp(run.tmp)
        if self.private_tmp and not self.runs:
            clear_tmp(keep=self.spare_tmp)  # the next call, whoever makes it, starts with an empty /tmp
        if not self.spare_tmp:
            try:
                self.spare_tmp = self.make_tmp()
            except OSError:
                pass  # made at the next run, which reports the error if it persists
        self.prepare()

    @staticmethod
    def make_tmp() -> str:
        """A fresh private directory for one run: ``/tmp/aleph-run-<random>``, mode 0700."""
        path = f"/tmp/aleph-run-{os.urandom(8).hex()}"
        os.mkdir(path, 0o700)
        return path

    def shutdown(self) -> None:
        """End every run, then kill and reap every descendant before exiting."""
        for run in list(self.runs.values()):
            self.finish(run)
        self.kill_descendants()

    def terminated(self, *_: object) -> None:
        """``SIGTERM`` (on the host: the host died): kill and reap every descendant, then exit."""
        self.kill_descendants()
        for run in self.runs.values():
            if run.tmp:
                shutil.rmtree(run.tmp, ignore_errors=True)
        os._exit(0)

    def kill_descendants(self) -> None:
        """SIGKILL every descendant and reap them all (for up to ``SHUTDOWN_S``).

        A child left unreaped would be re-parented: on the host, to the host process (a subreaper
        without bubblewrap), which does not know it and would keep it as a zombie.
        """
        deadline = time.monotonic() + SHUTDOWN_S
        while True:
            for pid in processes() | EXCLUDED:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                return  # no child left, not even a zombie
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)


def mount_points(under: str) -> list[str]:
    """Every mount point below ``under`` (from /proc/self/mountinfo; octal escapes decoded)."""
    out = []
    with open("/proc/self/mountinfo", "rb") as fh:
        for line in fh:
            fields = line.split(b" ")
            if len(fields) > 4:
                point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4])
                text = os.fsdecode(point)
                if text.startswith(under + "/"):
                    out.append(text)
    return out


def clear_tmp(keep: str) -> None:
    """Empty the sandbox's /tmp but for ``keep``: what one call left there is never seen by the next.

    Nothing at a mount point or inside one is touched: the workspace (or the interpreter, in CI) may be
    bound below /tmp, and clearing must never reach into it; the directories on the way to such a bind
    are kept, and emptied of everything else.
    """
    try:
        mounts = mount_points("/tmp")
    except OSError:
        return
    todo = ["/tmp"]
    while todo:
        where = todo.pop()
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            path = f"{where}/{name}"
            if path == keep or path in mounts:
                continue
            if any(m.startswith(path + "/") for m in mounts):
                todo.append(path)  # on the way to a bind: keep it, clear what else is in it
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    remove_tmp(path)
                else:
                    os.unlink(path)
            except OSError:
                pass  # gone already


def remove_tmp(path: str) -> None:
    """Remove a run's temporary directory, also a tree deeper than ``shutil.rmtree``'s recursion allows."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        # rm walks iteratively (fts); the server's own reaping loop does not see this child (waited here).
        with contextlib.suppress(OSError):
            pid = os.posix_spawn("/bin/rm", ["rm", "-rf", "--one-file-system", "--", path], {})
            os.waitpid(pid, 0)


def closer(sock: socket.socket) -> None:  # pragma: no cover - a forked child
    """The closer process: takes mount namespaces (by ``SCM_RIGHTS``) and closes them.

    Their teardown waits here, not in the server's loop; it exits when the server closes its end.
    """
    libc.prctl(PR_SET_NAME, b"aleph-closer", 0, 0, 0)
    keep = sock.fileno()
    for name in os.listdir("/proc/self/fd"):
        if name.isdigit() and int(name) not in (0, 1, 2, keep):
            try:
                os.close(int(name))
            except OSError:
                pass
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, 16)
        except OSError:
            os._exit(0)
        # A moment's wait: the run whose namespace this was is still being reported to the host.
        time.sleep(CLOSER_DELAY_S)
        for fd in fds:
            os.close(fd)
        if not msg:
            os._exit(0)


class LayerError(OSError):
    """A run's overlay could not be mounted: the command was not started."""


libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PR_SET_NO_NEW_PRIVS = 38
PR_SET_NAME = 15
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
OPEN_TREE_CLONE, AT_FDCWD, AT_EMPTY_PATH, MOVE_MOUNT_F_EMPTY_PATH = 1, -100, 0x1000, 0x4
MOUNT_ATTR_RDONLY = 0x1
CLONE_NEWNS = 0x20000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 2
LAYER_DIR = "/run/aleph-layer"
# Container runtimes' lists: read-only, and hidden (a file under /dev/null, a directory under an empty tmpfs).
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_MASKED = (
    "/proc/kcore", "/proc/kmsg", "/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/sched_debug",
    "/proc/latency_stats", "/proc/timer_stats", "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup",
    "/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/driver", "/proc/sysvipc",
)  # fmt: skip


def check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if x is None else os.fsencode(x) for x in (source, target, fstype, data)]
    check(libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def move_mount(fd: int, target: str) -> None:
    check(
        libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, os.fsencode(target), MOVE_MOUNT_F_EMPTY_PATH),
        f"move_mount {target}",
    )


def ovl_escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


def protected_clones(hardening: dict[str, object]) -> list[tuple[int, str]]:
    """Detached read-only clones of the protected binds, to put back on top of an overlay."""
    clones = []
    attr = ctypes.create_string_buffer(struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0))
    try:
        for path in [str(p) for p in hardening.get("protected", [])]:  # type: ignore[attr-defined]
            fd = check(
                libc.syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(path), OPEN_TREE_CLONE | os.O_CLOEXEC),
                f"open_tree {path}",
            )
            clones.append((fd, path))
            check(libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH, attr, 32), f"mount_setattr {path}")
    except OSError:
        for fd, _ in clones:
            os.close(fd)
        raise
    return clones


def setns(fd: int) -> None:
    check(libc.setns(fd, CLONE_NEWNS), "setns(CLONE_NEWNS)")


def mount_overlay(hardening: dict[str, object], layer: int, clones: list[tuple[int, str]]) -> None:
    """In a run's child: a mount namespace of its own with the workspace under an overlay.

    The upper and work directories are in ``layer`` (a detached mount from the host); the protected
    paths are bound read-only on top again and the layer's staging point is emptied.
    """
    workspace = str(hardening["workspace"])
    move_mount(layer, LAYER_DIR)
    upper, work = f"{LAYER_DIR}/upper", f"{LAYER_DIR}/work"
    os.mkdir(upper, 0o755)
    os.mkdir(work, 0o700)
    options = (
        f"lowerdir={ovl_escape(workspace)},upperdir={ovl_escape(upper)},workdir={ovl_escape(work)},"
        "userxattr,redirect_dir=nofollow,metacopy=off,index=off,xino=off"
    )
    mount("overlay", workspace, "overlay", 0, options)
    # Hidden under an empty read-only tmpfs: an unmount would wait for an RCU grace period (milliseconds
    # under load) on the run's path; what is under it goes with the namespace (see closer).
    mount("tmpfs", LAYER_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555")
    for fd, path in clones:
        move_mount(fd, path)


def harden_proc() -> None:
    """Make the kernel's writable interfaces under /proc read-only, and hide the ones that leak."""
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            mount(None, path, None, flags)
    for path in PROC_MASKED:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555")
        elif os.path.exists(path):
            mount("/dev/null", path, None, MS_BIND)


def keep_capabilities_for_self() -> None:
    """Clear the ambient and inheritable sets: what this server holds is passed to no command it spawns."""
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    nr = SYS_CAPSET.get(os.uname().machine)
    if nr is None:
        raise OSError("no capset number for this architecture")
    header = ctypes.create_string_buffer(struct.pack("Ii", 0x20080522, 0))
    data = ctypes.create_string_buffer(24)
    check(libc.syscall(nr - 1, header, data), "capget")  # capget is capset - 1 on both
    words = list(struct.unpack("6I", data.raw))
    words[2] = words[5] = 0  # inheritable, both halves
    check(libc.syscall(nr, header, ctypes.create_string_buffer(struct.pack("6I", *words))), "capset")


def install_filter(program_hex: object) -> None:
    """no_new_privs, then the seccomp program (hex of ``struct sock_filter[]``; empty: none)."""
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    if not program_hex:
        return
    code = bytes.fromhex(str(program_hex))
    buf = ctypes.create_string_buffer(code)
    prog = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buf))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(prog), 0, 0), "seccomp")


EXCLUDED: set[int] = set()  # this server's own helpers (the closer process): never a run's


def processes() -> set[int]:
    """Every process of the runs: this server's descendants (it is a subreaper: orphans come back to it).

    Found through each thread's ``children`` list. In bubblewrap's PID namespace that is every process
    but its init and this server; without a namespace, the host's other processes are never among them.
    """
    found: set[int] = set()
    todo = [os.getpid()]
    skip = EXCLUDED
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone meanwhile
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    children = [int(child) for child in fh.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                if child not in found and child not in skip:
                    found.add(child)
                    todo.append(child)
    return found


def main() -> None:
    control_fd = int(sys.argv[1])
    for name, (soft, hard) in json.loads(sys.argv[2]).items():
        resource.setrlimit(RLIMITS[name], (soft, hard))
    # Not dumpable: the commands (same uid) may not ptrace this server or take its fds.
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    # A subreaper: a run's orphaned processes become our children, not init's (see processes()).
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER, 1) failed")
    me = os.getpid()
    if not os.path.exists(f"/proc/{me}/task/{me}/children"):
        raise OSError("this kernel has no /proc/<pid>/task/<tid>/children lists: a run's processes cannot be found")
    try:
        os.close(os.pidfd_open(me))
    except (AttributeError, OSError) as exc:
        raise OSError(f"no pidfd_open (Linux 5.3 or later): a command's exit cannot be watched ({exc})") from None
    os.set_inheritable(control_fd, False)
    hardening: dict[str, object] = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    if hardening.get("proc"):
        harden_proc()
    if sys.argv[3:4] != ["host"] and hardening:
        # Ours stays (the overlays need CAP_SYS_ADMIN in the sandbox's user namespace); none is passed on.
        keep_capabilities_for_self()
    if "base" in hardening:
        install_filter(hardening["base"])
        if sys.argv[3:4] == ["host"]:
            install_filter(hardening.get("mounts", ""))  # no overlays here: the mount family goes at once
    zygote = Zygote(socket.socket(fileno=control_fd))
    zygote.hardening = hardening
    zygote.private_tmp = sys.argv[3:4] != ["host"]
    if sys.argv[3:4] == ["ns"] and hardening.get("proc"):
        # Overlays (as root): our own mount namespace to come back to, and the closer process, forked now,
        # while we are in no run's cgroup.
        zygote.base_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        zygote.start_closer()
    # Killed politely (by a command of ours, or on the host by the host's death): the runs go with us.
    signal.signal(signal.SIGTERM, zygote.terminated)
    if sys.argv[3:4] == ["ns"] and os.getpid() == 1:
        # The namespace's init (bwrap --as-pid-1): its death ends the namespace. bubblewrap's parent-death
        # signal does not survive the switch into the sandbox's user namespace: ask for ours here.
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() == 0 and not os.path.exists("/proc/self"):
            raise OSError("the sandbox's parent is gone")
    if sys.argv[3:4] == ["host"]:
        # No namespace dies with the host here: we are sent SIGTERM when it dies, and end every process
        # of our runs (all our descendants: we are a subreaper) before we exit.
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() == 1:
            raise OSError("the host exited before the server started")
    zygote.serve()


if __name__ == "__main__":
    main()
