"""WorkspaceSandbox: run a command in the workspace with limits, and leave nothing behind.

Layers, strongest first, each used when the machine offers it:

* a **pids cgroup** per run (v1 ``/sys/fs/cgroup/pids`` or a delegated v2 subtree): ``pids.max`` caps
  the number of processes even for root, and killing every pid in ``cgroup.procs`` catches
  descendants that left the process group with ``setsid``;
* **bubblewrap**: own PID, IPC and UTS namespaces (``--die-with-parent``: when the sandbox's init
  dies, the kernel kills everything in the namespace), workspace bound read-write, system dirs
  read-only, protected paths re-bound read-only, network namespace unless ``network = "host"``.
  One bwrap per sandbox (per workspace), started at the first run, runs the zygote;
* the **zygote** (:mod:`aleph_exec._zygote`), one per sandbox, in that bwrap or, without bubblewrap,
  on the host: it starts each run, and as a subreaper it finds everything a run left behind among
  its descendants (also a process that left its session and cleared its environment). When it cannot
  start, runs are spawned directly (in a bwrap each, with bubblewrap) until a later start succeeds;
* always: a new session and process group, rlimits set before the command starts (CPU, address
  space, processes, file size, open files, core dumps off: by the zygote around its ``posix_spawn``;
  in a direct spawn by ``prlimit`` so CPython can ``vfork``, else in a ``preexec_fn``), a scrubbed
  environment carrying a per-run marker, and a kill that sends SIGTERM then SIGKILL to the group,
  the cgroup, and every process whose environment still carries the marker (a ``/proc`` sweep).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import re
import resource
import secrets
import select
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread

from aleph_exec import _seccomp, _userns
from aleph_exec._config import ExecConfig

__all__ = ["Capture", "RunResult", "SandboxError", "TransactionUnavailable", "WorkspaceSandbox", "bwrap_available"]

MiB = 1024 * 1024
_MARKER = "ALEPH_SANDBOX_RUN"
_EXIT_GRACE_S = 1.0
_TERM_GRACE_S = 0.5
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of the host's /etc a sandbox sees (read-only): what bash, python, git, pip and node need; never
# shadow, gshadow, ssh keys or other secrets. passwd and group are the sandbox's own.
_ETC_ALLOW = (
    "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "localtime", "timezone", "mime.types",
    "bash.bashrc", "profile", "profile.d", "inputrc", "environment", "os-release", "debian_version", "protocols",
    "services", "shells", "gitconfig", "python3", "login.defs", "terminfo", "magic", "mailcap", "machine-id",
    "npmrc", "manpath.config", "locale.alias", "locale.gen", "default", "xdg", "fonts",
)  # fmt: skip


class Capture:
    """Keeps the head and tail of a stream within ``cap`` bytes and counts what was dropped."""

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk."""
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        """Whether bytes were dropped between head and tail."""
        return self.total > len(self.head) + len(self.tail)

    def sizes(self) -> dict[str, int]:
        """Bytes the stream produced, kept (head and tail) and dropped."""
        kept = len(self.head) + len(self.tail)
        return {"total": self.total, "kept": kept, "dropped": self.total - kept}

    def text(self) -> str:
        """The kept output, with a marker where the middle was dropped."""
        head = self.head.decode("utf-8", "replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", "replace")
        dropped = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n[... {dropped} bytes truncated ...]\n{tail}"


class _Output:
    """A run's stdout and stderr as they arrive: kept within the caps, stdout streamed line by line."""

    def __init__(self, config: ExecConfig, on_line: Callable[[str], None] | None) -> None:
        self.out, self.err = Capture(config.max_output_bytes), Capture(config.max_output_bytes)
        self.on_line = on_line
        self.stream_cap = config.max_output_bytes
        self.kill_at = config.output_kill_bytes
        self.partial = b""  # the unfinished streamed line
        self.streamed = 0  # stdout bytes streamed so far

    def feed(self, capture: Capture, chunk: bytes) -> str | None:
        """Take a chunk of ``capture``'s stream; why the run must be killed, when its output is too much."""
        capture.feed(chunk)
        if self.on_line is not None and capture is self.out and self.streamed < self.stream_cap:
            self.streamed += len(chunk)
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            for line in lines:
                self.on_line(line.decode("utf-8", "replace"))
        if self.out.total + self.err.total > self.kill_at:
            return f"output limit ({self.kill_at} bytes)"
        return None

    def flush(self) -> None:
        """Stream the last line, which had no newline."""
        if self.on_line is not None and self.partial:
            self.on_line(self.partial.decode("utf-8", "replace"))
            self.partial = b""


def _write_some(fd: int, pending: memoryview) -> memoryview:
    """Write what a non-blocking ``fd`` takes of ``pending``; the rest (nothing once the reader is gone)."""
    try:
        return pending[os.write(fd, pending) :]
    except BrokenPipeError:
        return pending[:0]


@dataclass(slots=True)
class RunResult:
    """What a run produced and how it ended."""

    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    isolation: str
    network: str
    duration_ms: float
    killed: str | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    transaction: bool = False
    """True when the command ran on a per-run copy-on-write view of the workspace (``layer=``)."""
    output_bytes: dict[str, dict[str, int]] | None = None
    """When output was cut: per stream, the bytes produced, kept and dropped."""

    def to_json(self) -> dict[str, Any]:
        """The tool-facing form."""
        out = {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncated": self.truncated,
            "timed_out": self.timed_out,
            "isolation": self.isolation,
            "network": self.network,
            "duration_ms": round(self.duration_ms, 1),
            "transaction": self.transaction,
        }
        if self.killed:
            out["killed"] = self.killed
        if self.output_bytes is not None:
            out["output_bytes"] = self.output_bytes
        return out


_bwrap_probe: dict[str, bool] = {}
_which: dict[str, str | None] = {}


def _which_cached(name: str) -> str | None:
    if name not in _which:
        _which[name] = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
    return _which[name]


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and can create namespaces here (probed once per process)."""
    path = shutil.which("bwrap")
    if path is None:
        return False
    if path not in _bwrap_probe:
        try:
            probe = subprocess.run(
                [path, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"],
                capture_output=True,
                timeout=10,
            )
            _bwrap_probe[path] = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _bwrap_probe[path] = False
    return _bwrap_probe[path]


class _Cgroup:
    """A pids cgroup for one run at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name
        self._procs_fd = -1

    def procs_fd(self) -> int:
        """``cgroup.procs`` open for writing (kept open while the cgroup is reused)."""
        if self._procs_fd < 0:
            self._procs_fd = os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        return self._procs_fd

    @classmethod
    def create(cls, max_pids: int) -> _Cgroup | None:
        base = _pids_hierarchy()
        if base is None:
            return None
        path = base / f"aleph-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def pids(self) -> list[int]:
        # A fresh open each time: cgroup v1 caches the pid list per open file (a re-read can be stale).
        try:
            fd = os.open(self.path / "cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)
            try:
                chunks = []
                while chunk := os.read(fd, 65536):
                    chunks.append(chunk)
            finally:
                os.close(fd)
            return [int(p) for p in b"".join(chunks).split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> None:
        if self._procs_fd >= 0:
            os.close(self._procs_fd)
            self._procs_fd = -1
        # rmdir fails with EBUSY until the last member has fully exited: retry for up to about a second.
        for _ in range(500):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.002)


class _CgroupPool:
    """Empty run cgroups kept for the next run, so that mkdir, pids.max and rmdir are not paid per run.

    A cgroup goes back only when nothing of its run is left in it (``pids.max`` is fixed per sandbox);
    all are removed when the sandbox closes, or when it is collected or the interpreter exits. The
    zygote stays in the cgroup of the run it last started (see :mod:`aleph_exec._zygote`), so its pid
    is ignored here and ``pids.max`` counts it.
    """

    def __init__(self, max_pids: int) -> None:
        self.max_pids = max_pids
        self.free: list[_Cgroup] = []
        self.spent: list[_Cgroup] = []
        self.lock = threading.Lock()

    def take(self) -> _Cgroup | None:
        with self.lock:
            if self.free:
                return self.free.pop()
        return _Cgroup.create(self.max_pids)

    def give(self, cgroup: _Cgroup, zygotes: set[int]) -> None:
        if any(pid not in zygotes for pid in cgroup.pids()):
            with self.lock:
                self.spent.append(cgroup)  # a member is still exiting: not for another run; removed at close
        else:
            self.put_back(cgroup)

    def put_back(self, cgroup: _Cgroup) -> None:
        """Return a cgroup its caller has just seen empty (but for zygotes)."""
        with self.lock:
            self.free.append(cgroup)

    def clear(self) -> None:
        with self.lock:
            cgroups = self.free + self.spent
            self.free.clear()
            self.spent.clear()
        for cgroup in cgroups:
            cgroup.remove()


def _shutdown(zygotes: list[_Zygote], cgroups: _CgroupPool | None) -> None:
    """Stop every zygote of a sandbox (they may sit in its cgroups), then remove the cgroups."""
    for zygote in list(zygotes):
        zygote.close(wait=True)
    zygotes.clear()
    if cgroups is not None:
        cgroups.clear()


_hierarchy: list[Path | None] = []


def _pids_hierarchy() -> Path | None:
    """A writable pids-controller directory we may create child cgroups in, or None."""
    if _hierarchy:
        return _hierarchy[0]
    found: Path | None = None
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        found = v1
    else:
        # cgroup v2: usable only when our own cgroup delegates the pids controller to children.
        try:
            line = next(x for x in Path("/proc/self/cgroup").read_text().splitlines() if x.startswith("0::"))
            own = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            if "pids" in (own / "cgroup.subtree_control").read_text().split() and os.access(own, os.W_OK):
                found = own
        except (OSError, StopIteration):
            found = None
    _hierarchy.append(found)
    return found


def _proc_sweep(marker: str) -> list[int]:
    """Pids of live processes whose environment carries ``marker`` (root can read every environ)."""
    needle = f"{_MARKER}={marker}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _host_env(allow: Iterable[str], workspace: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": os.environ.get("TERM", "dumb"),
        "TMPDIR": "/tmp",
    }
    for name in allow:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


class WorkspaceSandbox:
    """Runs commands in a workspace under the limits of an :class:`ExecConfig`."""

    def __init__(self, workspace: Path, config: ExecConfig, protected: Iterable[Path] = ()) -> None:
        self.workspace = Path(workspace).resolve()
        self.config = config
        self.protected = [Path(p) for p in protected]
        if config.isolation == "bwrap" or (config.isolation == "auto" and bwrap_available()):
            self.isolation = "bwrap"
        else:
            self.isolation = "none"
        self.bwrap = shutil.which("bwrap") if self.isolation == "bwrap" else None
        if self.bwrap is None:
            _become_subreaper()
        # Re-bound read-only inside bubblewrap when they exist; a change in which exist restarts the zygote.
        self._ro_candidates = [
            path
            for path in [*self.protected, self.workspace / ".git" / "hooks", self.workspace / ".git" / "config"]
            if path.is_relative_to(self.workspace)
        ]
        self._layer_parents: dict[Path, Path] = {}  # a layer directory's parent, resolved (bounded by its use)
        self._ro_texts = [str(path) for path in self._ro_candidates]
        # The zygote may sit in a run's cgroup: one more pid (see _CgroupPool).
        self._cgroups = _CgroupPool(config.max_processes + 1) if config.cgroup == "auto" else None
        self._lock = threading.Lock()
        self._zygote: _Zygote | None = None
        self._zygotes: list[_Zygote] = []  # the current one and retired ones still running
        # Also when the sandbox is dropped without close() (or at interpreter exit): cgroups outlive us.
        weakref.finalize(self, _shutdown, self._zygotes, self._cgroups)
        self.zygote_error: str | None = None
        """Why the persistent sandbox last failed to start (runs then start a bubblewrap each), or None."""
        self._zygote_retry_at = 0.0
        # Run markers: unguessable per sandbox, unique per run (no random draw on each run's path).
        self._marker_prefix = secrets.token_hex(6)
        self._env_blob: tuple[dict[str, str], bytes] | None = None
        self._run_numbers = itertools.count()
        # The unprivileged sandbox (bubblewrap only): a user namespace; as root, its user mapped to
        # config.sandbox_host_uid and the workspace bound through an idmapped mount (see _userns).
        self._root = os.geteuid() == 0
        self._state: _SandboxState | None = None
        self._state_error: str | None = None
        self._transactions: list[str | None] = []  # the cached probe of transaction_support()

    # -- argv and child set-up -----------------------------------------------------------------

    def _sandbox_state(self) -> _SandboxState:
        """The user namespaces, staging directory and /etc of this sandbox (made once; SandboxError if impossible)."""
        if self._state is not None:
            return self._state
        if self._state_error is not None:
            raise SandboxError(self._state_error)
        try:
            self._state = _SandboxState.create(self.workspace, self.config.sandbox_host_uid if self._root else None)
        except OSError as exc:
            self._state_error = f"the unprivileged sandbox cannot be set up here: {exc}"
            raise SandboxError(self._state_error) from None
        weakref.finalize(self, self._state.close)
        return self._state

    def _bwrap_options(self, *, zygote: bool = False) -> tuple[list[str], Callable[[], None] | None, list[int]]:
        """The bwrap command line up to the command, the ``preexec_fn`` of its process, the fds it inherits.

        Namespaces and binds for the filesystem as it is now; as root, the ``preexec_fn`` stages the sources.
        """
        assert self.bwrap is not None
        state = self._sandbox_state()
        argv = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if self.config.network == "none":
            argv.append("--unshare-net")
        uid = str(_userns.SANDBOX_ID)
        if state.userns is not None:
            # Our own user namespace: its one user is config.sandbox_host_uid on the host as root, else
            # the user Aleph runs as (bubblewrap then nests no namespace of its own: the zygote may mount).
            argv += ["--userns", str(state.userns.fd), "--uid", uid, "--gid", uid]
        else:
            argv += ["--unshare-user", "--uid", uid, "--gid", uid]
        # Capabilities exist only inside that namespace. The zygote keeps CAP_SYS_ADMIN there for the
        # overlays and hands no capability on; a per-run bubblewrap keeps none.
        argv += ["--cap-drop", "ALL"]
        if zygote and state.userns is not None:
            # What overlayfs needs of its mounter's credentials (copy-up, the work directory, whiteouts).
            for cap in _ZYGOTE_CAPS:
                argv += ["--cap-add", cap]
        argv += ["--ro-bind", "/usr", "/usr"]
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                argv += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                argv += ["--ro-bind", d, d]
        # A minimal /etc: the sandbox's passwd and group, and what tools need of the host's.
        for name in _ETC_ALLOW:
            if os.path.exists(f"/etc/{name}"):
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        argv += [
            "--ro-bind",
            str(state.etc / "passwd"),
            "/etc/passwd",
            "--ro-bind",
            str(state.etc / "group"),
            "/etc/group",
        ]
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", _LAYER_POINT]
        # The interpreter's prefix may live under /tmp (a CI checkout): bind it after the tmpfs, which bwrap allows.
        seen = {"/usr", "/etc"}
        extra = [sys.prefix, sys.base_prefix, *self.config.extra_ro_paths]
        if zygote:
            extra.append(str(_ZYGOTE_PATH))
        staged: list[tuple[str, str]] = []
        stage = state.stage_dir if state.idmap is not None else None

        def source(real: str, name: str) -> str:
            # As root, bubblewrap resolves sources as the sandbox's unprivileged user: through the staging tmpfs.
            if stage is None:
                return real
            staged.append((real, name))
            return f"{stage}/{name}"

        for p in extra:
            real = os.path.realpath(p)
            is_file = p == str(_ZYGOTE_PATH)
            if (os.path.isdir(real) or is_file) and not any(real == s or real.startswith(s + "/") for s in seen):
                argv += ["--ro-bind", source(real, f"ro{len(seen)}"), real]
                seen.add(real)
        ws = str(self.workspace)
        ws_source = f"{stage}/ws" if stage is not None else ws
        argv += ["--bind", ws_source, ws]
        # Aleph's own files and git hooks inside the workspace stay read-only for commands too.
        for path in self._ro_candidates:
            if path.exists():
                argv += ["--ro-bind", ws_source + str(path)[len(ws) :], str(path)]
        if stage is None:
            return argv, None, [state.userns.fd] if state.userns is not None else []
        assert state.userns is not None and state.idmap is not None
        preexec = _userns.stage(stage, staged, [(ws, "ws")], state.idmap)
        return argv, preexec, [state.userns.fd]

    def _hardening(self) -> dict[str, Any]:
        """What the zygote sets up in bubblewrap before it serves (see _zygote.main)."""
        return {
            # In our own user namespace (as root, and as a user who may make one) the zygote makes /proc's
            # kernel interfaces read-only and mounts the overlays. Else bubblewrap nests a user namespace
            # that owns no mount (for /dev's devpts): neither can be done (a user cannot write them anyway).
            "proc": self._state is not None and self._state.userns is not None,
            "base": _seccomp.BASE.hex(),
            "mounts": _seccomp.MOUNTS.hex(),
            "workspace": str(self.workspace),
            "protected": [str(path) for path in self._ro_candidates if path.exists()],
        }

    def _bwrap_argv(self, cwd: Path) -> tuple[list[str], Callable[[], None] | None, list[int]]:
        """The prefix of a per-run bubblewrap (the fallback when the zygote cannot start).

        The command gets the seccomp filters from bubblewrap (``--add-seccomp-fd``): each program in a
        fresh memfd, which the caller's child inherits (``pass_fds``) and closes once it has started.
        """
        argv, preexec, fds = self._bwrap_options()
        seccomp: list[str] = []
        for program in (_seccomp.BASE, _seccomp.MOUNTS):
            if program:
                fd = os.memfd_create("aleph-seccomp", os.MFD_CLOEXEC)
                os.write(fd, program)
                os.lseek(fd, 0, os.SEEK_SET)
                seccomp += ["--add-seccomp-fd", str(fd)]
                fds = [*fds, fd]
        return [*argv, *seccomp, "--chdir", str(cwd), "--"], preexec, fds

    def _preexec(self, cgroup: _Cgroup | None, cpu_seconds: int) -> Callable[[], None]:
        cfg = self.config
        procs_file = str(cgroup.path / "cgroup.procs") if cgroup else None

        def setup() -> None:
            # Runs in the child between fork and exec: join the cgroup first, so every descendant is in it.
            if procs_file is not None:
                with open(procs_file, "w") as fh:
                    fh.write(str(os.getpid()))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
            resource.setrlimit(resource.RLIMIT_AS, (cfg.memory_mb * MiB, cfg.memory_mb * MiB))
            resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.max_file_mb * MiB, cfg.max_file_mb * MiB))
            resource.setrlimit(resource.RLIMIT_NOFILE, (cfg.max_open_files, cfg.max_open_files))
            # Per-uid, and ignored for root: the cgroup's pids.max is what holds there.
            resource.setrlimit(resource.RLIMIT_NPROC, (cfg.max_processes, cfg.max_processes))

        return setup

    def _launcher(self, cgroup: _Cgroup | None, cpu_seconds: int) -> list[str] | None:
        """A vfork-friendly prefix that applies the same limits: ``sh`` joins the cgroup, ``prlimit`` sets rlimits.

        CPython must ``fork()`` the whole interpreter when a ``preexec_fn`` is given, but can ``vfork()``
        otherwise; two tiny execs cost far less than copying a large process's page tables. None when
        util-linux ``prlimit`` is missing (then :meth:`_preexec` does the same work in the child).
        """
        prlimit = _which_cached("prlimit")
        if prlimit is None:
            return None
        cfg = self.config

        def lim(name: str, value: int, hard: int | None = None) -> str:
            return f"--{name}={value}:{value if hard is None else hard}"

        prefix = []
        if cgroup is not None:
            # Join the cgroup before anything can fork; "$0" is the cgroup.procs path.
            prefix = [_which_cached("sh") or "/bin/sh", "-c", 'echo $$ > "$0" || exit 125; exec "$@"']
            prefix.append(str(cgroup.path / "cgroup.procs"))
        return [
            *prefix,
            prlimit,
            lim("core", 0),
            lim("cpu", cpu_seconds, cpu_seconds + 5),
            lim("as", cfg.memory_mb * MiB),
            lim("fsize", cfg.max_file_mb * MiB),
            lim("nofile", cfg.max_open_files),
            lim("nproc", cfg.max_processes),
            "--",
        ]

    # -- running -------------------------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float,
        stdin: bytes | None = None,
        on_line: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        layer: Path | None = None,
        _probe: bool = False,
    ) -> RunResult:
        """Run ``argv`` in ``cwd`` (already checked to lie inside the workspace); blocks until it is over.

        With ``layer`` (an empty directory outside the workspace), the command runs on a copy-on-write
        view of the workspace whose writes land in ``layer/upper`` (see :meth:`transaction_support`);
        :class:`TransactionUnavailable` when that cannot be set up, before the command starts.
        """
        if layer is not None:
            self._check_layer(layer, _probe)
        cfg = self.config
        env = self._run_env()
        marker = env[_MARKER]
        cpu_seconds = int(timeout) + 5
        cgroup = self._cgroups.take() if self._cgroups is not None else None
        start = time.monotonic()
        proc: subprocess.Popen[bytes] | _ZygoteRun
        try:
            zygote, proc = self._start(argv, cwd, env, cgroup, cpu_seconds, stdin, layer)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        output = _Output(cfg, on_line)
        timed_out = False
        killed: str | None = None
        try:
            timed_out, killed = self._pump(proc, stdin, output, start + timeout, cancel)
        finally:
            if isinstance(proc, _ZygoteRun):
                assert zygote is not None
                self._stop_zygote_run(proc, cgroup)
                self._release(zygote)
            else:
                self._kill_all(proc, cgroup, marker)
            if cgroup is not None:
                assert self._cgroups is not None
                self._cgroups.give(cgroup, self._zygote_pids() if zygote else set())
        if layer is not None:
            self._tidy_layer(layer)
        if isinstance(proc, _ZygoteRun) and proc.failure is not None:
            raise proc.failure
        return self._result(proc.returncode, output, timed_out, killed, cgroup, start, layer is not None)

    def transaction_support(self) -> str | None:
        """None when a run can get a per-run copy-on-write view of the workspace (``layer=``); else why not.

        Probed once (a run of ``true`` on a scratch layer), then cached.
        """
        with self._lock:
            if self._transactions:
                return self._transactions[0]
        reason = self._transaction_reason()
        if reason is None:
            import tempfile

            scratch = Path(tempfile.mkdtemp(prefix="aleph-layer-probe-"))
            try:
                result = self.run(["true"], cwd=self.workspace, timeout=30, layer=scratch, _probe=True)
                if result.exit_code != 0 or not (scratch / "upper").is_dir():
                    reason = (
                        f"a probe run on an overlay failed (exit {result.exit_code}): {result.stderr.strip()[:200]}"
                    )
            except (SandboxError, OSError) as exc:
                reason = str(exc)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        with self._lock:
            if not self._transactions:
                self._transactions.append(reason)
            return self._transactions[0]

    def _transaction_reason(self) -> str | None:
        """Why this sandbox can give no overlay, as far as is known without a probe."""
        if self.bwrap is None:
            return "isolation is none (no bubblewrap sandbox to mount an overlay in)"
        try:
            state = self._sandbox_state()
        except SandboxError as exc:
            return str(exc)
        if state.userns is None:
            return f"Aleph cannot make the sandbox's user namespace here: {state.userns_error}"
        if not self._root:
            try:
                state.layer_cloner()
            except OSError as exc:
                return f"the layer cannot be handed to the sandbox: {exc}"
        return None

    def _tidy_layer(self, layer: Path) -> None:
        """After a run on ``layer``: remove its ``work`` directory, which no caller needs.

        overlayfs leaves ``work/work`` with mode 000: root removes it anyway, a user (its owner) only
        after a chmod. ``upper`` is left as the command made it (its modes are part of the changeset).
        """
        if self._root:
            return
        work = layer / "work"
        try:
            for top, dirs, _ in os.walk(work, onerror=None):
                for name in dirs:
                    path = os.path.join(top, name)
                    if not os.path.islink(path):
                        os.chmod(path, 0o700)
            shutil.rmtree(work)
        except OSError:
            pass  # gone already, or the caller's removal reports what is left

    def _check_layer(self, layer: Path, probe: bool = False) -> None:
        """Refuse a ``layer`` this sandbox cannot use (the command does not start)."""
        layer = Path(layer)
        try:
            st = os.lstat(layer) if layer.is_absolute() else None
        except OSError:
            st = None
        if st is None or not (stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise ValueError(f"layer {layer}: not an absolute path to an existing directory")
        parent = self._layer_parents.get(layer.parent)
        if parent is None:
            if len(self._layer_parents) >= 64:
                self._layer_parents.clear()
            parent = self._layer_parents[layer.parent] = layer.parent.resolve()
        # The parent is resolved once; a layer that is itself a symlink is resolved every time.
        real = layer.resolve() if stat.S_ISLNK(st.st_mode) or layer.name in ("", ".", "..") else parent / layer.name
        if not real.is_dir():
            raise ValueError(f"layer {layer}: not an absolute path to an existing directory")
        if real == self.workspace or real.is_relative_to(self.workspace) or self.workspace.is_relative_to(real):
            raise ValueError(f"layer {layer}: it must lie outside the workspace {self.workspace}")
        with os.scandir(real) as entries:
            if next(entries, None) is not None:
                raise ValueError(f"layer {layer}: not empty")
        reason = self._transaction_reason() if probe else self.transaction_support()
        if reason is not None:
            raise TransactionUnavailable(reason)

    def _run_env(self) -> dict[str, str]:
        """The scrubbed environment of one run, carrying its fresh marker."""
        env = _host_env(self.config.env_allow, self.workspace)
        env[_MARKER] = f"{self._marker_prefix}{next(self._run_numbers):012x}"  # fixed width: no marker prefixes another
        return env

    def _result(
        self,
        returncode: int | None,
        output: _Output,
        timed_out: bool,
        killed: str | None,
        cgroup: _Cgroup | None,
        start: float,
        transaction: bool = False,
    ) -> RunResult:
        truncated = output.out.truncated or output.err.truncated
        if killed and killed.startswith("output limit") and returncode is not None:
            # Killed for its output: say how it ended as a shell would (128 + signal), never "no exit code".
            exit_code: int | None = 128 - returncode if returncode < 0 else returncode
        else:
            exit_code = None if timed_out or killed else returncode
        return RunResult(
            exit_code=exit_code,
            stdout=output.out.text(),
            stderr=output.err.text(),
            truncated=truncated,
            output_bytes={"stdout": output.out.sizes(), "stderr": output.err.sizes()} if truncated else None,
            timed_out=timed_out,
            isolation=self.isolation + ("+userns" if self.bwrap else "") + ("+cgroup" if cgroup else ""),
            network="none" if self.bwrap and self.config.network == "none" else "host",
            duration_ms=(time.monotonic() - start) * 1000,
            killed=killed,
            transaction=transaction,
        )

    # -- running on the event loop -------------------------------------------------------------

    async def arun(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float,
        stdin: bytes | None = None,
        on_line: Callable[[str], None] | None = None,
        layer: Path | None = None,
    ) -> RunResult:
        """:meth:`run` for an asyncio caller; cancelling the caller stops (and kills) the run.

        A run through the zygote is driven by the event loop itself: its pipes and its socket sit in an
        epoll that the loop's hub (:class:`_Hub`) watches, so no worker thread is woken per run. Starting
        the zygote (the first run of a sandbox, or after the binds changed), runs without one (no
        bubblewrap, or the per-run bubblewrap fallback) and the slow end of a run that left processes
        behind (SIGTERM, grace, SIGKILL) use a worker thread.
        """
        if layer is not None:
            self._check_layer(layer)
        zygote = self._running_zygote()
        if zygote is None:
            # Shielded: a start abandoned half-way would leave the zygote counted as in use.
            with anyio.CancelScope(shield=True):
                zygote = await anyio.to_thread.run_sync(self._acquire_zygote)
            if zygote is None:
                return await self._run_in_thread(argv, cwd, timeout, stdin, on_line, layer)
        env = self._run_env()
        cgroup = self._cgroups.take() if self._cgroups is not None else None
        start = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            run = self._stage(zygote, argv, cwd, env, cgroup, int(timeout) + 5, stdin, loop.call_soon, layer)
        except BaseException:
            self._unclaim(zygote, cgroup)
            raise
        try:
            # Sent as soon as it is staged: the zygote starts the command while we get ready to wait for it.
            run.send()
        except SandboxError:
            # It died since the last run. The blocking path replaces it (a start takes a while).
            self._unclaim(zygote, cgroup)
            self._retire(zygote)
            return await self._run_in_thread(argv, cwd, timeout, stdin, on_line, layer)

        def end() -> None:
            try:
                self._stop_zygote_run(run, cgroup)
            finally:
                self._unclaim(zygote, cgroup)

        output = _Output(self.config, on_line)
        try:
            timed_out, killed = await self._apump(run, stdin, output, start + timeout)
        except BaseException:
            # Cancelled: the run is stopped in the background; the caller does not wait for it.
            threading.Thread(target=end, name="aleph-exec-stop", daemon=True).start()
            raise
        if self._run_is_over(run, cgroup):
            # Nothing left to signal or wait for, and its cgroup is empty: free again. Closing the run
            # (which wakes the zygote to clean up) waits for the loop's next turn, off the caller's path.
            loop.call_soon(run.close)
            loop.call_soon(zygote.prepare)
            self._release(zygote)
            if cgroup is not None:
                assert self._cgroups is not None
                if run.lost:  # the zygote died: its namespace is going down, maybe not gone yet
                    self._cgroups.give(cgroup, self._zygote_pids())
                else:
                    self._cgroups.put_back(cgroup)
        else:
            await anyio.to_thread.run_sync(end)
        if layer is not None:
            self._tidy_layer(layer)
        if run.failure is not None:
            raise run.failure
        return self._result(run.returncode, output, timed_out, killed, cgroup, start, layer is not None)

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
    ) -> RunResult:
        cancel = threading.Event()

        def job() -> RunResult:
            return self.run(argv, cwd=cwd, timeout=timeout, stdin=stdin, on_line=on_line, cancel=cancel, layer=layer)

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

    def _start(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
        layer: Path | None = None,
    ) -> tuple[_Zygote | None, subprocess.Popen[bytes] | _ZygoteRun]:
        """Start the command through the zygote when there is one (a dead one is replaced once), else directly."""
        for attempt in range(2):
            zygote = self._acquire_zygote()
            if zygote is None:
                break
            try:
                run = self._stage(zygote, argv, cwd, env, cgroup, cpu_seconds, stdin, None, layer)
                run.send()
                return zygote, run
            except SandboxError:
                # It died since the last run (killed, crashed): retire it; the next attempt starts a new one.
                self._release(zygote)
                self._retire(zygote)
                if attempt:
                    raise
            except BaseException:
                self._release(zygote)
                raise
        if layer is not None:
            raise TransactionUnavailable(f"the sandbox server is not running ({self.zygote_error or 'no server'})")
        return None, self._popen(argv, cwd, env, cgroup, cpu_seconds, stdin)

    def _popen(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
    ) -> subprocess.Popen[bytes]:
        """Start the command directly (no bubblewrap), or in a bubblewrap of its own (the fallback)."""
        stage: Callable[[], None] | None = None
        pass_fds: list[int] = []
        full = argv
        if self.bwrap:
            prefix, stage, pass_fds = self._bwrap_argv(cwd)
            full = prefix + argv
        launcher = self._launcher(cgroup, cpu_seconds)
        if launcher is not None:
            full = launcher + full
        preexec: Callable[[], None] | None = None if launcher is not None else self._preexec(cgroup, cpu_seconds)
        if stage is not None:
            preexec = _chain(stage, preexec)
        try:
            return subprocess.Popen(
                full,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
                pass_fds=pass_fds,
                preexec_fn=preexec,
            )
        finally:
            userns = self._state.userns if self._state is not None else None
            for fd in pass_fds:  # the filters' memfds are the child's now; the user namespace stays ours
                if userns is None or fd != userns.fd:
                    os.close(fd)

    # -- the zygote: one bubblewrap per workspace ------------------------------------------------

    @property
    def zygote_pid(self) -> int | None:
        """The host pid of the running zygote (the server inside the persistent bubblewrap), or None."""
        zygote = self._zygote
        return zygote.host_pid if zygote is not None and zygote.alive() else None

    def close(self) -> None:
        """Stop the zygote, if one runs, and remove the cgroups kept for runs; a next run starts afresh."""
        with self._lock:
            self._zygote = None
        _shutdown(self._zygotes, self._cgroups)

    def _running_zygote(self) -> _Zygote | None:
        """The running zygote for the current binds, acquired, without starting one (None: it needs a start)."""
        key = self._bind_key()
        with self._lock:
            zygote = self._zygote
            if zygote is None or zygote.key != key or not zygote.alive():
                return None
            zygote.active += 1
            return zygote

    def _bind_key(self) -> tuple[bool, ...]:
        if self.bwrap is None:
            return ()  # no binds: the zygote runs on the host's filesystem
        return tuple(os.access(path, os.F_OK) for path in self._ro_texts)

    def _retire(self, zygote: _Zygote) -> None:
        """Take a zygote found dead out of service; it is closed once its last run is released."""
        with self._lock:
            if self._zygote is zygote:
                self._zygote = None
            zygote.retire()

    def _acquire_zygote(self) -> _Zygote | None:
        """The running zygote for the current binds (started, or restarted, here); None: per-run bwrap."""
        key = self._bind_key()
        with self._lock:
            zygote = self._zygote
            if zygote is not None and (zygote.key != key or not zygote.alive()):
                self._zygote = None
                zygote.retire()
                zygote = None
            if zygote is None:
                if self.zygote_error is not None and time.monotonic() < self._zygote_retry_at:
                    return None
                try:
                    try:
                        argv, preexec, fds = self._zygote_argv()
                        zygote = _Zygote.start(argv, key, namespaced=self.bwrap is not None, preexec=preexec, fds=fds)
                    except SandboxError as exc:
                        # A user's own namespace that bubblewrap cannot use (an LSM may confine namespaces
                        # made outside bubblewrap): bubblewrap makes one instead, without transactions.
                        # Only when bubblewrap refuses it and makes one itself: a start that failed
                        # under load is no reason to give up transactions.
                        refused = None if self._root else self._own_userns_refused()
                        if refused is None or self._state is None or not self._state.demote(refused):
                            raise exc from None
                        self._transactions.clear()  # probed again: no overlay without our namespace
                        argv, preexec, fds = self._zygote_argv()
                        zygote = _Zygote.start(argv, key, namespaced=self.bwrap is not None, preexec=preexec, fds=fds)
                except SandboxError as exc:
                    # Per-run bubblewrap meanwhile; a start that failed under load gets another chance later.
                    self.zygote_error = str(exc)
                    self._zygote_retry_at = time.monotonic() + _ZYGOTE_RETRY_S
                    return None
                self.zygote_error = None
                self._zygote = zygote
                self._zygotes.append(zygote)
            zygote.active += 1
            return zygote

    def _own_userns_refused(self) -> str | None:
        """As a user: bubblewrap's error when it refuses our user namespace but can make its own; else None."""
        state = self._state
        if self.bwrap is None or state is None or state.userns is None or state.idmap is not None:
            return None
        fd = state.userns.fd
        tries = {}
        for name, options in (("ours", ["--userns", str(fd)]), ("its", ["--unshare-user"])):
            try:
                done = subprocess.run(
                    [self.bwrap, *options, "--ro-bind", "/", "/", "--", "true"],
                    pass_fds=[fd],
                    capture_output=True,
                    timeout=30,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            tries[name] = (done.returncode, done.stderr.decode(errors="replace").strip()[-300:])
        if tries["ours"][0] != 0 and tries["its"][0] == 0:
            return tries["ours"][1] or f"exit {tries['ours'][0]}"
        return None

    def _release(self, zygote: _Zygote) -> None:
        with self._lock:
            zygote.active -= 1
            if zygote.retired and zygote.active == 0:
                zygote.close(wait=False)

    def _zygote_argv(self) -> tuple[list[str], Callable[[], None] | None, list[int]]:
        cfg = self.config
        limits = {
            "AS": [cfg.memory_mb * MiB] * 2,
            "FSIZE": [cfg.max_file_mb * MiB] * 2,
            "CORE": [0, 0],
        }
        path = str(_ZYGOTE_PATH)
        if self.bwrap is None:
            # No namespace: the server runs on the host, tracks a run's processes as its descendants.
            filters = {"base": _seccomp.BASE.hex(), "mounts": _seccomp.MOUNTS.hex()}
            argv = [sys.executable, "-I", "-S", path, "{control}", json.dumps(limits), "host", json.dumps(filters)]
            return argv, None, []
        options, preexec, fds = self._bwrap_options(zygote=True)
        # The zygote is the namespace's init: when it dies, the kernel ends every process of the namespace.
        # (bubblewrap's own init would wait for them: in our user namespace, --die-with-parent does not
        # reach it; the zygote asks for its parent's death signal itself.)
        argv = [
            *options,
            "--as-pid-1",
            "--chdir",
            "/",
            "--",
            os.path.abspath(sys.executable),
            "-I",
            "-S",
            path,
            "{control}",
        ]
        argv.append(json.dumps(limits))
        return [*argv, "ns", json.dumps(self._hardening())], preexec, fds

    def _stage(
        self,
        zygote: _Zygote,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
        later: Callable[..., object] | None = None,
        layer: Path | None = None,
    ) -> _ZygoteRun:
        cfg = self.config
        env = dict(env)
        marker = env.pop(_MARKER)  # the zygote puts it back in the environment
        head = [
            marker,
            str(cwd),
            cgroup.name if cgroup else "",
            *map(str, (cpu_seconds, cpu_seconds + 5, cfg.max_open_files, cfg.max_open_files)),
            *map(str, (cfg.max_processes, cfg.max_processes, len(argv))),
            *argv,
        ]
        try:
            payload = b"\0".join(_fsencode(field) for field in head)
            # The environment is the same from run to run (but for the marker): its encoding is made once.
            cached = self._env_blob
            if cached is None or cached[0] != env:
                texts = [text for pair in env.items() for text in pair]
                if any("\0" in text for text in texts):
                    raise ValueError("the environment contains a NUL byte")
                cached = self._env_blob = (env, b"\0".join(map(_fsencode, texts)))
        except ValueError as exc:  # a lone surrogate (UnicodeEncodeError) too
            raise OSError(f"cannot pass the command to the sandbox: {exc}") from None
        if payload.count(b"\0") != len(head) - 1:
            raise OSError("an argument contains a NUL byte, which no command line can carry")
        if cached[1]:
            payload += b"\0" + cached[1]
        layer_fd = self._layer_fd(layer) if layer is not None else -1
        run = zygote.stage(payload, stdin is not None, cgroup, later, layer_fd)
        run.marker = marker
        return run

    def _layer_fd(self, layer: Path) -> int:
        """The layer as a detached mount for the zygote (idmapped as the workspace is); TransactionUnavailable."""
        state = self._state
        if state is None or state.userns is None:
            raise TransactionUnavailable("no user namespace of the sandbox's own here")
        if state.idmap is None:
            # A user's layer is theirs already (the sandbox's user): a plain clone, made in that namespace.
            try:
                return state.layer_cloner().clone(layer)
            except OSError as exc:
                raise TransactionUnavailable(f"the layer {layer} cannot be handed to the sandbox: {exc}") from None
        try:
            owner = state.owner
            if owner is not None and (layer.stat().st_uid, layer.stat().st_gid) != owner:
                os.chown(layer, *owner)  # its upper/ and work/ are made by the sandbox user: the owner on disk
            return _userns.idmapped_clone(layer, state.idmap)
        except OSError as exc:
            raise TransactionUnavailable(f"the layer {layer} cannot be handed to the sandbox: {exc}") from None

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


# A run's socket pair (ours, the zygote's), stdout and stderr pipes (read, write ends) and private epoll.
_Kit = tuple[socket.socket, socket.socket, int, int, int, int, select.epoll]
# A kit whose far ends the zygote holds already (see _Zygote.prepare): its id, our ends, the epoll.
_Armed = tuple[int, socket.socket, int, int, select.epoll]


class SandboxError(RuntimeError):
    """The sandbox could not run the command: its zygote stopped during the run, or did not start."""


class TransactionUnavailable(SandboxError):
    """A run asked for a copy-on-write layer that this sandbox cannot give; the command did not start."""


_ZYGOTE_PATH = Path(__file__).with_name("_zygote.py")
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
            reply = json.loads(control.recv(256) or b"{}") if ready else {}
            if "ready" not in reply:
                raise SandboxError("no ready message")
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
    ) -> _ZygoteRun:
        """A run for the zygote, ready to go; :meth:`_ZygoteRun.send` hands it over.

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
            run.staged = _Staged(b"%d" % kit_id, [], (), in_r, cgroup, request, later, layer)
        else:
            ours, theirs, out_r, out_w, err_r, err_w, poller = _new_kit()
            run = _ZygoteRun(ours, in_w, out_r, err_r, poller)
            far = (theirs, _Fd(out_w), _Fd(err_w))
            run.staged = _Staged(b"+", [theirs.fileno(), out_w, err_w], far, in_r, cgroup, request, later, layer)
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
            head = b"go %s %s" % (staged.kit, flags or b"-")
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
            data = self.sock.recv(65536)
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
            elif "alive" in message:
                self._alive = message["alive"]
            elif "error" in message:
                self.returncode = 127
                self.failure = (
                    TransactionUnavailable(message["error"]) if message.get("layer") else OSError(message["error"])
                )
                if self.zygote is not None:
                    self.zygote.forget_cgroup()

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


def _zygote_host_pid(bwrap_pid: int, ns_pid: int) -> int | None:
    """The host pid of the zygote (``ns_pid`` in bwrap's namespace): never to be among a run's kill targets."""
    for child in _children(bwrap_pid):
        if _nspids(child)[-1:] == [ns_pid]:
            return child  # the zygote is the namespace's pid 1 (--as-pid-1)
        for pid in _children(child):
            if _nspids(pid)[-1:] == [ns_pid]:
                return pid
    return None


def _nspids(pid: int) -> list[int]:
    """``pid`` as seen from each PID namespace it is in, outermost first (empty when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def _reap_orphaned_inits() -> None:
    """Reap bubblewrap namespace inits re-parented to us, which happens while we are a subreaper.

    bwrap can exit a moment before its namespace's init (pid 1 inside); as a subreaper (see
    :func:`_become_subreaper`) we then inherit that init, and it would stay a zombie. Only orphans
    become our children this way, so reaping them takes nothing from a ``Popen``.
    """
    end = time.monotonic() + 2.0
    while True:
        dying = False
        for task in os.listdir("/proc/self/task"):
            for pid in _children(os.getpid(), int(task)) if task.isdigit() else []:
                if _nspids(pid)[1:] == [1]:
                    _reap([pid])
                    dying = dying or _nspids(pid)[1:] == [1]
        if not dying or time.monotonic() > end:
            return
        time.sleep(0.002)


_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Make this process the reaper of orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).

    Without a PID namespace, a descendant that outlives its parent is re-parented to PID 1, and not
    every PID 1 reaps (container inits often do not). As a subreaper we inherit our runs' orphans and
    reap the ones we killed. Side effect: orphans of other subprocesses of this process come to us too
    and stay zombies until the process exits, as they would under a non-reaping PID 1.
    """
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        return


def _children(pid: int, task: int | None = None) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{task or pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except (OSError, ValueError):
        return []


def _reap_until_gone(pids: set[int], seconds: float = 2.0) -> None:
    """Reap killed processes as they come back to us: re-parenting follows their parent's death."""
    end = time.monotonic() + seconds
    while pids:
        _reap(pids)
        if not any(_is_our_zombie_or_child(pid) for pid in pids) or time.monotonic() > end:
            return
        time.sleep(0.002)


def _reap(pids: Iterable[int]) -> None:
    """Collect the exit status of killed descendants that were re-parented to us."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _is_our_zombie_or_child(pid: int) -> bool:
    """True while ``pid`` exists and we can still expect to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    # Still dying, or a zombie whose parent is still dying: it will be re-parented to us and reaped.
    # One under PID 1 is out of our reach.
    return int(fields[1]) != 1


def _alive(pid: int) -> bool:
    """True unless ``pid`` is gone or a zombie (zombies cannot be killed, only reaped by their parent)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


_ZYGOTE_CAPS = (
    "CAP_SYS_ADMIN", "CAP_SYS_CHROOT", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_CHOWN", "CAP_FOWNER",
    "CAP_FSETID", "CAP_MKNOD",
)  # fmt: skip
_LAYER_POINT = (
    "/run/aleph-layer"  # where a run's child attaches its layer, for the overlay mount (the zygote's LAYER_DIR)
)


def _chain(first: Callable[[], None], then: Callable[[], None] | None) -> Callable[[], None]:
    def both() -> None:
        first()
        if then is not None:
            then()

    return both


class _SandboxState:
    """What an unprivileged sandbox keeps on the host: its /etc files, the staging point, user namespaces.

    As root: ``userns`` (the sandbox's: SANDBOX_ID is the host uid) and ``idmap`` (for idmapped mounts:
    the workspace owner on disk shows as the host uid). As a user: ``userns`` maps SANDBOX_ID to the
    user (None, with ``userns_error``, where the user may make none: bubblewrap then makes one) and no
    ``idmap``; layers are cloned by a :class:`_userns.LayerCloner`.
    """

    def __init__(self, root: Path, userns: _userns.Idmap | None, idmap: _userns.Idmap | None) -> None:
        self.root = root
        self.etc = root / "etc"
        self.stage_dir = str(root / "stage")
        self.userns = userns
        self.idmap = idmap
        self.owner: tuple[int, int] | None = None  # the workspace's owner on disk (uid, gid), with ``idmap``
        self.userns_error: str | None = None  # why a user got no user namespace of ours (then ``userns`` is None)
        self._cloner: _userns.LayerCloner | None = None
        self._cloner_lock = threading.Lock()
        self._retired: list[_userns.Idmap] = []

    def demote(self, why: str) -> bool:
        """As a user: give up our own user namespace (bubblewrap makes one per sandbox instead); False if none."""
        if self.userns is None or self.idmap is not None:
            return False
        self._retired.append(self.userns)  # closed with the state: a run may still be passing its fd
        self.userns = None
        self.userns_error = f"bubblewrap could not use it: {why}"
        return True

    def layer_cloner(self) -> _userns.LayerCloner:
        """As a user: the helper that clones layer directories in the sandbox's user namespace (started once)."""
        assert self.userns is not None
        with self._cloner_lock:
            if self._cloner is None or self._cloner.proc.poll() is not None:
                self._cloner = _userns.LayerCloner(self.userns.fd)
            return self._cloner

    @classmethod
    def create(cls, workspace: Path, host_uid: int | None) -> _SandboxState:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="aleph-sandbox-"))
        try:
            root.chmod(0o755)
            (root / "etc").mkdir(mode=0o755)
            (root / "stage").mkdir(mode=0o755)
            sid = _userns.SANDBOX_ID
            (root / "etc" / "passwd").write_text(
                "root:x:0:0:root:/root:/bin/bash\n"
                f"aleph:x:{sid}:{sid}:Aleph sandbox:{workspace}:/bin/bash\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            )
            (root / "etc" / "group").write_text(f"root:x:0:\naleph:x:{sid}:\nnogroup:x:65534:\n")
            for name in ("passwd", "group"):
                (root / "etc" / name).chmod(0o644)
            userns = idmap = None
            if host_uid is not None:
                userns = _userns.Idmap(sid, host_uid)
                # On disk the workspace's owner (root in CI, or the user of a checkout) is the sandbox user.
                owner = workspace.stat()
                idmap = _userns.Idmap(owner.st_uid, host_uid, owner.st_gid)
                state = cls(root, userns, idmap)
                state.owner = (owner.st_uid, owner.st_gid)
                return state
            # A user: the sandbox's user is the user itself (the workspace is theirs); no idmapped mounts.
            try:
                userns = _userns.Idmap(sid, os.getuid(), host_gid=os.getgid())
            except OSError as exc:
                state = cls(root, None, None)
                state.userns_error = str(exc)  # bubblewrap may still make one (--unshare-user)
                return state
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, userns, idmap)

    def close(self) -> None:
        if self._cloner is not None:
            self._cloner.close()
        for ns in (self.userns, self.idmap, *self._retired):
            if ns is not None:
                ns.close()
        shutil.rmtree(self.root, ignore_errors=True)
