"""Files confined to a workspace: opened component by component from a directory descriptor.

Every component is opened with ``O_NOFOLLOW`` relative to its parent's descriptor, so no symlink (and no
swap of a component for one between a check and the open) leads outside the root; ``..``, absolute paths,
NUL bytes and over-long paths are refused before anything is opened, and only regular files are read.
The path a rule sees is therefore the path that is opened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

__all__ = ["ConfinedDir", "ConfinementError", "check_relative"]

MAX_PATH = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ConfinementError(ValueError):
    """A path that leaves the workspace, names something that is not a regular file, or is protected."""


def check_relative(path: str) -> tuple[str, ...]:
    """The components of a workspace-relative path; raises :class:`ConfinementError` naming the problem."""
    if not isinstance(path, str) or not path:
        raise ConfinementError("path must be a non-empty string")
    if "\x00" in path:
        raise ConfinementError("path contains a NUL byte")
    if len(path.encode()) > MAX_PATH:
        raise ConfinementError(f"path is longer than {MAX_PATH} bytes")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ConfinementError(f"path {path!r} is absolute; give it relative to the workspace")
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if not parts:
        raise ConfinementError(f"path {path!r} names the workspace itself, not a file")
    if ".." in parts:
        raise ConfinementError(f"path {path!r} climbs out with '..'")
    return parts


class ConfinedDir:
    """A workspace root; opens files beneath it and nowhere else."""

    def __init__(self, root: Path, protected: list[Path] | None = None) -> None:
        self.root = Path(root).resolve()
        self._protected = [Path(p).resolve() for p in protected or []]

    def _check_protected(self, parts: tuple[str, ...]) -> None:
        target = self.root.joinpath(*parts)
        for p in self._protected:
            if target == p or p in target.parents:
                raise ConfinementError(f"{'/'.join(parts)} is one of Aleph's own files (protected)")

    @contextlib.contextmanager
    def _parent(self, parts: tuple[str, ...], *, create: bool) -> Iterator[int]:
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for name in parts[:-1]:
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise ConfinementError(f"{'/'.join(parts)}: no such file in the workspace") from None
                    os.mkdir(name, 0o755, dir_fd=fd)
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except (NotADirectoryError, OSError) as exc:
                    raise ConfinementError(
                        f"{'/'.join(parts)}: component {name!r} is a symlink or not a directory ({exc.strerror})"
                    ) from None
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def open_read(self, path: str) -> tuple[int, int]:
        """``(fd, size)`` of a regular file beneath the root, opened for reading."""
        parts = check_relative(path)
        self._check_protected(parts)
        with self._parent(parts, create=False) as parent:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=parent)
            except FileNotFoundError:
                raise ConfinementError(f"{path}: no such file in the workspace") from None
            except OSError as exc:
                raise ConfinementError(f"{path}: cannot open ({exc.strerror}; symlinks are not followed)") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise ConfinementError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return fd, st.st_size

    def size_of(self, path: str) -> int | None:
        """The size of a regular file beneath the root, or None when there is none."""
        try:
            fd, size = self.open_read(path)
        except ConfinementError:
            return None
        os.close(fd)
        return size

    def install(self, path: str, source: Path, *, overwrite: bool) -> None:
        """Move the finished file ``source`` (outside the workspace) to ``path`` beneath the root, atomically.

        Written to a temporary name in the target directory first, then renamed over the target; a target
        that is a directory, a symlink or (without ``overwrite``) an existing file is refused.
        """
        parts = check_relative(path)
        self._check_protected(parts)
        with self._parent(parts, create=True) as parent:
            name = parts[-1]
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None:
                if not stat.S_ISREG(st.st_mode):
                    raise ConfinementError(f"{path} exists and is not a regular file")
                if not overwrite:
                    raise ConfinementError(f"{path} exists; pass overwrite=true to replace it")
            try:  # same file system: the finished file is moved into place, not copied
                os.chmod(source, 0o644)
                os.rename(source, name, dst_dir_fd=parent)
                return
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
            tmp = f".{name[:200]}.aleph-part-{os.getpid()}-{id(source):x}"
            out = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent
            )
            try:
                with open(source, "rb") as src, os.fdopen(out, "wb", closefd=False) as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                    dst.flush()
                    os.fsync(dst.fileno())
                os.close(out)
                os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(out)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
