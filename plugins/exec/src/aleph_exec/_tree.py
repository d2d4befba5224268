"""Removing a directory tree of any depth: iteratively, one directory descriptor open at a time.

``shutil.rmtree`` and ``os.walk`` recurse in Python: a command that makes a tree deeper than the
interpreter's recursion limit (``mkdir -p $(printf 'd/%.0s' {1..1500})``) made them raise
``RecursionError`` and leave the tree on disk. :func:`remove_tree` keeps its own stack of names, holds
one descriptor (so a tree deeper than the open-file limit is fine too), never follows a symlink, and
opens each directory relative to its parent's descriptor (a path longer than ``PATH_MAX`` is fine).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["remove_tree"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, parent: int) -> int:
    """Open the directory ``name`` under ``parent``; a directory its owner made unreadable is opened after a chmod."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        # overlayfs' work/work is mode 000, and so is a directory a command chmod-ed 000.
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _first_subdir(fd: int) -> str | None:
    """Unlink every non-directory in ``fd``; return the name of a subdirectory left, or None when empty."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=fd)
    return None


def remove_tree(path: str | os.PathLike[str], *, ignore_errors: bool = False) -> None:
    """Remove ``path`` and everything under it; a missing path is not an error.

    A symlink (also one at ``path``) is removed, never followed. With ``ignore_errors``, what cannot
    be removed is left and no error is raised (the rest is still removed where it can be).
    """
    target = Path(path)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError:
        if ignore_errors:
            return
        raise
    try:
        if not stat.S_ISDIR(st.st_mode):
            target.unlink()
            return
        _remove_dir(target)
    except OSError:
        if not ignore_errors:
            raise


def _remove_dir(target: Path) -> None:
    top = os.open(target.parent, _DIR_FLAGS)
    names = [target.name]  # the path from ``top`` to the directory ``fd`` is open on
    fd = -1
    try:
        fd = _open_dir(target.name, top)
        while True:
            sub = _first_subdir(fd)
            if sub is not None:
                child = _open_dir(sub, fd)
                os.close(fd)
                fd = child
                names.append(sub)
                continue
            name = names.pop()
            if not names:
                os.close(fd)
                fd = -1
                os.rmdir(name, dir_fd=top)
                return
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(name, dir_fd=fd)
    finally:
        if fd >= 0:
            os.close(fd)
        os.close(top)
