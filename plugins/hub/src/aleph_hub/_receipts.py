"""Install receipts: the SHA-256 of every file each installed wheel put on disk, and their check.

The check finds any of those files modified or removed, and files no wheel installed added beside them.

A receipt is taken right after pip installs: every row of the distribution's RECORD (the wheel's own
list of files and hashes) is re-hashed on disk and must match, so a receipt never blesses a file that
already differs from the wheel. Verification later compares the disk against the receipt, not against
RECORD (an attacker who edits a file can edit RECORD too).

Every file that can run is covered. Bytecode is part of the receipt: right after pip installs, the
hub compiles each module's ``__pycache__`` file itself as a *checked-hash* pyc (PEP 552: Python checks it
against the source's hash, not its mtime, and never rewrites a valid one) and records its SHA-256, so a
planted or edited pyc (whose header may well match the source) differs from the receipt. Any other file
a verify finds among the distribution's folders, bytecode included, is reported as added; in a plugin
folder, the whole folder is checked, so a ``.pth``, ``sitecustomize.py``, ``usercustomize.py`` or a module
or native extension dropped at its root (which Python runs or imports at start-up) is reported too.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import importlib.util
import io
import os
import py_compile
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

__all__ = ["ReceiptError", "compile_bytecode", "find_distribution", "take_receipt", "verify_receipt"]

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


def compile_bytecode(base: Path, files: dict[str, str]) -> dict[str, str]:
    """Compile every module of ``files`` as a checked-hash pyc; {pyc path relative to ``base``: sha256}.

    Bytecode pip wrote (timestamp-checked, so any pyc whose header copies the source's mtime and size
    would pass) is replaced. A module that does not compile gets no bytecode: Python cannot import it
    either.
    """
    out: dict[str, str] = {}
    for rel in sorted(files):
        if not rel.endswith(".py") or Path(rel).parts[0] == "..":
            continue
        source = base / rel
        cached = Path(importlib.util.cache_from_source(str(source)))
        try:
            py_compile.compile(
                str(source),
                cfile=str(cached),
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
            )
        except (py_compile.PyCompileError, SyntaxError, ValueError):
            cached.unlink(missing_ok=True)
            continue
        out[cached.relative_to(base).as_posix()] = _sha256_file(cached)
    return out


def _owned_dirs(files: dict[str, str]) -> set[str]:
    """Top-level folders inside the base that belong to the distribution (never ``..`` paths)."""
    tops = set()
    for rel in files:
        parts = Path(rel).parts
        if len(parts) > 1 and parts[0] != "..":
            tops.add(parts[0])
    return tops


def verify_receipt(
    base: Path, files: dict[str, str], others: dict[str, str] | None = None, *, whole_folder: bool = False
) -> dict[str, list[str]]:
    """``{"modified", "added", "removed"}``: the receipt's files against the disk.

    ``added`` are files (bytecode and symbolic links included) inside the distribution's own top-level
    folders, or anywhere in ``base`` when ``whole_folder`` (a plugin folder holds nothing the hub did not
    install), that no receipt lists; ``others`` holds the files of other receipts in the same base, so
    shared folders are not misreported.
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
    roots = [base] if whole_folder else [base / top for top in sorted(_owned_dirs(files))]
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            # A symbolic link to a folder is not walked into: it is itself something no receipt lists.
            linked = [d for d in dirnames if (here / d).is_symlink()]
            dirnames[:] = [d for d in dirnames if d not in linked]
            for name in [*filenames, *linked]:
                rel = (here / name).relative_to(base).as_posix()
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
