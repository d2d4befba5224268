"""Commit a judged changeset into the workspace: journaled, atomic per file, with undo kept.

Before the first change, the whole plan is written to ``<data_dir>/exec/journal/<id>.json`` (written
to a temporary name, fsynced, renamed, directory fsynced): the only fsyncs of a commit. Then, in order:
deletions (each old entry moved into ``<data_dir>/exec/undo/<id>/files/``), removed directories,
new directories (each with all it holds in one rename: nothing in it existed before), created and
modified entries in existing directories (the old one hard-linked, or copied, into the undo
tree first; the new one renamed from the layer's upper directory when it is on the workspace's
filesystem, else copied to a temporary file in the target directory and renamed), directory modes.
Every step is a ``rename``, so each file is old or new at any moment. The undo manifest is written,
then the journal removed.

Every step can be done again: a step whose effect is already there is skipped. So a commit that a
crash cut short is finished by :func:`recover` at the next start (plugin start-up), from the journal
and the layer it names; when the layer is gone, what was done is rolled back from the undo tree.
Files are not fsynced one by one: after a power loss a committed file may read back empty or old
(what any editor's non-fsynced save risks), but never a mix of two calls' plans.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aleph_exec._changeset import Changeset
from aleph_exec._tree import remove_tree

__all__ = ["CommitError", "commit", "recover"]

_SUID = stat.S_ISUID | stat.S_ISGID


class CommitError(Exception):
    """A commit could not finish (it was rolled back where it could be)."""


_DROPPED_XATTRS = frozenset({"system.posix_acl_access", "system.posix_acl_default", "security.capability"})


def _foreign_xattr(name: str) -> bool:
    """An xattr a commit does not carry into the workspace: overlay's own, ACLs and file capabilities.

    An ACL grants some other user access that the file's mode, which is all a changeset shows, does
    not tell; a file capability is privilege. (Labels such as ``security.selinux`` are the system's.)
    """
    return ".overlay." in name or name in _DROPPED_XATTRS


def _has_foreign_xattrs(path: str) -> bool:
    try:
        return any(_foreign_xattr(name) for name in os.listxattr(path, follow_symlinks=False))
    except OSError:
        return False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (temp file, fsync, rename, fsync directory)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    _fsync_dir(path.parent)


def _copy_data(src: str, dst: str) -> None:
    """Content and permission bits (``copy2`` would also copy times and xattrs, overlay's among them)."""
    shutil.copyfile(src, dst, follow_symlinks=False)
    os.chmod(dst, stat.S_IMODE(os.lstat(src).st_mode))


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _plan(cs: Changeset) -> list[dict[str, Any]]:
    """The ordered steps of a commit."""
    ws = cs.workspace
    dirs = [c for c in cs.changes if c.kind == "dir"]
    new_dirs = {c.path for c in dirs if c.action == "create"}
    # A directory the command made, with everything in it, lands in one rename (its subtree is all new).
    moved = sorted((c for c in dirs if c.action == "create" and _parent(c.path) not in new_dirs), key=lambda c: c.path)
    steps: list[dict[str, Any]] = []
    dels = [c for c in cs.changes if c.action == "delete" and c.kind != "dir"]
    steps += [{"op": "del", "path": c.path, "size": c.size} for c in dels]
    rmdirs = sorted((c for c in dirs if c.action == "delete"), key=lambda c: -c.path.count("/"))
    steps += [{"op": "rmdir", "path": c.path, "mode": c.mode} for c in rmdirs]
    inside: dict[str, list[list[Any]]] = {c.path: [] for c in moved}
    tops = set(inside)
    for c in cs.changes:
        if c.action == "delete" or _parent(c.path) not in new_dirs:
            continue
        top = c.path
        while top not in tops:
            top = _parent(top)
        inside[top].append([c.path, c.kind, c.content(), c.mode])
    steps += [{"op": "mvdir", "path": c.path, "mode": c.mode, "entries": inside[c.path]} for c in moved]
    me = (os.geteuid(), os.getegid())
    for c in cs.changes:
        if c.action == "delete" or c.kind == "dir" or _parent(c.path) in new_dirs:
            continue
        old = c.action == "modify"
        step = {"op": "put", "path": c.path, "kind": c.kind, "old": old, "mode": c.mode}
        # A copied-up (modified) file may carry overlay xattrs; set-id bits and foreign owners are fixed.
        step["fix"] = (
            old
            or bool(c.mode & _SUID)
            or (me[0] == 0 and c.owner != (0, me[1]))
            or (c.kind == "file" and _has_foreign_xattrs(str(cs.upper / c.path)))
        )
        step["old_size"] = os.lstat(ws / c.path).st_size if old else 0
        step["target" if c.kind == "symlink" else "sha256"] = c.content()
        steps.append(step)
    for c in dirs:
        if c.action == "modify":
            old_mode = stat.S_IMODE(os.lstat(ws / c.path).st_mode)
            steps.append({"op": "chmod", "path": c.path, "mode": c.mode, "old_mode": old_mode})
    return steps


class _Applier:
    def __init__(self, journal: dict[str, Any]) -> None:
        self.ws = journal["workspace"] + "/"
        self.upper = journal["upper"] + "/"
        self.saved = journal["undo"] + "/files/"
        self.rename_in = journal["rename_in"]
        self.rename_undo = journal["rename_undo"]
        self.made: set[str] = set()
        self.euid, self.egid = os.geteuid(), os.getegid()
        self.real_ws = os.path.realpath(journal["workspace"])
        self.inside: set[str] = set()

    def _confined(self, target: str) -> None:
        """Refuse a target whose directory resolves outside the workspace (a symlink swapped in since)."""
        parent = os.path.dirname(target)
        if parent in self.inside:
            return
        real = os.path.realpath(parent)
        if real != self.real_ws and not real.startswith(self.real_ws + "/"):
            raise OSError(f"{target}: its directory now leads outside the workspace ({real})")
        self.inside.add(parent)

    def _parent(self, path: str) -> None:
        parent = os.path.dirname(path)
        if parent not in self.made:
            os.makedirs(parent, exist_ok=True)
            self.made.add(parent)

    def _save(self, target: str, rel: str, *, move: bool) -> None:
        """Keep the old entry at ``rel`` in the undo tree (moved, or linked/copied when ``move`` is False)."""
        keep = self.saved + rel
        if os.path.lexists(keep):
            if move:
                os.unlink(target)  # saved before a crash; the move's second half
            return
        self._parent(keep)
        if self.rename_undo:
            if move:
                os.rename(target, keep)
                return
            try:
                os.link(target, keep, follow_symlinks=False)
                return
            except OSError:
                pass
        if stat.S_ISLNK(os.lstat(target).st_mode):
            os.symlink(os.readlink(target), keep)
        else:
            shutil.copy2(target, keep, follow_symlinks=False)
        if move:
            os.unlink(target)

    def _fix(self, path: str) -> None:
        """No set-id bits, overlay xattrs or ACLs from a sandboxed command; owned by this process's user."""
        st = os.lstat(path)
        if self.euid == 0 and (st.st_uid != 0 or st.st_gid != self.egid):
            os.lchown(path, 0, self.egid)
        if stat.S_ISREG(st.st_mode) and st.st_mode & _SUID:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~_SUID)
        if not stat.S_ISLNK(st.st_mode):
            for name in os.listxattr(path, follow_symlinks=False):
                if _foreign_xattr(name):
                    os.removexattr(path, name, follow_symlinks=False)

    def _fix_tree(self, top: str, entries: list[list[Any]]) -> None:
        """:meth:`_fix` for a new directory's subtree, visiting only what needs it."""
        self._fix(top)
        for rel, kind, _content, mode in entries:
            if (kind == "file" and mode & _SUID) or (kind in ("file", "dir") and _has_foreign_xattrs(self.upper + rel)):
                self._fix(self.upper + rel)
        if self.euid == 0:
            for dirpath, dirnames, filenames in os.walk(top):
                for name in dirnames + filenames:
                    path = os.path.join(dirpath, name)
                    st = os.lstat(path)
                    if st.st_uid != 0 or st.st_gid != self.egid:
                        os.lchown(path, 0, self.egid)

    def _install(self, src: str, target: str, kind: str) -> None:
        """Put ``src`` (from the layer) at ``target`` in one rename; across filesystems copy it beside first."""
        if self.rename_in:
            os.rename(src, target)
            return
        head, name = os.path.split(target)
        tmp = os.path.join(head, f".{name}.aleph-{secrets.token_hex(4)}")
        if kind == "symlink":
            os.symlink(os.readlink(src), tmp)
        elif kind == "dir":
            shutil.copytree(src, tmp, symlinks=True, copy_function=_copy_data)
        else:
            _copy_data(src, tmp)
        os.rename(tmp, target)
        if kind == "dir":
            remove_tree(src)
        else:
            os.unlink(src)

    def step(self, s: dict[str, Any]) -> None:
        rel = s["path"]
        target = self.ws + rel
        op = s["op"]
        self._confined(target)
        if op == "del":
            if os.path.lexists(target):
                self._save(target, rel, move=True)
        elif op == "rmdir":
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(target)
        elif op == "chmod":
            os.chmod(target, s["mode"])
        elif op == "mvdir":
            src = self.upper + rel
            if not os.path.lexists(src):
                return  # moved in before a crash
            self._fix_tree(src, s["entries"])
            self._parent(target)
            if os.path.isdir(target) and not os.path.islink(target):
                remove_tree(target)  # a partial copy a crash left (never a user's directory: it was new)
            self._install(src, target, "dir")
        elif op == "put":
            src = self.upper + rel
            if s["old"] and os.path.lexists(target) and os.path.lexists(src):
                self._save(target, rel, move=False)
            try:
                if s.get("fix", True):
                    self._fix(src)
                self._install(src, target, s["kind"])
            except FileNotFoundError:
                if os.path.lexists(src):
                    raise
                # renamed in before a crash

    def undo_step(self, s: dict[str, Any]) -> None:
        """Put back what ``step(s)`` changed (for a rollback), as far as it got."""
        target = self.ws + s["path"]
        keep = self.saved + s["path"]
        op = s["op"]
        if op == "del" or (op == "put" and s["old"]):
            if os.path.lexists(keep):
                self._parent(target)
                os.replace(keep, target)
        elif op == "put":
            if os.path.lexists(target) and not os.path.lexists(self.upper + s["path"]):
                os.unlink(target)
        elif op == "mvdir":
            if os.path.isdir(target) and not os.path.lexists(self.upper + s["path"]):
                remove_tree(target)
        elif op == "rmdir":
            os.makedirs(target, mode=s["mode"], exist_ok=True)
        elif op == "chmod":
            os.chmod(target, s["old_mode"])


def _same_fs(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def commit(
    cs: Changeset,
    *,
    journal_dir: Path,
    undo_dir: Path,
    meta: dict[str, Any],
    on_step: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Apply ``cs`` to its workspace; returns the undo manifest (written to ``undo_dir/manifest.json``).

    ``meta`` (call id, tool, digest, ...) goes into the manifest. ``on_step(i)`` is called before step
    ``i`` (tests use it to crash a commit half-way).
    """
    try:
        steps = _plan(cs)  # reads the old entries' sizes and modes: the workspace may have moved on
    except OSError as exc:
        raise CommitError(f"the workspace changed while the command ran ({exc}); nothing was committed") from exc
    journal_dir.mkdir(parents=True, exist_ok=True)
    undo_dir.mkdir(parents=True, exist_ok=False)
    journal = {
        "version": 1,
        "workspace": str(cs.workspace),
        "upper": str(cs.upper),
        "undo": str(undo_dir),
        "rename_in": _same_fs(cs.upper, cs.workspace),
        "rename_undo": _same_fs(undo_dir, cs.workspace),
        "meta": meta,
        "steps": steps,
    }
    path = journal_dir / f"{undo_dir.name}.json"
    write_durable(path, json.dumps(journal).encode())
    applier = _Applier(journal)
    try:
        for i, s in enumerate(steps):
            if on_step is not None:
                on_step(i)
            applier.step(s)
    except OSError as exc:
        _rollback(applier, steps)
        path.unlink()
        remove_tree(undo_dir, ignore_errors=True)
        raise CommitError(f"the commit failed and was rolled back: {exc}") from exc
    return _finish(journal, path)


def _finish(journal: dict[str, Any], path: Path) -> dict[str, Any]:
    steps = journal["steps"]
    saved = sum(s.get("size", 0) for s in steps if s["op"] == "del") + sum(
        s.get("old_size", 0) for s in steps if s["op"] == "put" and s["old"]
    )
    manifest = {
        **journal["meta"],
        "workspace": journal["workspace"],
        "seq": journal["meta"].get("seq", time.time_ns()),
        "saved_bytes": saved,
        "steps": steps,
    }
    undo = Path(journal["undo"])
    (undo / "manifest.json").write_text(json.dumps(manifest))
    path.unlink()
    return manifest


def _rollback(applier: _Applier, steps: list[dict[str, Any]]) -> None:
    for s in reversed(steps):
        with contextlib.suppress(OSError):
            applier.undo_step(s)


def recover(journal_dir: Path) -> list[str]:
    """Finish (or, without the layer, roll back) every commit a crash interrupted; what was done, per journal."""
    done: list[str] = []
    if not journal_dir.is_dir():
        return done
    for path in sorted(journal_dir.glob("*.json")):
        try:
            journal = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink()  # never finished writing: no step ran
            continue
        applier = _Applier(journal)
        steps = journal["steps"]
        if Path(journal["upper"]).is_dir():
            try:
                for s in steps:
                    applier.step(s)
            except OSError as exc:
                _rollback(applier, steps)
                path.unlink()
                done.append(f"{path.stem}: rolled back ({exc})")
                continue
            _finish(journal, path)
            remove_tree(Path(journal["upper"]).parent, ignore_errors=True)
            done.append(f"{path.stem}: finished")
        else:
            _rollback(applier, steps)
            path.unlink()
            remove_tree(journal["undo"], ignore_errors=True)
            done.append(f"{path.stem}: rolled back (its layer is gone)")
    return done
