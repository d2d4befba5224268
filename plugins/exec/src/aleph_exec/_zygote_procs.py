"""The zygote's housekeeping: a run's processes (from /proc), the closer process, and each run's /tmp.

Part of the zygote (:mod:`aleph_exec._zygote`): standard library only, loaded from beside it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import time

from _zygote_kernel import PR_SET_NAME, libc

CLOSER_DELAY_S = 0.02  # how long the closer waits before it tears a namespace down


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


_TMP_MOUNTS: list[list[str]] = []  # the mount points below /tmp, read once (see clear_tmp)


def clear_tmp(keep: set[str]) -> None:
    """Empty the sandbox's /tmp but for the paths in ``keep``: what one call left there is never seen by the next.

    Nothing at a mount point or inside one is touched: the workspace (or the interpreter, in CI) may be
    bound below /tmp, and clearing must never reach into it; the directories on the way to such a bind
    are kept, and emptied of everything else. The mount points are read once: this server's own mount
    namespace is set up by bubblewrap before it starts (a run's overlay is mounted in the run's own
    namespace), and a mount the host adds later can only appear inside a bind, which is never entered.
    """
    if not _TMP_MOUNTS:
        try:
            _TMP_MOUNTS.append(mount_points("/tmp"))
        except OSError:
            return
    mounts = _TMP_MOUNTS[0]
    todo = ["/tmp"]
    while todo:
        where = todo.pop()
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            path = f"{where}/{name}"
            if path in keep or path in mounts:
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
