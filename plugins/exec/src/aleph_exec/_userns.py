"""User namespaces and idmapped mounts for the sandbox (Linux, through ``ctypes``).

When Aleph runs as root, a sandboxed command must still not be host uid 0. The sandbox runs in a user
namespace that maps its one user (uid/gid ``SANDBOX_ID`` inside) to an unprivileged host uid
(``[exec] sandbox_host_uid``, default 65534). The workspace belongs to someone else (host root in CI,
or the user who owns the checkout), so it is bound into the sandbox through an **idmapped mount**
(``open_tree(OPEN_TREE_CLONE)`` + ``mount_setattr(MOUNT_ATTR_IDMAP)`` + ``move_mount``, Linux 5.12 or
later): a file owned on disk by the workspace's owner (uid and gid) shows as owned by that host uid, so
the sandbox user owns the workspace, and what it creates lands on disk as the owner's. A run's
copy-on-write layer is handed to the sandbox the same way (a detached idmapped clone).

Paths that the unprivileged host uid cannot reach (the Python of a CI job under ``/root``, a workspace
under a 0700 directory) are bound into a private *staging* tmpfs first, in a mount namespace of the
process that becomes bubblewrap (:func:`stage`), and bubblewrap binds them from there.

As a user (not root), the sandbox's user namespace is made the same way, mapping ``SANDBOX_ID`` to the
user's own uid and gid (``setgroups`` denied first, as the kernel requires of an unprivileged gid_map);
the workspace is the user's already, so nothing is idmapped or staged. A run's layer is cloned by
:class:`LayerCloner`, a helper living in that namespace (a user cannot clone the host's mounts).

The new mount syscalls have the same numbers on x86_64 and aarch64 (generic table, 428 and later).
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
from collections.abc import Callable

__all__ = ["SANDBOX_ID", "Idmap", "IdmapError", "LayerCloner", "idmapped_clone", "stage"]

SANDBOX_ID = 1000
"""The uid and gid of the sandbox's user, inside its user namespace (``aleph`` in its /etc/passwd)."""

_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_MOUNT_SETATTR = 442
_OPEN_TREE_CLONE = 1
_OPEN_TREE_CLOEXEC = os.O_CLOEXEC
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_IDMAP = 0x100000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNS = 0x20000
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class IdmapError(OSError):
    """A user namespace or an idmapped mount could not be made here."""


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise IdmapError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _unshare_user(report: int) -> Callable[[], None]:
    def unshare() -> None:  # pragma: no cover - runs in a forked child
        if _libc.unshare(_CLONE_NEWUSER) != 0:
            errno = ctypes.get_errno()
            os.write(report, b"%d" % errno)  # the parent's only way to learn the kernel's errno
            raise OSError(errno, "unshare(CLONE_NEWUSER)")

    return unshare


class Idmap:
    """A user namespace that maps uid ``inside`` (and gid ``inside_gid``, default the same) to ``host``.

    Its fd is kept open while in use.
    """

    def __init__(self, inside: int, host: int, inside_gid: int | None = None, *, host_gid: int | None = None) -> None:
        self.inside, self.host = inside, host
        report_r, report_w = os.pipe()
        try:
            holder = subprocess.Popen(["sleep", "60"], preexec_fn=_unshare_user(report_w), close_fds=True)
        except subprocess.SubprocessError:
            os.close(report_w)
            with os.fdopen(report_r, "rb") as fh:
                errno = int(fh.read(16) or b"0")
            raise IdmapError(
                errno, f"cannot make a user namespace: unshare(CLONE_NEWUSER): {os.strerror(errno)}"
            ) from None
        os.close(report_r)
        os.close(report_w)
        gid = inside if inside_gid is None else inside_gid
        try:
            if host_gid is not None:
                # A user may map only its own gid, and only once setgroups(2) is denied in the namespace.
                with open(f"/proc/{holder.pid}/setgroups", "w") as fh:
                    fh.write("deny\n")
            for name, first, outside in (
                ("uid_map", inside, host),
                ("gid_map", gid, host if host_gid is None else host_gid),
            ):
                with open(f"/proc/{holder.pid}/{name}", "w") as fh:
                    fh.write(f"{first} {outside} 1\n")
            self.fd = os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise IdmapError(
                exc.errno or 0, f"cannot make a user namespace mapping {inside} to {host}: {exc}"
            ) from None
        finally:
            holder.kill()
            holder.wait()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def idmapped_clone(path: str | os.PathLike[str], idmap: Idmap, *, recursive: bool = False) -> int:
    """A detached clone of the mount at ``path``, idmapped by ``idmap``.

    On disk ``idmap.inside`` shows as ``idmap.host``. The fd is close-on-exec; attach it with ``move_mount``.
    """
    # A symlink put in the path's place is not followed: the clone is of the directory that was checked.
    flags = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_SYMLINK_NOFOLLOW | (_AT_RECURSIVE if recursive else 0)
    fd = _check(_libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, os.fsencode(path), flags), f"open_tree({path})")
    attr = ctypes.create_string_buffer(struct.pack("QQQQ", _MOUNT_ATTR_IDMAP, 0, 0, idmap.fd))
    try:
        _check(
            _libc.syscall(_SYS_MOUNT_SETATTR, fd, b"", _AT_EMPTY_PATH | (_AT_RECURSIVE if recursive else 0), attr, 32),
            f"mount_setattr(MOUNT_ATTR_IDMAP) on {path}",
        )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    if _libc.mount(source, target, fstype, flags, data) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target.decode(errors='replace')}: {os.strerror(errno)}")


def stage(
    staging: str, binds: list[tuple[str, str]], idmapped: list[tuple[str, str]], idmap: Idmap | None
) -> Callable[[], None]:
    """A ``preexec_fn`` for the child that becomes bubblewrap: its sources staged where bubblewrap can reach them.

    It makes a private mount namespace, mounts a tmpfs on ``staging``, binds each ``(source, name)`` of
    ``binds`` at ``staging/name`` (``idmapped`` ones through an idmapped clone), then drops supplementary
    groups.

    Runs as root in the child; nothing of it is visible on the host.
    """
    stage_b = os.fsencode(staging)

    def setup() -> None:  # pragma: no cover - runs in a forked child
        if _libc.unshare(_CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        _mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None)
        _mount(b"tmpfs", stage_b, b"tmpfs", 0, b"mode=0755,size=64k")
        for source, name in binds:
            target = stage_b + b"/" + os.fsencode(name)
            if os.path.isdir(source):
                os.mkdir(target, 0o755)
            else:
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
            _mount(os.fsencode(source), target, None, _MS_BIND | _MS_REC, None)
        for source, name in idmapped:
            assert idmap is not None
            target = stage_b + b"/" + os.fsencode(name)
            os.mkdir(target, 0o755)
            fd = idmapped_clone(source, idmap)
            try:
                _check(
                    _libc.syscall(_SYS_MOVE_MOUNT, fd, b"", _AT_FDCWD, target, _MOVE_MOUNT_F_EMPTY_PATH),
                    f"move_mount onto {target.decode(errors='replace')}",
                )
            finally:
                os.close(fd)
        os.setgroups([])

    return setup


class LayerCloner:
    """Detached clones of a user's layer directories, for the zygote of a sandbox run by that user (not root).

    A user cannot clone a mount of the host's mount namespace (it belongs to the initial user namespace),
    and overlayfs takes its upper directory only from a mount of the mounter's own namespace. This
    helper process joins the sandbox's user namespace (the user owns it) and makes a mount namespace
    of its own there: a copy of the host's, whose mounts it may clone. Each :meth:`clone` returns a
    detached clone of one directory (``open_tree(OPEN_TREE_CLONE)``), which the zygote attaches in a
    run's namespace as it does root's idmapped clones. No idmapping: the user is the sandbox's user.
    """

    def __init__(self, userns_fd: int) -> None:
        import socket
        import sys
        import threading

        self._lock = threading.Lock()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, "clone-server", str(theirs.fileno()), str(userns_fd)],
                pass_fds=[theirs.fileno(), userns_fd],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                cwd="/",
            )
        finally:
            theirs.close()
        self.sock.settimeout(10)
        try:
            ready = self.sock.recv(256)
        except OSError:
            ready = b""
        if ready != b"ready":
            self.sock.close()
            self.proc.kill()
            _, err = self.proc.communicate()
            detail = ready.decode(errors="replace") or err.decode(errors="replace").strip()[-300:] or "no answer"
            raise IdmapError(0, f"the layer helper did not start: {detail}")

    def clone(self, path: str | os.PathLike[str]) -> int:
        """A detached clone of the directory ``path`` (not followed if a symlink); IdmapError says why not."""
        import socket

        with self._lock:
            try:
                self.sock.send(os.fsencode(path))
                msg, fds, _, _ = socket.recv_fds(self.sock, 512, 1)
            except OSError as exc:
                # A late answer must never be taken for the next request's: this helper is done.
                self.close()
                raise IdmapError(exc.errno or 0, f"the layer helper is gone: {exc}") from None
        if fds:
            return fds[0]
        raise IdmapError(0, msg.decode(errors="replace") or "the layer helper is gone")

    def close(self) -> None:
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def _clone_server(sock_fd: int, userns_fd: int) -> None:  # pragma: no cover - the helper process
    import socket

    sock = socket.socket(fileno=sock_fd)
    try:
        _check(_libc.setns(userns_fd, _CLONE_NEWUSER), "setns(CLONE_NEWUSER)")
        os.close(userns_fd)
        _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    except OSError as exc:
        sock.send(f"cannot enter the sandbox's user namespace: {exc}".encode())
        return
    sock.send(b"ready")
    flags = _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_SYMLINK_NOFOLLOW
    while True:
        path = sock.recv(8192)
        if not path:
            return
        try:
            fd = _check(_libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, path, flags), f"open_tree({os.fsdecode(path)})")
        except OSError as exc:
            sock.send(str(exc).encode(errors="replace"))
            continue
        try:
            socket.send_fds(sock, [b"ok"], [fd])
        finally:
            os.close(fd)


if __name__ == "__main__":  # pragma: no cover - the layer helper (see LayerCloner)
    import sys

    if sys.argv[1:2] == ["clone-server"]:
        _clone_server(int(sys.argv[2]), int(sys.argv[3]))
