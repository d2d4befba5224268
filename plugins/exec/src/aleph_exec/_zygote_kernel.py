"""The zygote's kernel calls: mounts, the overlay of a run, /proc hardening, capabilities, seccomp.

Part of the zygote (:mod:`aleph_exec._zygote`): standard library only, loaded from beside it.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct


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
    for path, mode in ((upper, 0o755), (work, 0o700)):
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            # Left by an overlay mounted ahead on this layer (the host checked it holds nothing else,
            # and upper nothing); overlayfs empties its work directory as it mounts.
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise
    options = (
        f"lowerdir={ovl_escape(workspace)},upperdir={ovl_escape(upper)},workdir={ovl_escape(work)},"
        "userxattr,redirect_dir=nofollow,metacopy=off,index=off,xino=off"
    )
    mount("overlay", workspace, "overlay", 0, options)
    # Hidden under an empty read-only tmpfs: an unmount would wait for an RCU grace period (milliseconds
    # under load) on the run's path; what is under it goes with the namespace (see closer).
    empty = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount("tmpfs", LAYER_DIR, "tmpfs", empty, "size=0,mode=0555")
    # The workspace's layers (its .aleph-tx, this run's own layer among them) under an empty read-only
    # tmpfs too: the command sees its writes through the overlay only, and no other run's layer.
    for path in [str(p) for p in hardening.get("masked", [])]:  # type: ignore[attr-defined]
        if os.path.isdir(path) and not os.path.islink(path):
            mount("tmpfs", path, "tmpfs", empty, "size=0,mode=0555")
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
