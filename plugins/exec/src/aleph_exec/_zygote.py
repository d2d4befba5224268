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

1. server → host, control socket: ``{"ready": <pid in the namespace>}``, with ``"proxy_port": <port>``
   (network proxied: each run's listener port, see :mod:`_zygote_net`) or ``"proxy_error": <why>``.
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
   not mounted in the sandbox), sent only when the server is not already in that cgroup; ``l``, the
   run's copy-on-write layer (a detached mount) to put the workspace's overlay on. ``p`` (no fd): the
   run's layer is one offered ahead, named by the next word, ``go <kit> <flags> <layer id>``: the host
   hands a fresh layer over between runs, in a message ``layer <id>`` carrying it (``SCM_RIGHTS``), and
   the server mounts its overlay in a mount namespace of its own then, while idle (at most
   ``MAX_OFFERED`` held). A request longer than ``MAX_INLINE`` bytes comes as ``go <kit> <flags> [<layer
   id>] <length>``, and its bytes follow on the run socket. A run with no kit to take, or a kit that
   never came, gets its run socket closed.
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
   report. When nothing could be started it answers ``{"error": "<why>"}`` and the run is over.
   Network proxied: the command is born in a network namespace of its own, and ``{"net": 1}`` with its
   listener (``SCM_RIGHTS``) goes to the host on the run socket before anything else: as soon as the
   kit comes when a namespace is ready then (the host finds it there when the run starts), else at the start.
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

import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time

# Run by path with -I (no script directory on sys.path): the zygote's own modules lie beside it, and
# the sandbox binds them with it (aleph_exec._namespace.zygote_files).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _zygote_kernel import LayerError, harden_proc, install_filter, keep_capabilities_for_self, libc
from _zygote_net import NetMaker, early_door, send_door
from _zygote_procs import EXCLUDED, clear_tmp, processes, remove_tmp
from _zygote_run import MARKER_B, Run
from _zygote_spawn import CPU, NOFILE, NPROC, RLIMITS, Spawner

MAX_FDS = 6
MAX_KITS = 4
MAX_INLINE = 64 * 1024  # a request up to this size comes with the fds, in the same control message
MAX_LINE = 8 * 1024 * 1024
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
DYING_POLL_S = 0.005  # how often killed processes are looked for, until they are reaped
SHUTDOWN_S = 5.0  # the longest the server waits for killed descendants to be reaped before it exits


class Zygote(Spawner):
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
        self.offered: dict[bytes, int | str] = {}  # layers offered ahead: their namespace, or why it failed
        self.layered = False  # a run has used an overlay: keep one namespace ready
        self.held: dict[int, int] = {}  # command pid -> its mount namespace, until it is reaped
        self.closer_sock: socket.socket | None = None
        self.net: NetMaker | None = None  # network proxied: each run's own network namespace (set by serve())
        self.run_net = -1  # the namespace the command being spawned is born in (see Spawner.spawn)
        self.private_tmp = False  # /tmp is the sandbox's own tmpfs (in bubblewrap), not the host's (set by main())
        self.tmp_clean = False  # /tmp was emptied with no run open, and no run has started since
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
        ready: dict[str, object] = {"ready": os.getpid()}
        if self.hardening.get("proxy"):
            # The egress proxy's door: each run's own network namespace and listener (see _zygote_net).
            try:
                self.net = NetMaker()
                self.net.start()
                ready["proxy_port"] = self.net.port
            except OSError as exc:
                self.net = None
                ready["proxy_error"] = str(exc)
        self.control.sendall(json.dumps(ready).encode())
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
            # The host has at most one ready; the bound is for a confused one. Network proxied: paired with
            # its run's network namespace now, when one is ready, and the door sent with it (see early_door).
            self.kits[msg[4:]] = fds + early_door(self.net, fds[0])
            return True
        if msg.startswith(b"layer ") and len(fds) == 1:
            self.offer(msg[6:], fds[0])  # its overlay is mounted now, off the run's path
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
        if len(parts) < 3 or parts[0] != b"go":
            return None
        _, kit_id, flags, *size = parts
        offered = size.pop(0) if b"p" in flags and size else b""
        if len(size) != (0 if inline else 1) or (b"p" in flags and not offered):
            return None
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
        run = Run(kit[0], kit[1:3], stdin, cgroup, layer)
        run.offered, run.net_ns = offered, kit[3] if len(kit) > 3 else -1
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
        listener: socket.socket | None = None
        started = False
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
            if self.private_tmp and not self.by_pid and not self.tmp_clean:
                # No other command runs (the host may not have closed the last run yet): this call starts
                # with an empty /tmp whoever wrote there before. A process an earlier run left running is
                # killed when the host closes that run; what it writes until then is its own run's.
                clear_tmp(keep={run.tmp})
            self.tmp_clean = False
            if cgroup_name and cgroup_name != self.cgroup:
                # A new process starts in its parent's cgroup: enter the run's (and stay, see step 4).
                if cgroup < 0:
                    raise OSError(f"the descriptor of cgroup {cgroup_name.decode(errors='replace')} did not come")
                os.write(cgroup, b"0")
                self.cgroup = cgroup_name
            stdio = (self.devnull if stdin < 0 else stdin, stdout, stderr)
            if self.net is not None and run.net_ns >= 0:
                self.run_net, run.net_ns = run.net_ns, -1  # its door went with its kit
            elif self.net is not None:
                # Network proxied: the command is born in a network namespace of its own (see _zygote_net).
                self.run_net, listener = self.net.take()
            if run.offered:
                self.layered = True
                pid = self.layer_spawn(argv, env, cwd, stdio, limits, ns=self.take_offer(run.offered))
            elif layer >= 0:
                self.layered = True
                pid = self.layer_spawn(argv, env, cwd, stdio, limits, layer)
            else:
                pid = self.spawn(argv, env, cwd, stdio, limits)
            self.watch_exit(pid)
            started = True
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
            for fd in (stdin, cgroup, layer, self.run_net):
                if fd >= 0:
                    os.close(fd)
            self.run_net = -1
            if listener is not None and not started:
                listener.close()  # nothing started: no door
        if listener is not None:
            # The run's door to the proxy goes to the host before its exit report can; ours closes.
            send_door(run.sock, listener)
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
        for fd in (*run.fds, *run.given, run.net_ns):
            if fd >= 0:
                os.close(fd)
        run.fds, run.given, run.net_ns = [], (-1, -1, -1), -1
        if run.tmp:
            try:
                os.rmdir(run.tmp)
            except OSError:
                remove_tmp(run.tmp)
        if self.private_tmp and not self.runs:
            clear_tmp(keep={self.spare_tmp})  # the next call, whoever makes it, starts with an empty /tmp
            # Nothing runs, and nothing killed is still there to write: the next run need not clear it again.
            self.tmp_clean = not self.dying
        if not self.spare_tmp:
            try:
                self.spare_tmp = self.make_tmp()
            except OSError:
                pass  # made at the next run, which reports the error if it persists
        self.prepare()

    def shutdown(self) -> None:
        """End every run, then kill and reap every descendant before exiting."""
        for run in list(self.runs.values()):
            self.finish(run)
        self.kill_descendants()
        self.drop_spare()

    def terminated(self, *_: object) -> None:
        """``SIGTERM`` (on the host: the host died): kill and reap every descendant, then exit."""
        self.kill_descendants()
        for run in self.runs.values():
            if run.tmp:
                shutil.rmtree(run.tmp, ignore_errors=True)
        self.drop_spare()
        os._exit(0)

    def drop_spare(self) -> None:
        """Remove the temporary directory made ahead for the next run: none comes (on the host it was left in /tmp)."""
        if self.spare_tmp:
            shutil.rmtree(self.spare_tmp, ignore_errors=True)
            self.spare_tmp = ""

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
