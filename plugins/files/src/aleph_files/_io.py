"""Confined reading and atomic writing, shared by the file tools."""

from __future__ import annotations

import os
import posixpath
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from aleph import ExecutionFailed, PermissionDenied, ToolError, ValidationFailed
from aleph_files._confine import PathError, Target, Workspace
from aleph_files._journal import TEMP_SUFFIX, TempJournal

__all__ = ["Original", "atomic_write", "guard", "read_limited", "restore", "snapshot", "sniff_binary"]

_SNIFF = 8192


@contextmanager
def guard(tool: str) -> Iterator[None]:
    """Turn a refused path or an OS error into the matching :class:`ToolError` for ``tool``."""
    try:
        yield
    except ToolError:
        raise
    except PathError as exc:
        if exc.kind == "invalid":
            raise ValidationFailed(tool, f"path: {exc}") from None
        if exc.kind == "denied":
            raise PermissionDenied(tool, str(exc)) from None
        raise ExecutionFailed(tool, str(exc)) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise ExecutionFailed(tool, f"{exc.strerror or exc}{where}") from None


def read_limited(fd: int, limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes from ``fd`` (one more than allowed, to detect overflow)."""
    chunks = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def sniff_binary(data: bytes) -> bool:
    """True when ``data`` looks binary: a NUL byte near the start, or not valid UTF-8."""
    if b"\x00" in data[:_SNIFF]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@dataclass(slots=True)
class Original:
    """What a file looked like before a write, for a rollback journal (``data`` None: it did not exist)."""

    path: str
    data: bytes | None
    mode: int | None


def _write_into(
    target: Target, data: bytes, mode: int, owner: tuple[int, int] | None, journal: TempJournal | None
) -> None:
    # The temporary name must stay within NAME_MAX; it lives in the same directory so rename is atomic.
    tmp = f".{target.name[:200]}.{secrets.token_hex(6)}{TEMP_SUFFIX}"
    note = journal.note(posixpath.dirname(target.rel) or ".", tmp) if journal is not None else None
    try:
        _write_via(target, tmp, data, mode, owner)
    finally:
        if note is not None and journal is not None:
            journal.drop(note)
    os.fsync(target.parent_fd)


def _write_via(target: Target, tmp: str, data: bytes, mode: int, owner: tuple[int, int] | None) -> None:
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=target.parent_fd
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if owner is not None:
                try:
                    os.fchown(fd, *owner)
                except PermissionError:
                    pass
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, target.name, src_dir_fd=target.parent_fd, dst_dir_fd=target.parent_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=target.parent_fd)
        except FileNotFoundError:
            pass
        raise


def atomic_write(
    ws: Workspace, path: str, data: bytes, *, create_dirs: bool = False, mode: int | None = None
) -> tuple[str, bool]:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename); returns (relative path, created).

    A reader sees the old content or the new, never a mix. An existing file keeps its mode (and
    owner, where permitted); a new one gets ``mode`` (default 0644). Protected paths are refused.
    """
    with ws.resolve(path, create_dirs=create_dirs) as target:
        ws.check_writable(target, path)
        st = target.lstat()
        if st is not None and not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise PathError("type", f"{path!r} is {kind}; refusing to replace it")
        mode = stat.S_IMODE(st.st_mode) if st is not None else (0o644 if mode is None else mode)
        owner = (st.st_uid, st.st_gid) if st is not None else None
        _write_into(target, data, mode, owner, ws.journal)
        return target.rel, st is None


def snapshot(ws: Workspace, path: str, limit: int) -> Original:
    """Record ``path``'s current content and mode (or its absence) before changing it."""
    try:
        with ws.resolve(path) as target:
            if target.lstat() is None:
                return Original(target.rel, None, None)
    except PathError as exc:
        if exc.kind != "missing":
            raise
        return Original(path, None, None)
    with ws.open_regular(path) as (fd, _):
        data = read_limited(fd, limit)
        if len(data) > limit:
            raise PathError("type", f"{path!r} is larger than {limit} bytes; refusing to rewrite it")
        return Original(path, data, stat.S_IMODE(os.fstat(fd).st_mode))


def restore(ws: Workspace, original: Original) -> None:
    """Put a file back as :func:`snapshot` recorded it (delete it if it did not exist)."""
    if original.data is None:
        try:
            with ws.resolve(original.path, follow_last=False) as target:
                os.unlink(target.name, dir_fd=target.parent_fd)
        except FileNotFoundError:
            pass
        except PathError as exc:
            if exc.kind != "missing":
                raise
        return
    with ws.resolve(original.path, create_dirs=True) as target:
        _write_into(target, original.data, original.mode or 0o644, None, ws.journal)
