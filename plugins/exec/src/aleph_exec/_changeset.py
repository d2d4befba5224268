"""What a command did: the changeset read from an overlayfs upper directory.

A transaction runs a command on a copy-on-write view of the workspace (overlayfs: lower = the real
workspace, upper = the run's layer). When the command ends, ``layer/upper`` holds exactly what it
changed: created and modified entries whole, deletions as whiteouts (a character device 0:0, or a
zero-size file carrying an ``overlay.whiteout`` xattr), and a directory that was removed and made
again as an *opaque* directory (``trusted.overlay.opaque`` or ``user.overlay.opaque`` = ``y``),
under which nothing of the lower directory shows through.

:func:`read_changeset` turns that into a sorted list of :class:`Change` rows: every created, modified
and deleted path (the entries under a deleted or opaque lower directory are listed one by one), with
kind, size, mode, symlink target and a streamed SHA-256 of file content. The work is bounded: more
entries or more bytes to hash than the limits raise :class:`ChangesetTooLarge` (the caller refuses).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aleph_exec._layers import LAYERS_DIR

__all__ = ["Change", "Changeset", "ChangesetTooLarge", "read_changeset"]

Action = Literal["create", "modify", "delete"]
Kind = Literal["file", "dir", "symlink", "special"]

_CHUNK = 1024 * 1024
_json_str = json.encoder.encode_basestring_ascii  # what json.dumps uses for a str (ensure_ascii)
_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")
_XWHITEOUT = ("trusted.overlay.whiteout", "user.overlay.whiteout")


class ChangesetTooLarge(Exception):
    """The changeset has more entries or more bytes than this sandbox judges; nothing of it may land."""


@dataclass(frozen=True, slots=True)
class Change:
    """One path the command changed, workspace-relative (``/``-separated)."""

    path: str
    action: Action
    kind: Kind
    """Kind of the new entry; for a deletion, of the entry deleted."""
    size: int = 0
    mode: int = 0
    """Permission bits (``stat.S_IMODE``) of the new entry (or of the deleted one)."""
    target: str | None = None
    """A symlink's target."""
    sha256: str | None = None
    """Content hash of a created or modified file."""
    device: int | None = None
    """``st_rdev`` of a special file (fifo, socket, device)."""
    owner: tuple[int, int] = (-1, -1)
    """(uid, gid) of the new entry in the layer (not part of the digest)."""
    touched: bool = False
    """A modified file whose content and mode are as before (``touch``, ``sed -i`` that matched nothing):
    committed (its times change) but not counted as an overwrite."""

    @property
    def key(self) -> str:
        """Its count: ``created``, ``modified``, ``touched`` or ``deleted`` (``dirs_...`` for directories)."""
        name = {"create": "created", "modify": "touched" if self.touched else "modified", "delete": "deleted"}
        return ("dirs_" if self.kind == "dir" else "") + name[self.action]

    def content(self) -> str:
        """What the digest binds for this entry: the file hash, the link target or the mode."""
        if self.action == "delete":
            return ""
        if self.kind == "file":
            return self.sha256 or ""
        if self.kind == "symlink":
            return self.target or ""
        return f"{self.mode:o}"


@dataclass(slots=True)
class Changeset:
    """Everything a run changed, sorted by path."""

    upper: Path
    workspace: Path
    changes: list[Change] = field(default_factory=list)
    hashed_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def files(self) -> list[Change]:
        """The changes of non-directories (what counts as a file for the thresholds)."""
        return [c for c in self.changes if c.kind != "dir"]

    def counts(self) -> dict[str, int]:
        """Created, modified, touched and deleted files (non-directories), created and deleted directories."""
        out = {"created": 0, "modified": 0, "touched": 0, "deleted": 0, "dirs_created": 0, "dirs_deleted": 0}
        for c in self.changes:
            key = c.key
            if key in out:
                out[key] += 1
        return out

    def digest(self) -> str:
        """SHA-256 over the sorted (path, action, kind, content) rows: what the ledger binds."""
        h = hashlib.sha256(b"aleph-exec-changeset-1\n")
        # Each row is json.dumps([path, action, kind, content]) (all strings), built with the encoder's
        # own string function: the same bytes without a dumps() call per row.
        enc = _json_str
        rows = [f"[{enc(c.path)}, {enc(c.action)}, {enc(c.kind)}, {enc(c.content())}]\n" for c in self.changes]
        h.update("".join(rows).encode())
        return h.hexdigest()

    def top_dirs(self, limit: int = 5) -> list[str]:
        """The first path components changed most, most first (``src/``, ``.`` for the top level)."""
        tally: dict[str, int] = {}
        for c in self.files or self.changes:
            head = c.path.split("/", 1)[0] + "/" if "/" in c.path else "."
            tally[head] = tally.get(head, 0) + 1
        return [d for d, _ in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]

    def summary(self) -> str:
        """One line a person reads before approving: ``deletes 1,204 files under src/, modifies 3``."""
        n = self.counts()
        parts = []
        for key, verb in (
            ("deleted", "deletes"),
            ("modified", "modifies"),
            ("created", "creates"),
            ("touched", "touches"),
        ):
            if n[key]:
                where = _under([c for c in self.files if c.key == key])
                noun = "file" if n[key] == 1 else "files"
                parts.append(f"{verb} {n[key]:,} {noun}{where}")
        for key, verb in (("dirs_deleted", "removes"), ("dirs_created", "makes")):
            if n[key]:
                parts.append(f"{verb} {n[key]:,} {'directory' if n[key] == 1 else 'directories'}")
        return ", ".join(parts) if parts else "changes nothing"


def _under(changes: list[Change]) -> str:
    """`` under src/`` when every change lies in one top directory, else ``""``."""
    tops = {c.path.split("/", 1)[0] for c in changes if "/" in c.path}
    if len(tops) == 1 and all("/" in c.path for c in changes):
        return f" under {tops.pop()}/"
    return ""


def _kind(mode: int) -> Kind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"


def _has_xattr(path: str, names: tuple[str, ...], value: bytes | None = None) -> bool:
    for name in names:
        try:
            got = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
        if value is None or got == value:
            return True
    return False


def is_whiteout(path: str, st: os.stat_result) -> bool:
    """A deletion marker: a character device 0:0, or an empty file with an ``overlay.whiteout`` xattr."""
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
        return True
    return stat.S_ISREG(st.st_mode) and st.st_size == 0 and _has_xattr(path, _XWHITEOUT)


def is_opaque(path: str) -> bool:
    """An upper directory under which nothing of the lower one shows."""
    return _has_xattr(path, _OPAQUE, b"y")


_LIST_FROM = 64
"""Upper entries from which the lower directory is listed rather than probed one lstat at a time."""


def _listing(lower: str, wanted: int) -> set[str] | None:
    """The names in ``lower`` when listing it is cheaper than ``wanted`` lstats; else None (probe each)."""
    if wanted < _LIST_FROM:
        return None
    try:
        # A directory's size grows with its entries (ext4: a 4 KiB block holds 100 or more): a huge one is
        # probed entry by entry instead.
        if os.lstat(lower).st_size > wanted * 256:
            return None
        with os.scandir(lower) as it:
            return {e.name for e in it}
    except OSError:
        return None


class _Reader:
    def __init__(self, upper: Path, workspace: Path, max_entries: int, max_bytes: int) -> None:
        self.cs = Changeset(upper=upper, workspace=workspace)
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def add(self, change: Change) -> None:
        self.cs.changes.append(change)
        if len(self.cs.changes) > self.max_entries:
            raise ChangesetTooLarge(
                f"the command changed more than {self.max_entries:,} entries ([exec] max_changeset_files)"
            )

    def hash_file(self, path: str, size: int) -> str:
        if self.cs.hashed_bytes + size > self.max_bytes:
            raise ChangesetTooLarge(
                f"the command wrote more than {self.max_bytes // (1024 * 1024):,} MiB ([exec] max_changeset_mb)"
            )
        h = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            read = 0
            if size < _CHUNK:
                # Most files are small: one read finds the end (a short read of a regular file is its end).
                chunk = os.read(fd, size + 1)
                if len(chunk) <= size:
                    h.update(chunk)
                    self.cs.hashed_bytes += len(chunk)
                    return h.hexdigest()
                read = len(chunk)
                if self.cs.hashed_bytes + read > self.max_bytes:
                    raise ChangesetTooLarge(
                        f"the command wrote more than {self.max_bytes // (1024 * 1024):,} MiB ([exec] max_changeset_mb)"
                    )
                h.update(chunk)
            while chunk := os.read(fd, _CHUNK):
                read += len(chunk)
                if self.cs.hashed_bytes + read > self.max_bytes:
                    raise ChangesetTooLarge(
                        f"the command wrote more than {self.max_bytes // (1024 * 1024):,} MiB ([exec] max_changeset_mb)"
                    )
                h.update(chunk)
        finally:
            os.close(fd)
        self.cs.hashed_bytes += read
        return h.hexdigest()

    def deleted_tree(self, lower: str, rel: str, st: os.stat_result) -> None:
        """Every entry of a lower subtree (children first), as deletions."""
        if stat.S_ISDIR(st.st_mode):
            with os.scandir(lower) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                self.deleted_tree(entry.path, f"{rel}/{entry.name}", entry.stat(follow_symlinks=False))
        target = os.readlink(lower) if stat.S_ISLNK(st.st_mode) else None
        self.add(Change(rel, "delete", _kind(st.st_mode), st.st_size, stat.S_IMODE(st.st_mode), target))

    def walk(self, upper: str, lower: str | None, rel: str, opaque: bool) -> None:
        """Compare the upper directory ``upper`` with its lower counterpart (``None``: there is none)."""
        with os.scandir(upper) as it:
            entries = sorted(it, key=lambda e: e.name)
        names: set[str] = set()
        # Many new entries in an existing directory: one listing of the lower one instead of an lstat that
        # fails for each (only when the lower directory is not much larger than what the upper one holds).
        present = _listing(lower, len(entries)) if lower is not None else None
        for entry in entries:
            names.add(entry.name)
            path = f"{rel}/{entry.name}" if rel else entry.name
            ust = entry.stat(follow_symlinks=False)
            lst: os.stat_result | None = None
            lpath = os.path.join(lower, entry.name) if lower is not None else None
            if lpath is not None and (present is None or entry.name in present):
                try:
                    lst = os.lstat(lpath)
                except FileNotFoundError:
                    lst = None
            if is_whiteout(entry.path, ust):
                if lst is not None and lpath is not None:
                    self.deleted_tree(lpath, path, lst)
                continue
            ukind = _kind(ust.st_mode)
            lkind = _kind(lst.st_mode) if lst is not None else None
            if ukind == "dir":
                umode = stat.S_IMODE(ust.st_mode)
                if lkind == "dir" and lst is not None:
                    # Under an opaque directory nothing of the lower one shows, at any depth.
                    hides = opaque or is_opaque(entry.path)
                    if umode != stat.S_IMODE(lst.st_mode):
                        self.add(Change(path, "modify", "dir", 0, umode))
                    self.walk(entry.path, lpath, path, hides)
                    continue
                if lst is not None and lpath is not None:
                    self.deleted_tree(lpath, path, lst)  # a file, link or device replaced by a directory
                self.add(Change(path, "create", "dir", 0, umode))
                self.walk(entry.path, None, path, False)
                continue
            if lkind == "dir" and lpath is not None and lst is not None:
                self.deleted_tree(lpath, path, lst)  # a directory replaced by a file, link or device
                lkind = None
            self.add(self.entry_change(entry.path, path, ust, lpath if lkind is not None else None, lst))
        if opaque and lower is not None:
            self.opaque_rest(lower, rel, names)

    def opaque_rest(self, lower: str, rel: str, names: set[str]) -> None:
        """Entries of the lower directory that an opaque upper directory hides: deleted."""
        with os.scandir(lower) as it:
            # The workspace's layers are not the project's: an opaque root hides them from nobody.
            kept = (e for e in it if e.name not in names and (rel or e.name != LAYERS_DIR))
            hidden = sorted(kept, key=lambda e: e.name)
        for entry in hidden:
            sub = f"{rel}/{entry.name}" if rel else entry.name
            self.deleted_tree(entry.path, sub, entry.stat(follow_symlinks=False))

    def entry_change(
        self, upath: str, path: str, st: os.stat_result, lpath: str | None, lst: os.stat_result | None
    ) -> Change:
        action: Action = "create" if lpath is None else "modify"
        kind = _kind(st.st_mode)
        mode = stat.S_IMODE(st.st_mode)
        owner = (st.st_uid, st.st_gid)
        if kind == "file":
            digest = self.hash_file(upath, st.st_size)
            touched = (
                lpath is not None
                and lst is not None
                and stat.S_ISREG(lst.st_mode)
                and (lst.st_size, stat.S_IMODE(lst.st_mode)) == (st.st_size, mode)
                and self.hash_file(lpath, lst.st_size) == digest
            )
            return Change(path, action, kind, st.st_size, mode, sha256=digest, owner=owner, touched=touched)
        if kind == "symlink":
            return Change(path, action, kind, st.st_size, mode, target=os.readlink(upath), owner=owner)
        return Change(path, action, kind, 0, mode, device=st.st_rdev, owner=owner)


def read_changeset(
    upper: Path, workspace: Path, *, max_entries: int = 100_000, max_bytes: int = 4 * 1024**3
) -> Changeset:
    """The changeset an overlay upper directory holds against ``workspace`` (its lower), sorted by path.

    Raises :class:`ChangesetTooLarge` past ``max_entries`` changes or ``max_bytes`` of content to hash.
    """
    reader = _Reader(upper, workspace, max_entries, max_bytes)
    if upper.is_dir():
        reader.walk(str(upper), str(workspace), "", is_opaque(str(upper)))
    reader.cs.changes.sort(key=lambda c: (c.path, c.action != "delete"))
    return reader.cs


def iter_parents(path: str) -> Iterator[str]:
    """``a/b/c`` → ``a``, ``a/b``."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        yield "/".join(parts[:i])
