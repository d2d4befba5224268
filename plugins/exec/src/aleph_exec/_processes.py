"""Processes on the host: pids cgroups, the processes a run left behind (a /proc sweep), reaping, subreaping."""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Iterable
from pathlib import Path

_MARKER = "ALEPH_SANDBOX_RUN"  # the environment variable that tags every process of a run


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
