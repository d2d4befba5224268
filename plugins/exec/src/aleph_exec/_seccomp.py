"""The sandbox's seccomp filters: classic BPF built here, installed by the zygote (``prctl``).

In the spirit of Codex's Linux sandbox and Anthropic's sandbox-runtime, a deny-list of the system calls
no build, test or package install needs and that reach the kernel's most dangerous surfaces: kernel
modules, kexec, bpf, the keyring, perf events, userfaultfd, handle-based opens, swap, reboot, port I/O,
new user namespaces (``unshare``/``clone`` with ``CLONE_NEWUSER``; ``clone3`` answers ``ENOSYS``, as
its flags sit behind a pointer, and libc falls back to ``clone``), ``setns`` into anything but a mount or
network namespace (which needs ``CAP_SYS_ADMIN``: only the zygote has it), io_uring (whose operations
seccomp cannot see), and on x86_64 the x32 ABI. A denied call fails with ``EPERM`` (``ENOSYS`` where a
fallback exists); a foreign architecture is killed.

Two programs, stacked (the kernel runs every installed filter and takes the strictest answer):

* :data:`BASE`, which the zygote installs on itself at start, so every command it starts has it;
* :data:`MOUNTS`, the mount family (``mount``, ``umount2``, ``pivot_root``, the new mount API, every
  ``unshare``), which a run's child installs after its own mounts (the overlay) and before ``exec``.
  The zygote needs those calls for the overlays; the commands it ``posix_spawn``s without a layer hold
  no capability, so the kernel refuses them the mount family anyway (and a new user namespace, the one
  way to regain capabilities, is denied by :data:`BASE`).

``ptrace`` stays allowed, so ``gdb`` and ``strace`` work inside: a PID namespace hides every process
outside the sandbox, and the zygote is not dumpable.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["ARCH", "BASE", "MOUNTS", "program"]

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
ARCH = platform.machine()

# System call numbers (x86_64, aarch64).
_NR: dict[str, tuple[int, int]] = {
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "bpf": (321, 280),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "setns": (308, 268),
    "acct": (163, 89),
    "syslog": (103, 116),
    "quotactl": (179, 60),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "lookup_dcookie": (212, 18),
    "vhangup": (153, 58),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "clone3": (435, 435),
    "unshare": (272, 97),
    "clone": (56, 220),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "chroot": (161, 51),
}
_X86_ONLY = {"iopl": 172, "ioperm": 173, "uselib": 134, "_sysctl": 156, "nfsservctl": 180}

_EPERM, _ENOSYS = 1, 38
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNS = 0x20000
_CLONE_NEWNET = 0x40000000

# BPF opcodes.
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

_BASE_DENY = [
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "bpf", "keyctl",
    "add_key", "request_key", "perf_event_open", "userfaultfd", "open_by_handle_at", "name_to_handle_at",
    "swapon", "swapoff", "reboot", "acct", "syslog", "quotactl", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib", "_sysctl",
    "nfsservctl",
]  # fmt: skip
_BASE_ENOSYS = ["io_uring_setup", "io_uring_enter", "io_uring_register", "clone3"]
_MOUNT_DENY = [
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "unshare", "chroot",
]  # fmt: skip


def _nr(name: str) -> int | None:
    if name in _X86_ONLY:
        return _X86_ONLY[name] if ARCH == "x86_64" else None
    pair = _NR[name]
    return pair[0] if ARCH == "x86_64" else pair[1]


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def program(deny: list[str], enosys: tuple[str, ...] | list[str] = (), *, newuser_check: bool = False) -> bytes:
    """A filter program (``struct sock_filter[]`` bytes) for this machine's architecture."""
    arch = _AUDIT_ARCH.get(ARCH)
    if arch is None:
        raise OSError(f"no seccomp filter for the {ARCH} architecture")
    code = [_ins(_LD_W_ABS, 4), _ins(_JEQ_K, arch, 1, 0), _ins(_RET_K, _RET_KILL_PROCESS), _ins(_LD_W_ABS, 0)]
    if ARCH == "x86_64":
        code += [_ins(_JGE_K, 0x40000000, 0, 1), _ins(_RET_K, _RET_ERRNO | _EPERM)]  # the x32 ABI
    for names, errno in ((deny, _EPERM), (enosys, _ENOSYS)):
        for name in names:
            nr = _nr(name)
            if nr is not None:
                code += [_ins(_JEQ_K, nr, 0, 1), _ins(_RET_K, _RET_ERRNO | errno)]
    if newuser_check:
        # setns(fd, nstype): only into a mount or a network namespace, named (what the zygote does for an
        # overlay run, and for a run's own network namespace; both need CAP_SYS_ADMIN, which no command
        # has). The low word of the second argument: offset 24.
        code += [
            _ins(_JEQ_K, _nr("setns") or 0, 0, 5),
            _ins(_LD_W_ABS, 24),
            _ins(_JEQ_K, _CLONE_NEWNS, 2, 0),
            _ins(_JEQ_K, _CLONE_NEWNET, 1, 0),
            _ins(_RET_K, _RET_ERRNO | _EPERM),
            _ins(_RET_K, _RET_ALLOW),
            _ins(_LD_W_ABS, 0),
        ]
        # unshare(flags) and clone(flags, ...): the low word of the first argument (offset 16, little-endian).
        code += [
            _ins(_JEQ_K, _nr("unshare") or 0, 1, 0),
            _ins(_JEQ_K, _nr("clone") or 0, 0, 3),
            _ins(_LD_W_ABS, 16),
            _ins(_JSET_K, _CLONE_NEWUSER, 0, 1),
            _ins(_RET_K, _RET_ERRNO | _EPERM),
        ]
    code.append(_ins(_RET_K, _RET_ALLOW))
    return b"".join(code)


BASE = program(_BASE_DENY, _BASE_ENOSYS, newuser_check=True) if ARCH in _AUDIT_ARCH else b""
"""Installed by the zygote on itself (empty on an architecture without a table: no filter)."""
MOUNTS = program(_MOUNT_DENY) if ARCH in _AUDIT_ARCH else b""
"""Installed by a run's child after its mounts."""
