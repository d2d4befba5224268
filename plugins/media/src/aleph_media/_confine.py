"""Read-only workspace confinement: a path is walked and opened beneath one directory descriptor.

The same idea as the files family's ``file_read`` (not its code: no plugin imports another). A path
is split into components; each directory is opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to the
descriptor of the one before, starting at a descriptor of the workspace root, and the file itself is
opened the same way. The kernel never follows a symlink: this walker does, splicing the link's target
into the remaining components (a relative target continues from the link's directory, an absolute one
must lie inside the workspace and restarts at the root), so a link inside the workspace works and one
pointing out is refused, however it is reached. ``..`` can never pop the root. Nothing is resolved and
then reopened by name, so swapping a component for a symlink mid-walk makes the open fail instead of
escaping. The opened descriptor is what every parser and subprocess reads (``/dev/fd/N``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["OpenFile", "PathError", "Workspace"]

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINKS = 40

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathError(Exception):
    """A path was refused. ``kind``: invalid (malformed), denied (outside the workspace), missing, type."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class OpenFile:
    """A regular file opened read-only inside the workspace: its descriptor, canonical path and size."""

    fd: int
    rel: str
    size: int


class Workspace:
    """The confinement root; holds one read-only descriptor of it and never changes directory."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # The root comes from the operator's configuration, not from a model: resolving it once is fine.
        self.root = Path(root).resolve()
        self._root_parts = self.root.parts
        self._fd = os.open(self.root, _DIR)

    def close(self) -> None:
        """Close the root descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _split(self, path: str) -> list[str]:
        if not isinstance(path, str) or not path.strip():
            raise PathError("invalid", "path is empty")
        if "\x00" in path:
            raise PathError("invalid", "path contains a NUL byte")
        if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
            raise PathError("invalid", f"path is longer than {MAX_PATH_BYTES} bytes")
        if path.startswith("/"):
            parts = PurePosixPath(os.path.normpath(path)).parts
            if parts[: len(self._root_parts)] != self._root_parts:
                raise PathError("denied", f"{path!r} is outside the workspace {self.root}")
            names = list(parts[len(self._root_parts) :])
        else:
            names = path.split("/")
        out = []
        for name in names:
            if name in ("", "."):
                continue
            if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                raise PathError("invalid", f"path component {name[:40]!r}... is longer than {MAX_NAME_BYTES} bytes")
            out.append(name)
        return out

    @contextmanager
    def open_file(self, path: str) -> Iterator[OpenFile]:
        """Open an existing regular file read-only (never a FIFO, device, socket or directory)."""
        pending = deque(self._split(path))
        if not pending:
            raise PathError("type", f"{path!r} is the workspace directory, not a file")
        stack = [os.dup(self._fd)]
        names: list[str] = []
        links = 0
        fd = -1
        try:
            while pending:
                name = pending.popleft()
                if name == "..":
                    if len(stack) == 1:
                        raise PathError("denied", f"{path!r} escapes the workspace through '..'")
                    os.close(stack.pop())
                    names.pop()
                    continue
                try:
                    st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                except FileNotFoundError:
                    raise PathError("missing", f"file {path!r} does not exist") from None
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > MAX_SYMLINKS:
                        raise PathError("denied", f"{path!r}: too many levels of symbolic links")
                    target = os.readlink(name, dir_fd=stack[-1])
                    if target.startswith("/"):
                        try:
                            spliced = self._split(target)
                        except PathError:
                            where = "/".join([*names, name])
                            message = f"{where!r} is a symlink that points outside the workspace"
                            raise PathError("denied", message) from None
                        while len(stack) > 1:
                            os.close(stack.pop())
                        names.clear()
                    else:
                        spliced = [p for p in target.split("/") if p not in ("", ".")]
                    pending.extendleft(reversed(spliced))
                    continue
                if not pending:
                    fd = self._open_leaf(stack[-1], name, path)
                    names.append(name)
                    break
                if not stat.S_ISDIR(st.st_mode):
                    raise PathError("type", f"{'/'.join([*names, name])!r} is not a directory")
                try:
                    stack.append(os.open(name, _DIR, dir_fd=stack[-1]))
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                        raise PathError("denied", f"{'/'.join([*names, name])!r} changed during the call") from None
                    raise
                names.append(name)
            if fd < 0:
                raise PathError("type", f"{path!r} is a directory, not a file")
        finally:
            for d in stack:
                os.close(d)
        try:
            yield OpenFile(fd, "/".join(names), os.fstat(fd).st_size)
        finally:
            os.close(fd)

    @staticmethod
    def _open_leaf(dir_fd: int, name: str, path: str) -> int:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            raise PathError("missing", f"file {path!r} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathError("denied", f"{path!r} changed into a symlink during the call") from None
            raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, device or socket)"
            raise PathError("type", f"{path!r} is {kind}")
        os.set_blocking(fd, True)
        return fd
