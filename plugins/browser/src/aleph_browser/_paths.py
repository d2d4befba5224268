"""Workspace confinement for uploads, downloads, screenshots and PDFs.

A path is taken relative to the workspace (an absolute path must already lie inside it). ``..``
components, NUL bytes, over-long paths and symlinks anywhere along the path are refused, so a link
planted in the workspace cannot point the browser at a file outside it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

__all__ = ["PathRefused", "confine"]

_MAX_PATH = 4096


class PathRefused(ValueError):
    """A path that may not be used; the message says why."""


def confine(
    workspace: Path,
    given: str,
    *,
    must_exist: bool,
    create_parents: bool = False,
    protected: tuple[Path, ...] | list[Path] = (),
) -> Path:
    """The absolute path for ``given`` inside ``workspace``, or :class:`PathRefused`.

    :param must_exist: the path must name an existing regular file (reading); otherwise it must not be
        anything but a regular file if it exists (writing).
    :param create_parents: create missing parent directories (each one checked).
    :param protected: Aleph's own files and directories (configuration, data directory): refused both ways,
        so a page can neither receive the signing keys as an upload nor overwrite ``aleph.toml`` with a download.
    """
    if not given or "\x00" in given or len(given) > _MAX_PATH:
        raise PathRefused(f"path {given[:100]!r} is empty, too long or contains NUL")
    root = workspace.resolve()
    path = PurePosixPath(given)
    if path.is_absolute():
        try:
            path = PurePosixPath(os.path.normpath(given)).relative_to(root.as_posix())
        except ValueError:
            raise PathRefused(f"path {given!r} is outside the workspace {root}") from None
    if ".." in path.parts:
        raise PathRefused(f"path {given!r} contains '..'; give a path inside the workspace")
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts:
        raise PathRefused(f"path {given!r} names the workspace itself, not a file")
    # Symlinks are refused below, so the lexical path is the real one.
    candidate = root.joinpath(*parts)
    for item in protected:
        if candidate == item or item in candidate.parents:
            raise PathRefused(
                f"{given!r} is one of Aleph's protected paths (configuration or data directory); "
                "browser tools may not read or write it"
            )
    current = root
    for i, part in enumerate(parts):
        current = current / part
        last = i == len(parts) - 1
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if must_exist:
                raise PathRefused(f"{given!r} does not exist in the workspace") from None
            if not last:
                if not create_parents:
                    raise PathRefused(
                        f"directory {'/'.join(parts[: i + 1])!r} does not exist in the workspace"
                    ) from None
                current.mkdir()
            continue
        if stat.S_ISLNK(info.st_mode):
            raise PathRefused(
                f"{'/'.join(parts[: i + 1])!r} is a symlink; symlinks are refused so nothing escapes the workspace"
            )
        if not last and not stat.S_ISDIR(info.st_mode):
            raise PathRefused(f"{'/'.join(parts[: i + 1])!r} is not a directory")
        if last and not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{given!r} is not a regular file")
    return current
