"""Install receipts: the SHA-256 of every file each installed wheel put on disk, and their check.

The check finds any of those files modified or removed, and files no wheel installed added beside them.

A receipt is taken right after pip installs: every row of the distribution's RECORD (the wheel's own
list of files and hashes) is re-hashed on disk and must match, so a receipt never blesses a file that
already differs from the wheel. Verification later compares the disk against the receipt, not against
RECORD (an attacker who edits a file can edit RECORD too).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

__all__ = ["ReceiptError", "find_distribution", "take_receipt", "verify_receipt"]

_SKIP_SUFFIXES = (".pyc", ".pyo")


class ReceiptError(RuntimeError):
    """An installed distribution that does not match its wheel, or cannot be found."""


def find_distribution(
    name: str, location: Path | None, exclude: Iterable[Path] = ()
) -> importlib.metadata.Distribution:
    """The installed distribution ``name`` in ``location`` (a plugin folder) or the environment.

    ``exclude`` are folders on ``sys.path`` that are not the environment (plugin folders the loader added).
    """
    wanted = canonicalize_name(name)
    skip = {str(p) for p in exclude}
    paths = [str(location)] if location else [p for p in sys.path if p not in skip]
    # A lookup by name reads only the matching .dist-info folders, not every distribution's metadata.
    for dist in importlib.metadata.distributions(name=name, path=paths):
        if canonicalize_name(dist.metadata["Name"] or "") == wanted:
            return dist
    raise ReceiptError(f"{name} is not installed" + (f" in {location}" if location else ""))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _record_hex(value: str) -> str | None:
    algo, _, b64 = value.partition("=")
    if algo != "sha256" or not b64:
        return None
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


def take_receipt(dist: importlib.metadata.Distribution) -> tuple[Path, dict[str, str]]:
    """(base folder, {path relative to it: sha256}) for every file ``dist``'s RECORD lists.

    Raises :class:`ReceiptError` when a file on disk differs from the hash in RECORD.
    """
    base = Path(str(dist.locate_file(""))).resolve()
    record = dist.read_text("RECORD")
    if record is None:
        raise ReceiptError(f"{dist.metadata['Name']} has no RECORD; it was not installed from a wheel")
    files: dict[str, str] = {}
    for row in csv.reader(io.StringIO(record)):
        if not row:
            continue
        rel = row[0]
        if rel.endswith(_SKIP_SUFFIXES) or "/__pycache__/" in f"/{rel}":
            continue
        path = (base / rel).resolve()
        if not path.is_file():
            raise ReceiptError(f"{rel} is listed in RECORD but missing on disk")
        actual = _sha256_file(path)
        expected = _record_hex(row[1]) if len(row) > 1 and row[1] else None
        if expected is not None and expected != actual:
            raise ReceiptError(f"{rel} does not match the SHA-256 the wheel's RECORD gives for it")
        files[rel] = actual
    return base, files


def _owned_dirs(files: dict[str, str]) -> set[str]:
    """Top-level folders inside the base that belong to the distribution (never ``..`` paths)."""
    tops = set()
    for rel in files:
        parts = Path(rel).parts
        if len(parts) > 1 and parts[0] != "..":
            tops.add(parts[0])
    return tops


def verify_receipt(base: Path, files: dict[str, str], others: dict[str, str] | None = None) -> dict[str, list[str]]:
    """``{"modified", "added", "removed"}``: the receipt's files against the disk.

    ``added`` are files inside the distribution's own top-level folders that no receipt lists
    (``others`` holds the files of other receipts in the same base, so shared folders are not
    misreported); compiled bytecode is ignored, since Python writes it on import.
    """
    modified, removed = [], []
    for rel, digest in sorted(files.items()):
        path = base / rel
        if not path.is_file() or path.is_symlink():
            removed.append(rel)
        elif _sha256_file(path) != digest:
            modified.append(rel)
    known = set(files) | set(others or {})
    added = []
    for top in sorted(_owned_dirs(files)):
        root = base / top
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                if name.endswith(_SKIP_SUFFIXES):
                    continue
                rel = (Path(dirpath) / name).relative_to(base).as_posix()
                if rel not in known:
                    added.append(rel)
    return {"modified": modified, "added": sorted(added), "removed": removed}


def remove_installed(base: Path, files: dict[str, Any]) -> None:
    """Delete a folder-installed distribution's files and then its folders left empty."""
    dirs: set[Path] = set()
    for rel in files:
        path = base / rel
        if Path(rel).parts[0] == "..":
            continue
        path.unlink(missing_ok=True)
        dirs.update(path.parents)
    for folder in sorted((d for d in dirs if base in d.parents), key=lambda d: len(d.parts), reverse=True):
        for cache in folder.glob("__pycache__"):
            for f in cache.iterdir():
                f.unlink(missing_ok=True)
            cache.rmdir()
        try:
            folder.rmdir()
        except OSError:
            pass
