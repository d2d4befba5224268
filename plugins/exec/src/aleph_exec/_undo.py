"""Undo: put the workspace back to just before a committed exec call.

Every commit keeps what it overwrote or deleted under ``<data_dir>/exec/undo/<call id>/`` (``files/``
plus ``manifest.json``: the steps it took, the new content hashes, when). The store is bounded by the
number of calls and by bytes (``[exec] undo_max_calls``, ``undo_max_mb``); the oldest go first.

:meth:`UndoStore.undo` refuses when a later kept call changed one of the same paths, or when a path no
longer holds what the call left there (someone edited it since), unless ``force=True``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aleph_exec._tree import remove_tree

__all__ = ["UndoError", "UndoStore", "exec_lock"]

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class UndoError(Exception):
    """An undo that cannot (or may not) be done; the message says why and what to do."""


@contextlib.contextmanager
def exec_lock(root: Path) -> Iterator[None]:
    """Serialise commits and undos of one data directory, across threads and processes."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass(slots=True)
class Kept:
    """One call's undo entry."""

    path: Path
    manifest: dict[str, Any]

    @property
    def call_id(self) -> str:
        return str(self.manifest.get("call_id", self.path.name))

    @property
    def paths(self) -> set[str]:
        """Every path the call changed."""
        out = set()
        for s in self.manifest["steps"]:
            out.add(s["path"])
            out.update(e[0] for e in s.get("entries", ()))
        return out


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def _left(path: Path, kind: str, content: str) -> bool:
    """Whether ``path`` is still the ``kind`` entry with ``content`` (hash, link target) a call left."""
    if kind == "symlink":
        return path.is_symlink() and os.readlink(path) == content
    if kind == "dir":
        return path.is_dir() and not path.is_symlink()
    return path.is_file() and not path.is_symlink() and _hash(path) == content


def _changed(ws: Path, step: dict[str, Any]) -> list[str]:
    """The paths of a step that no longer hold what it left there."""
    path = ws / step["path"]
    if step["op"] in ("del", "rmdir"):
        return [step["path"]] if os.path.lexists(path) else []
    if step["op"] == "chmod":
        return [] if path.is_dir() else [step["path"]]
    if step["op"] == "mvdir":
        if not (path.is_dir() and not path.is_symlink()):
            return [step["path"]]
        return [rel for rel, kind, content, _mode in step["entries"] if not _left(ws / rel, kind, content)]
    content = step["target"] if step["kind"] == "symlink" else step["sha256"]
    return [] if _left(path, step["kind"], content) else [step["path"]]


def _make_room(ws: Path, rel: str, kind: str, content: str, aside: list[str]) -> None:
    """Clear ``rel`` for what the call replaced: remove it if it is what the call left, else rename it beside."""
    target = ws / rel
    if not os.path.lexists(target):
        return
    if kind and kind != "dir" and _left(target, kind, content):
        os.unlink(target)
        return
    n = 1
    while os.path.lexists(spare := target.with_name(f"{target.name}.aleph-undo-{n}")):
        n += 1
    os.rename(target, spare)
    aside.append(spare.relative_to(ws).as_posix())


def _remove_written(ws: Path, top: str, entries: list[list[Any]]) -> list[str]:
    """Remove a directory the call made, entry by entry: only what it wrote and nobody changed since.

    Returns the directories left because they hold something else (a file someone added, or edited).
    """
    kept: list[str] = []
    ordered = sorted(entries, key=lambda e: -e[0].count("/"))
    for rel, kind, content, _mode in [*ordered, [top, "dir", "", 0]]:
        path = ws / rel
        if kind == "dir":
            if path.is_dir() and not path.is_symlink():
                try:
                    os.rmdir(path)
                except OSError:
                    kept.append(rel)
        elif os.path.lexists(path) and _left(path, kind, content):
            os.unlink(path)
    return [k for k in kept if not any(o != k and o.startswith(k + "/") for o in kept)] if kept else []


class UndoStore:
    """The undo entries of one data directory."""

    def __init__(self, root: Path, *, max_calls: int = 50, max_bytes: int = 1024**3) -> None:
        self.root = root
        self.dir = root / "undo"
        self.max_calls = max_calls
        self.max_bytes = max_bytes

    def new_entry(self, call_id: str) -> Path:
        """A fresh (not yet created) directory for a call's undo entry."""
        base = _SAFE.sub("_", call_id)[:64] or "call"
        path, n = self.dir / base, 1
        while path.exists():
            n += 1
            path = self.dir / f"{base}-{n}"
        return path

    def entries(self) -> list[Kept]:
        """Kept calls, oldest first."""
        out = []
        if self.dir.is_dir():
            for entry in self.dir.iterdir():
                try:
                    manifest = json.loads((entry / "manifest.json").read_text())
                except (OSError, ValueError):
                    continue  # a commit in flight, or a broken entry
                out.append(Kept(entry, manifest))
        return sorted(out, key=lambda k: k.manifest.get("seq", 0))

    def prune(self) -> list[str]:
        """Drop the oldest entries beyond the count and byte bounds; the call ids dropped."""
        kept = self.entries()
        total = sum(k.manifest.get("saved_bytes", 0) for k in kept)
        dropped = []
        while kept and (len(kept) > self.max_calls or total > self.max_bytes):
            oldest = kept.pop(0)
            total -= oldest.manifest.get("saved_bytes", 0)
            remove_tree(oldest.path, ignore_errors=True)
            dropped.append(oldest.call_id)
        return dropped

    def find(self, call_id: str | None) -> Kept:
        """The entry of ``call_id`` (None: the newest)."""
        kept = self.entries()
        if not kept:
            raise UndoError("nothing to undo: no committed exec call is kept")
        if call_id is None:
            return kept[-1]
        for k in reversed(kept):
            if call_id in (k.call_id, k.path.name):
                return k
        raise UndoError(
            f"no kept exec call {call_id!r} (kept: {', '.join(k.call_id for k in kept[-10:])}); "
            "older calls are dropped beyond [exec] undo_max_calls / undo_max_mb"
        )

    def undo(self, call_id: str | None = None, *, force: bool = False) -> dict[str, Any]:
        """Restore the workspace to just before the call; returns what was restored."""
        with exec_lock(self.root):
            entry = self.find(call_id)
            ws = Path(entry.manifest["workspace"])
            steps = entry.manifest["steps"]
            if not force:
                later = [k for k in self.entries() if k.manifest.get("seq", 0) > entry.manifest.get("seq", 0)]
                for k in later:
                    both = sorted(k.paths & entry.paths)
                    if both:
                        raise UndoError(
                            f"a later call {k.call_id!r} changed {len(both)} of the same paths ({both[0]!r}, ...): "
                            f"undo that one first, or pass --force"
                        )
                changed = [p for s in steps for p in _changed(ws, s)]
                if changed:
                    raise UndoError(
                        f"{len(changed)} path(s) changed since the call ({changed[0]!r}, ...); "
                        "pass --force to put them back anyway"
                    )
            restored, kept, aside = self._restore(entry, ws, steps)
            remove_tree(entry.path, ignore_errors=True)
        out: dict[str, Any] = {"call_id": entry.call_id, "restored": restored, "workspace": str(ws)}
        if kept:
            out["kept"] = kept  # directories the call made that now hold someone else's files
        if aside:
            out["set_aside"] = aside  # what stood where the call's files are put back, renamed beside
        return out

    def _restore(self, entry: Kept, ws: Path, steps: list[dict[str, Any]]) -> tuple[int, list[str], list[str]]:
        """Put back what the call replaced; returns (restored, kept, set aside).

        Only what the call wrote, and what is still as it left it, is removed: a file someone added to a
        directory the call made is kept (with that directory), and content someone put where the call
        wrote (put back with ``force``) is renamed beside, never overwritten.
        """
        saved = entry.path / "files"
        count = 0
        kept: list[str] = []
        aside: list[str] = []
        real = os.path.realpath(ws)
        for s in steps:  # nothing is put back through a directory that now leads outside the workspace
            parent = os.path.realpath(os.path.dirname(ws / s["path"]))
            if parent != real and not parent.startswith(real + "/"):
                raise UndoError(f"{s['path']!r}: its directory now leads outside the workspace ({parent})")
        # Reverse order of the commit: directory modes, the new entries out, directories, deletions back.
        for s in reversed(steps):
            target = ws / s["path"]
            op = s["op"]
            if op == "chmod":
                with contextlib.suppress(OSError):
                    os.chmod(target, s["old_mode"])
            elif op == "put":
                content = s["target"] if s["kind"] == "symlink" else s["sha256"]
                _make_room(ws, s["path"], s["kind"], content, aside)
                if s["old"]:
                    self._put_back(saved / s["path"], target)
                count += 1
            elif op == "mvdir":
                kept += _remove_written(ws, s["path"], s["entries"])
                count += sum(1 for e in s["entries"] if e[1] != "dir")
            elif op == "rmdir":
                target.mkdir(mode=s["mode"], parents=True, exist_ok=True)
                os.chmod(target, s["mode"])
            elif op == "del":
                _make_room(ws, s["path"], "", "", aside)
                self._put_back(saved / s["path"], target)
                count += 1
        return count, kept, aside

    @staticmethod
    def _put_back(keep: Path, target: Path) -> None:
        if not os.path.lexists(keep):
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(keep, target)
        except OSError:
            if keep.is_symlink():
                os.symlink(os.readlink(keep), target)
            else:
                shutil.copy2(keep, target, follow_symlinks=False)
