"""The notes folder, confined like the files family: every path is opened beneath a directory descriptor.

Nothing is resolved with ``realpath`` and then opened by name. A note path is split into validated
components; each directory is opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to the one before,
starting from a descriptor of the notes folder, and files are opened with ``O_NOFOLLOW`` too. So a
symlink anywhere below the notes folder is refused rather than followed, ``..`` cannot occur, and a
swap after a check cannot redirect a write. Writes go to a temporary file in the same directory,
are flushed and renamed over the target: a reader sees the old note or the new one, never half.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_NOTE_PATH", "NotesDir", "NotesPathError", "split_path"]

MAX_NOTE_PATH = 1024
MAX_NAME_BYTES = 255
MAX_DEPTH = 8
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotesPathError(Exception):
    """A note path was refused or does not exist; ``kind``: invalid, missing, exists, type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def split_path(path: str, *, suffix: str = ".md") -> list[str]:
    """Validated components of a notes-relative path (``suffix`` added to the last one when missing)."""
    if not isinstance(path, str) or not path.strip():
        raise NotesPathError("invalid", "path is empty")
    if len(path) > MAX_NOTE_PATH:
        raise NotesPathError("invalid", f"path is longer than {MAX_NOTE_PATH} characters")
    parts = path.strip().strip("/").split("/")
    if len(parts) > MAX_DEPTH:
        raise NotesPathError("invalid", f"path has more than {MAX_DEPTH} levels")
    for part in parts:
        bad = (
            not part
            or part in (".", "..")
            or part.startswith(".")
            or "\\" in part
            or "\x00" in part
            or any(ord(c) < 32 for c in part)
        )
        if bad:
            raise NotesPathError(
                "invalid",
                f"Invalid path segment {part!r}: segments must be non-empty names without '..', a leading"
                " '.', backslashes or control characters",
            )
        if len(part.encode()) > MAX_NAME_BYTES:
            raise NotesPathError("invalid", f"path segment {part[:40]!r}… is longer than {MAX_NAME_BYTES} bytes")
    if suffix and not parts[-1].endswith(suffix):
        parts[-1] += suffix
    return parts


class NotesDir:
    """The notes folder ``<workspace>/<rel>``; refuses to live inside one of Aleph's protected paths."""

    def __init__(self, workspace: Path, rel: str, protected: list[Path]) -> None:
        self.workspace = Path(workspace)
        self.rel = rel
        self.root_parts = split_path(rel, suffix="")
        where = (self.workspace / rel).resolve()
        for guarded in protected:
            inside = where == guarded or guarded in where.parents
            # A protected file the notes could never name (notes are *.md, no dot-folders) may sit below.
            holds = where in guarded.parents and (guarded.suffix == ".md" or guarded.is_dir())
            if inside or holds:
                raise ValueError(f"[memory] notes_dir {rel!r} overlaps Aleph's protected path {guarded}")

    @contextlib.contextmanager
    def _root(self, *, create: bool) -> Iterator[int]:
        fd = os.open(self.workspace, _DIR)
        try:
            for part in self.root_parts:
                current, fd = fd, -1  # _step closes what it is given, even when it fails
                fd = self._step(current, part, create)
            yield fd
        finally:
            if fd >= 0:
                os.close(fd)

    @staticmethod
    def _step(fd: int, name: str, create: bool) -> int:
        """Open directory ``name`` under ``fd`` (closing ``fd``); create it when asked."""
        try:
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise NotesPathError("missing", f"folder {name!r} does not exist") from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                child = os.open(name, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotesPathError("type", f"{name!r} is a symlink or not a folder; refused") from None
                raise
        finally:
            os.close(fd)
        return child

    @contextlib.contextmanager
    def _parent(self, parts: list[str], *, create: bool) -> Iterator[int]:
        with self._root(create=create) as root:
            fd = os.dup(root)
            try:
                for part in parts[:-1]:
                    current, fd = fd, -1
                    fd = self._step(current, part, create)
                yield fd
            finally:
                if fd >= 0:
                    os.close(fd)

    def workspace_path(self, path: str) -> str:
        """The workspace-relative path of a note (what path rules such as ``note_manage(notes/**)`` see)."""
        return "/".join([*self.root_parts, *split_path(path)])

    def read(self, path: str, *, suffix: str = ".md", max_bytes: int = 16 * 1024 * 1024) -> str:
        """The text of a note; raises :class:`NotesPathError` (missing, type) or ``UnicodeDecodeError``."""
        parts = split_path(path, suffix=suffix)
        try:
            with self._parent(parts, create=False) as parent:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=parent)
        except FileNotFoundError:
            raise NotesPathError("missing", f"note {path!r} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotesPathError("type", f"{path!r} is a symlink; refused") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotesPathError("type", f"{path!r} is not a regular file")
            if info.st_size > max_bytes:
                raise NotesPathError("invalid", f"{path!r} is {info.st_size} bytes, over the {max_bytes}-byte limit")
            with os.fdopen(os.dup(fd), "rb") as fh:
                return fh.read(max_bytes + 1).decode("utf-8")
        finally:
            os.close(fd)

    def exists(self, path: str, *, suffix: str = ".md") -> bool:
        """Whether the note is a regular file."""
        try:
            parts = split_path(path, suffix=suffix)
            with self._parent(parts, create=False) as parent:
                info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except (NotesPathError, FileNotFoundError, NotADirectoryError):
            return False
        return stat.S_ISREG(info.st_mode)

    def write(self, path: str, text: str, *, suffix: str = ".md", create: bool | None = None) -> None:
        """Write a note atomically; ``create=True`` refuses an existing note, ``False`` a missing one."""
        parts = split_path(path, suffix=suffix)
        data = text.encode("utf-8")
        with self._parent(parts, create=True) as parent:
            try:
                info: os.stat_result | None = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None and not stat.S_ISREG(info.st_mode):
                raise NotesPathError("type", f"{path!r} exists and is not a regular file")
            if create is True and info is not None:
                raise NotesPathError("exists", f"note {path!r} already exists")
            if create is False and info is None:
                raise NotesPathError("missing", f"note {path!r} does not exist")
            tmp = f".{parts[-1]}.{uuid.uuid4().hex[:8]}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
            os.close(fd)
            try:
                os.rename(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise

    def delete(self, path: str) -> None:
        """Delete a note (a regular file only)."""
        parts = split_path(path)
        with self._parent(parts, create=False) as parent:
            try:
                info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise NotesPathError("missing", f"note {path!r} does not exist") from None
            if not stat.S_ISREG(info.st_mode):
                raise NotesPathError("type", f"{path!r} is not a regular file")
            os.unlink(parts[-1], dir_fd=parent)

    def walk(self, *, limit: int) -> tuple[list[tuple[str, int, int]], bool]:
        """Every note (``.md`` file) as (path without .md, mtime_ns, size), sorted; True when cut at ``limit``."""
        out: list[tuple[str, int, int]] = []
        truncated = False
        try:
            with self._root(create=False) as root:
                stack: list[tuple[int, str, int]] = [(os.dup(root), "", 0)]
                while stack:
                    fd, prefix, depth = stack.pop()
                    try:
                        with os.scandir(fd) as entries:
                            for entry in sorted(entries, key=lambda e: e.name):
                                if entry.name.startswith("."):
                                    continue
                                if entry.is_dir(follow_symlinks=False) and depth + 1 < MAX_DEPTH:
                                    try:
                                        child = os.open(entry.name, _DIR, dir_fd=fd)
                                    except OSError:
                                        continue
                                    stack.append((child, f"{prefix}{entry.name}/", depth + 1))
                                elif entry.is_file(follow_symlinks=False) and entry.name.endswith(".md"):
                                    if len(out) >= limit:
                                        truncated = True
                                        continue
                                    info = entry.stat(follow_symlinks=False)
                                    out.append((f"{prefix}{entry.name[:-3]}", info.st_mtime_ns, info.st_size))
                    finally:
                        os.close(fd)
        except NotesPathError:
            return [], False
        return sorted(out), truncated

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        """(folders, notes without .md) directly under ``path`` (``""`` = the notes folder), sorted."""
        parts = split_path(path, suffix="") if path.strip("/") else []
        with self._root(create=False) as root:
            fd = os.dup(root)
            try:
                for part in parts:
                    current, fd = fd, -1
                    fd = self._step(current, part, False)
                folders, notes = [], []
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.name.startswith("."):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.name)
                        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(".md"):
                            notes.append(entry.name[:-3])
                return sorted(folders), sorted(notes)
            finally:
                if fd >= 0:
                    os.close(fd)
