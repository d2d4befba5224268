"""How the zygote starts a command: ``posix_spawn`` with the run's limits.

A run with a copy-on-write layer starts in a mount namespace of its own (prepared ahead, handed to the
closer when the command is reaped).

Part of the zygote (:mod:`aleph_exec._zygote`): standard library only, loaded from beside it.
"""

from __future__ import annotations

import os
import resource
import signal
import socket

from _zygote_kernel import (
    CLONE_NEWNS,
    MS_PRIVATE,
    MS_REC,
    LayerError,
    check,
    libc,
    mount,
    mount_overlay,
    protected_clones,
    setns,
)
from _zygote_net import NetMaker, enter
from _zygote_procs import EXCLUDED, closer

MAX_OFFERED = 4  # layers offered ahead and held mounted (the host offers at most its ready ones, two)
RLIMITS = {name: getattr(resource, f"RLIMIT_{name}") for name in ("AS", "CORE", "CPU", "FSIZE", "NOFILE", "NPROC")}
CPU, NOFILE, NPROC = RLIMITS["CPU"], RLIMITS["NOFILE"], RLIMITS["NPROC"]


class Spawner:
    """Starting commands: limits, the run's mount and network namespaces, the overlay, its temporary directory."""

    net: NetMaker | None
    run_net: int
    offered: dict[bytes, int | str]
    base_ns: int

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
        # Limits are the process's: the thread making the next network namespace opens no fd meanwhile.
        fds_lock = self.net.fds_lock if self.net is not None else None
        if fds_lock is not None:
            fds_lock.acquire()
        try:
            for res, (soft, _) in limits.items():
                self.set_soft(res, max(soft, max(stdio) + 1) if res == NOFILE else soft)
            if self.run_net >= 0:
                enter(self.run_net)  # the command is born in its run's network namespace
            try:
                pid = self._posix_spawn(argv, env, stdio)
            except BlockingIOError:
                if NPROC not in limits:
                    raise
                self.set_soft(NPROC, None)
                pid = self._posix_spawn(argv, env, stdio)
        finally:
            self.set_soft(NOFILE, None)
            if fds_lock is not None:
                fds_lock.release()
            if self.run_net >= 0 and self.net is not None:
                try:
                    enter(self.net.home)
                except OSError:
                    os._exit(70)  # never serve on in a run's namespace; the host starts a new server
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
        layer: int = -1,
        ns: int = -1,
    ) -> int:
        """Start a command on an overlay of the workspace, in a mount namespace of its own.

        The namespace is ``ns`` when its overlay was mounted ahead (:meth:`offer`), else made here from
        ``layer`` (:meth:`mount_layer`). This server enters it, ``posix_spawn``s the command there (it is
        born in that namespace) and goes back to its own. :class:`LayerError` when the overlay cannot be
        mounted: nothing started. The namespace is held until the command is reaped (its teardown, an
        RCU grace period, would otherwise delay the command's exit), then handed to the closer process
        (see :func:`closer`).
        """
        if ns < 0:
            ns = self.mount_layer(layer)
        try:
            setns(ns)
            pid = self.spawn(argv, env, cwd, stdio, limits)
        except BaseException:
            os.close(ns)
            raise
        finally:
            self.back_home()
        self.held[pid] = ns
        return pid

    def mount_layer(self, layer: int) -> int:
        """A mount namespace (made ahead when there is one) with the workspace under ``layer``'s overlay.

        :func:`mount_overlay` mounts it; :class:`LayerError` when it cannot be.
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
        except BaseException:
            os.close(ns)
            raise
        finally:
            self.back_home()
            for fd, _ in clones:
                os.close(fd)
        return ns

    def offer(self, layer_id: bytes, layer: int) -> None:
        """A layer offered for a later run (message ``layer <id>``): mount its overlay now, while idle.

        Mounting an overlay (overlayfs probes its work directory) is the dearest part of a transaction's
        start; done here, a run that names the layer only enters the namespace. Nothing looks into the
        overlay before that run: its view of the workspace is read at lookup, as of the run. Why the
        mount failed is kept for the run that names it.
        """
        try:
            if self.base_ns < 0:
                self.offered[layer_id] = "this sandbox server mounts no overlays"
            elif len(self.offered) < MAX_OFFERED and layer_id not in self.offered:
                try:
                    self.offered[layer_id] = self.mount_layer(layer)
                except OSError as exc:
                    self.offered[layer_id] = str(exc)
        finally:
            os.close(layer)

    def take_offer(self, layer_id: bytes) -> int:
        """The namespace of the layer offered as ``layer_id``; :class:`LayerError` when it is not there."""
        held = self.offered.pop(layer_id, None)
        if held is None:
            raise LayerError("the run's layer was not offered to the sandbox server, or not kept")
        if isinstance(held, str):
            raise LayerError(held)
        return held

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
        """Between runs: make the next overlay run's namespace (once a run has used one, and none is offered)."""
        if self.prepared is None and self.base_ns >= 0 and self.layered and not self.offered:
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

    @staticmethod
    def make_tmp() -> str:
        """A fresh private directory for one run: ``/tmp/aleph-run-<server pid>-<random>``, mode 0700.

        The server's pid in the name tells whose a directory is (on the host, /tmp is everyone's).
        """
        path = f"/tmp/aleph-run-{os.getpid()}-{os.urandom(8).hex()}"
        os.mkdir(path, 0o700)
        return path
