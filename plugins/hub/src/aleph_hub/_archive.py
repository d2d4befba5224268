"""Unpacking a skill source (a folder, a zip, a tarball) into a staging folder, bounded and confined.

Every entry is checked before anything is written: no absolute paths, no ``..``, no links, devices
or FIFOs, at most ``max_files`` files and ``max_bytes`` in total (counted as bytes are written, so a
lying header cannot exceed it). Hidden entries (``.git``, ``.DS_Store``) are skipped. A single
top-level folder is stripped, so ``my-skill.zip`` holding ``my-skill/SKILL.md`` works.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

__all__ = ["ArchiveError", "unpack_source"]


class ArchiveError(ValueError):
    """A skill source that cannot be unpacked safely; the message names the entry and the reason."""


class _Budget:
    def __init__(self, max_files: int, max_bytes: int) -> None:
        self.files = max_files
        self.bytes = max_bytes

    def take_file(self, name: str) -> None:
        self.files -= 1
        if self.files < 0:
            raise ArchiveError(f"too many files (the limit is reached at {name!r})")

    def take_bytes(self, n: int, name: str) -> None:
        self.bytes -= n
        if self.bytes < 0:
            raise ArchiveError(f"the skill is larger than the size limit (reached at {name!r})")


def _safe_parts(name: str) -> tuple[str, ...] | None:
    """The path parts of an entry, None for a hidden one; ArchiveError for one that escapes."""
    if "\0" in name or "\\" in name:
        raise ArchiveError(f"entry {name!r} has a NUL or backslash in its name")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise ArchiveError(f"entry {name!r} escapes the skill folder")
    parts = tuple(p for p in path.parts if p not in ("", "."))
    if any(p.startswith(".") for p in parts) or "__pycache__" in parts:
        return None
    return parts


def _copy_stream(src: object, dest: Path, budget: _Budget, name: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        while True:
            block = src.read(1 << 16)  # type: ignore[attr-defined]
            if not block:
                break
            budget.take_bytes(len(block), name)
            out.write(block)


def unpack_source(source: Path, staging: Path, *, max_files: int, max_bytes: int) -> Path:
    """Unpack ``source`` into the empty folder ``staging``; returns the folder holding SKILL.md."""
    budget = _Budget(max_files, max_bytes)
    if source.is_dir():
        _copy_folder(source, staging, budget)
    elif zipfile.is_zipfile(source):
        _unzip(source, staging, budget)
    elif tarfile.is_tarfile(source):
        _untar(source, staging, budget)
    else:
        raise ArchiveError(f"{source} is not a folder, a zip or a tarball")
    return _skill_folder(staging)


def _copy_folder(source: Path, staging: Path, budget: _Budget) -> None:
    for dirpath, dirnames, filenames in os.walk(source):
        rel_dir = Path(dirpath).relative_to(source)
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for d in dirnames:
            if (Path(dirpath) / d).is_symlink():
                raise ArchiveError(f"{(rel_dir / d).as_posix()!r} is a symbolic link")
        for name in filenames:
            full = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            if name.startswith("."):
                continue
            mode = os.lstat(full).st_mode
            if not stat.S_ISREG(mode):
                raise ArchiveError(f"{rel!r} is not a regular file (links, devices and FIFOs are refused)")
            budget.take_file(rel)
            with full.open("rb") as src:
                _copy_stream(src, staging / rel, budget, rel)


def _unzip(source: Path, staging: Path, budget: _Budget) -> None:
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            parts = _safe_parts(info.filename)
            if parts is None or not parts or info.is_dir():
                continue
            kind = (info.external_attr >> 16) & 0o170000
            if kind and kind != stat.S_IFREG:
                raise ArchiveError(f"entry {info.filename!r} is not a regular file (links are refused)")
            budget.take_file(info.filename)
            with archive.open(info) as src:
                _copy_stream(src, staging.joinpath(*parts), budget, info.filename)


def _untar(source: Path, staging: Path, budget: _Budget) -> None:
    with tarfile.open(source) as archive:
        for member in archive:
            parts = _safe_parts(member.name)
            if parts is None or not parts or member.isdir():
                continue
            if not member.isfile():
                raise ArchiveError(f"entry {member.name!r} is not a regular file (links and devices are refused)")
            budget.take_file(member.name)
            src = archive.extractfile(member)
            if src is None:
                raise ArchiveError(f"entry {member.name!r} cannot be read")
            with src:
                _copy_stream(src, staging.joinpath(*parts), budget, member.name)


def _skill_folder(staging: Path) -> Path:
    if (staging / "SKILL.md").is_file():
        return staging
    children = [c for c in staging.iterdir()]
    if len(children) == 1 and children[0].is_dir() and (children[0] / "SKILL.md").is_file():
        return children[0]
    raise ArchiveError("the source does not contain a SKILL.md (at its top or in a single top-level folder)")


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a staging or backup folder) if it exists."""
    shutil.rmtree(path, ignore_errors=True)
