"""Workspace confinement: every path is walked and opened beneath one directory descriptor.

Nothing here calls ``realpath`` and then opens the result: that races with a symlink swapped in
between. Instead a path is split into components and each directory is opened with
``os.open(name, O_DIRECTORY | O_NOFOLLOW, dir_fd=parent)`` relative to the descriptor of the one
before it, starting from a descriptor of the workspace root. The final component is opened the
same way (``O_NOFOLLOW``), so a swap after the walk makes the open fail instead of escaping.

Symlink policy: a symlink is followed only by this walker, never by the kernel. Its target is
spliced into the remaining components: a relative target continues from the directory holding
the link, an absolute one must lie lexically inside the workspace and restarts from the root.
``..`` pops the stack of open directories and can never pop the root. So a link that stays inside
the workspace works, and one that points outside is refused, at every component, every time.
Prefix confusion (``/srv/ws`` vs ``/srv/ws_evil``) cannot happen: absolute paths are compared
component by component, and everything after that is descriptor-relative.

:class:`ConfinedRoot` is what a family that opens workspace files builds on (the files family adds
protected paths and writes; the media family reads).
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
from typing import Literal

__all__ = ["MAX_NAME_BYTES", "MAX_PATH_BYTES", "MAX_SYMLINKS", "ConfinedRoot", "ConfinedTarget", "PathRefused"]

MAX_PATH_BYTES = 4096
"""Longest path accepted (Linux ``PATH_MAX``)."""
MAX_NAME_BYTES = 255
"""Longest single component accepted (Linux ``NAME_MAX``)."""
MAX_SYMLINKS = 40
"""Symlinks followed in one walk before refusing (the kernel's own limit)."""

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

ErrorKind = Literal["invalid", "denied", "missing", "type"]


class PathRefused(Exception):
    """A path was refused. ``kind``: invalid (malformed), denied (escape/protected), missing, type."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(slots=True)
class ConfinedTarget:
    """A resolved location: an open descriptor of its parent directory plus the final name.

    ``name`` is ``"."`` when the target is the workspace root itself. ``rel`` is the canonical
    workspace-relative path (symlinks resolved, ``"."`` for the root). Close it (or use ``with``).
    """

    parent_fd: int
    name: str
    rel: str

    def close(self) -> None:
        """Release the parent descriptor."""
        if self.parent_fd >= 0:
            os.close(self.parent_fd)
            self.parent_fd = -1

    def __enter__(self) -> ConfinedTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lstat(self) -> os.stat_result | None:
        """``lstat`` of the final component, or None when it does not exist."""
        try:
            return os.stat(self.name, dir_fd=self.parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None


class ConfinedRoot:
    """The confinement root. Thread-safe: it holds one read-only descriptor and never changes directory."""

    MAX_PATH_BYTES = MAX_PATH_BYTES
    """Longest path accepted (Linux ``PATH_MAX``)."""
    MAX_NAME_BYTES = MAX_NAME_BYTES
    """Longest single component accepted (Linux ``NAME_MAX``)."""

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

    # -- parsing -----------------------------------------------------------------------------

    def split(self, path: str) -> list[str]:
        """Check ``path`` and return its components relative to the root (``..`` kept for the walk)."""
        if not isinstance(path, str) or not path.strip():
            raise PathRefused("invalid", "path is empty")
        if "\x00" in path:
            raise PathRefused("invalid", "path contains a NUL byte")
        if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
            raise PathRefused("invalid", f"path is longer than {MAX_PATH_BYTES} bytes")
        if path.startswith("/"):
            parts = PurePosixPath(os.path.normpath(path)).parts
            if parts[: len(self._root_parts)] != self._root_parts:
                raise PathRefused("denied", f"{path!r} is outside the workspace {self.root}")
            names = list(parts[len(self._root_parts) :])
        else:
            names = path.split("/")
        out = []
        depth = 0
        for name in names:
            if name in ("", "."):
                continue
            depth += -1 if name == ".." else 1
            if depth < 0:
                raise PathRefused("denied", f"{path!r} escapes the workspace through '..'")
            if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                raise PathRefused("invalid", f"path component {name[:40]!r}... is longer than {MAX_NAME_BYTES} bytes")
            out.append(name)
        return out

    # -- walking -----------------------------------------------------------------------------

    def resolve(self, path: str, *, follow_last: bool = True, create_dirs: bool = False) -> ConfinedTarget:
        """Walk ``path`` beneath the root and return its parent descriptor and final name.

        The final component need not exist. With ``follow_last`` a final symlink is resolved (inside
        the workspace only); without it the link itself is the target (for delete and move).
        ``create_dirs`` makes missing intermediate directories.
        """
        pending = deque(self.split(path))
        stack = [os.dup(self._fd)]
        names: list[str] = []
        links = 0
        try:
            while pending:
                name = pending.popleft()
                if name == "..":
                    if len(stack) == 1:
                        raise PathRefused("denied", f"{path!r} escapes the workspace through '..'")
                    os.close(stack.pop())
                    names.pop()
                    continue
                last = not pending
                try:
                    st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return self._target(stack, names, name)
                    if not create_dirs:
                        raise PathRefused("missing", f"directory {'/'.join([*names, name])!r} does not exist") from None
                    try:
                        os.mkdir(name, 0o777, dir_fd=stack[-1])
                    except FileExistsError:
                        pass
                    st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                    links += 1
                    if links > MAX_SYMLINKS:
                        raise PathRefused("denied", f"{path!r}: too many levels of symbolic links")
                    target = os.readlink(name, dir_fd=stack[-1])
                    if target.startswith("/"):
                        try:
                            spliced = self.split(target)
                        except PathRefused:
                            raise PathRefused(
                                "denied", f"{'/'.join([*names, name])!r} is a symlink that points outside the workspace"
                            ) from None
                        while len(stack) > 1:
                            os.close(stack.pop())
                        names.clear()
                    else:
                        spliced = [p for p in target.split("/") if p not in ("", ".")]
                    pending.extendleft(reversed(spliced))
                    continue
                if last:
                    return self._target(stack, names, name)
                if not stat.S_ISDIR(st.st_mode):
                    raise PathRefused("type", f"{'/'.join([*names, name])!r} is not a directory")
                try:
                    fd = os.open(name, _DIR, dir_fd=stack[-1])
                except OSError as exc:
                    # Swapped for a symlink or a non-directory since the stat: refuse, never follow.
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                        raise PathRefused("denied", f"{'/'.join([*names, name])!r} changed during the call") from None
                    raise
                stack.append(fd)
                names.append(name)
            # The path ended on ".." or on a symlink to a directory: the target is the directory on top.
            if len(stack) == 1:
                return ConfinedTarget(stack.pop(), ".", ".")
            os.close(stack.pop())
            leaf = names.pop()
            return self._target(stack, names, leaf)
        finally:
            for fd in stack:
                os.close(fd)

    @staticmethod
    def _target(stack: list[int], names: list[str], name: str) -> ConfinedTarget:
        fd = stack.pop()
        return ConfinedTarget(fd, name, "/".join([*names, name]))

    def canonical(self, path: str) -> str:
        """The canonical relative path of ``path``, even when directories along it do not exist yet.

        The existing part is walked (symlinks resolved and confined); the missing tail cannot
        contain links, so it is appended as written.
        """
        try:
            with self.resolve(path, follow_last=False) as target:
                return target.rel
        except PathRefused as exc:
            if exc.kind != "missing":
                raise
        parts = self.split(path)
        for cut in range(len(parts) - 1, 0, -1):
            try:
                with self.resolve("/".join(parts[:cut])) as target:
                    head = [] if target.rel == "." else target.rel.split("/")
            except PathRefused as exc:
                if exc.kind != "missing":
                    raise
                continue
            for name in parts[cut:]:
                if name == "..":
                    if not head:
                        raise PathRefused("denied", f"{path!r} escapes the workspace through '..'")
                    head.pop()
                else:
                    head.append(name)
            return "/".join(head) or "."
        return "/".join(p for p in parts if p != "..")

    # -- opening ------------------------------------------------------------------

    @contextmanager
    def open_regular(self, path: str, flags: int = os.O_RDONLY) -> Iterator[tuple[int, ConfinedTarget]]:
        """Open an existing regular file (never a FIFO, device, socket or directory); yields (fd, target)."""
        with self.resolve(path) as target:
            if target.name == ".":
                raise PathRefused("type", f"{path!r} is a directory, not a file")
            try:
                fd = os.open(target.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=target.parent_fd)
            except FileNotFoundError:
                raise PathRefused("missing", f"file {path!r} does not exist") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathRefused("denied", f"{path!r} changed into a symlink during the call") from None
                if exc.errno == errno.EISDIR:
                    raise PathRefused("type", f"{path!r} is a directory, not a file") from None
                raise
            try:
                mode = os.fstat(fd).st_mode
                if not stat.S_ISREG(mode):
                    raise PathRefused("type", f"{path!r} is {_kind(mode)}, not a regular file")
                os.set_blocking(fd, True)
                yield fd, target
            finally:
                os.close(fd)

    @contextmanager
    def open_dir(self, path: str) -> Iterator[tuple[int, str]]:
        """Open an existing directory; yields (fd, canonical relative path)."""
        with self.resolve(path) as target:
            try:
                fd = os.open(target.name, _DIR, dir_fd=target.parent_fd)
            except FileNotFoundError:
                raise PathRefused("missing", f"directory {path!r} does not exist") from None
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise PathRefused("type", f"{path!r} is not a directory") from None
                raise
            try:
                yield fd, target.rel
            finally:
                os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"
