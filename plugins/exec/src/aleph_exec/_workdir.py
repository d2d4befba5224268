"""Workspace paths for the exec tools: the working directory of a run and files a tool writes.

aleph-exec does not import aleph-files (no plugin imports another). It needs less: a working
directory inside the workspace and a place to write generated files. Both are walked component by
component from a descriptor of the workspace root with ``O_NOFOLLOW``, and any symlink on the way
is refused (stricter than aleph-files, which follows links that stay inside).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

import aleph

__all__ = ["WorkdirError", "resolve_workdir", "write_in_workspace"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkdirError(ValueError):
    """A working directory or output path that is malformed, outside the workspace or protected."""


def _parts(workspace: Path, path: str) -> list[str]:
    if "\x00" in path:
        raise WorkdirError("path contains a NUL byte")
    if len(path.encode("utf-8", "surrogateescape")) > 4096:
        raise WorkdirError("path is longer than 4096 bytes")
    if path.startswith("/"):
        parts = PurePosixPath(os.path.normpath(path)).parts
        root = workspace.parts
        if parts[: len(root)] != root:
            raise WorkdirError(f"{path!r} is outside the workspace {workspace}")
        names = list(parts[len(root) :])
    else:
        names = path.split("/")
    out: list[str] = []
    for name in names:
        if name in ("", "."):
            continue
        if name == "..":
            if not out:
                raise WorkdirError(f"{path!r} escapes the workspace through '..'")
            out.pop()
            continue
        if len(name.encode("utf-8", "surrogateescape")) > 255:
            raise WorkdirError(f"path component {name[:40]!r}... is too long")
        out.append(name)
    return out


def _walk(workspace: Path, names: list[str], *, create: bool) -> int:
    fd = os.open(workspace, _DIR)
    try:
        for i, name in enumerate(names):
            try:
                nxt = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise WorkdirError(f"directory {'/'.join(names[: i + 1])!r} does not exist") from None
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, _DIR, dir_fd=fd)
            except OSError as exc:
                raise WorkdirError(
                    f"{'/'.join(names[: i + 1])!r} is a symlink or not a directory ({exc.strerror})"
                ) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def resolve_workdir(workspace: Path, working_dir: str) -> Path:
    """The absolute working directory for ``working_dir`` (relative to, or absolute inside, the workspace)."""
    names = _parts(workspace, working_dir)
    if not names:
        return workspace  # the root itself: nothing to walk (a vanished workspace fails at the spawn)
    os.close(_walk(workspace, names, create=False))
    return workspace.joinpath(*names)


_HOST_EXECUTED = aleph.ProtectedPaths(aleph.ProtectedPaths.HOST_EXECUTED)


def _protected(rel: list[str], workspace: Path, protected: Iterable[Path]) -> bool:
    if rel and _HOST_EXECUTED.with_git_names(workspace).hit("/".join(rel), non_dir=True) is not None:
        return True
    rules: list[tuple[str, ...]] = []
    for path in protected:
        parts = Path(path).resolve().parts
        if parts[: len(workspace.parts)] == workspace.parts:
            rules.append(tuple(parts[len(workspace.parts) :]))
    target = tuple(rel)
    return any(target[: len(rule)] == rule or rule[: len(target)] == target for rule in rules if rule)


def write_in_workspace(
    workspace: Path, path: str, data: bytes, *, protected: Iterable[Path] = (), overwrite: bool = False
) -> str:
    """Write ``data`` atomically at ``path`` inside the workspace (parents created); returns the relative path."""
    names = _parts(workspace, path)
    if not names:
        raise WorkdirError("the output path names the workspace itself")
    if _protected(names, workspace, protected):
        raise WorkdirError(f"{path!r} is a protected path (Aleph's own files, .git/hooks, .git/config)")
    fd = _walk(workspace, names[:-1], create=True)
    name = names[-1]
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not overwrite:
            raise WorkdirError(f"{path!r} already exists; pass overwrite=true to replace it")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise WorkdirError(f"{path!r} exists and is not a regular file")
        tmp = f".{name[:200]}.{secrets.token_hex(6)}.aleph-tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            os.fsync(out)
        finally:
            os.close(out)
        try:
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            os.unlink(tmp, dir_fd=fd)
            raise
    finally:
        os.close(fd)
    return "/".join(names)
