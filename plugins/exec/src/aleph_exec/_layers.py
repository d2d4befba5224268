"""Where a transaction's copy-on-write layer lives: on the workspace's filesystem, so a commit renames.

A commit moves each new or modified file from the layer's upper directory into the workspace. On one
filesystem that is a ``rename`` per file (or per new directory); across two it is a copy and a rename,
an order of magnitude slower for a large changeset. The data directory is often on another
filesystem than the workspace (a home directory and a mounted project, a container volume, a tmpfs),
so layers live in the workspace itself, under :data:`LAYERS_DIR`:

* ``<workspace>/.aleph-tx/`` (mode 0700, this process's user), holding a ``.gitignore`` of ``*`` so git
  ignores all of it; never part of a changeset, refused to every writer (a protected path), hidden from
  listings, and covered by an empty read-only tmpfs inside the sandbox (a command cannot see or touch
  any layer, its own included: it sees its writes only through the overlay);
* in it one directory per runtime, ``rt-<random>``, holding an ``flock``-ed ``lock`` file for as long as
  the runtime lives, and the runtime's layers. At the next start (:meth:`LayerRoot.sweep`), a runtime
  directory whose lock can be taken belongs to a runtime that is gone (closed, crashed or killed): it
  is removed with every layer in it. A directory is locked before it gets its ``rt-`` name, so a sweep
  never sees a live runtime's directory unlocked.

overlayfs accepts an upper directory inside its lower one (lookups of the layer from inside the
overlay fail with ``ELOOP``; the tmpfs over ``.aleph-tx`` means none happens). When the workspace cannot
hold the layers (read-only, owned by another user than Aleph's, or ``.aleph-tx`` is not a directory of
ours), they go to the fallback directory (``<data_dir>/exec/layers``), and :attr:`LayerRoot.note` says
why for ``aleph doctor`` (``exec.layers``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
import tempfile
import threading
import time
from pathlib import Path

from aleph_exec._tree import remove_tree

__all__ = ["LAYERS_DIR", "LayerRoot", "fallback_dir", "layers_check", "placement"]

LAYERS_DIR = ".aleph-tx"
"""The workspace-level directory of transaction layers (masked in the sandbox, never committed); one of
``aleph.ProtectedPaths.INTERNAL``, spelled out here because the sandbox's modules import nothing of core
(they also run as another user with only their own copies)."""

_RUNTIME_PREFIX = "rt-"
_STAGING_PREFIX = "new-"
_LEGACY_PREFIX = "aleph-layer-"
_STALE_S = 3600.0
"""A directory of an older layout, or a runtime directory a crash left half-made, is this old at least."""
_GITIGNORE = b"# Aleph's transaction layers (aleph-exec): never part of the project\n*\n"


def _same_dev(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def _check_in_workspace(workspace: Path, *, create: bool) -> str | None:
    """None when ``<workspace>/.aleph-tx`` can hold layers (made when ``create``); else why not."""
    here = workspace / LAYERS_DIR
    euid = os.geteuid()
    try:
        ws = os.stat(workspace)
        if ws.st_uid != euid:
            return f"the workspace belongs to uid {ws.st_uid} and Aleph runs as uid {euid}"
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            if not create:
                return None if os.access(workspace, os.W_OK) else "the workspace is not writable"
            os.mkdir(here, 0o700)
            st = os.lstat(here)
        if not stat.S_ISDIR(st.st_mode):
            return f"{here} exists and is not a directory"
        if st.st_uid != euid:
            return f"{here} belongs to uid {st.st_uid}, not to Aleph's uid {euid}"
        if st.st_dev != ws.st_dev:
            return f"{here} is another filesystem's mount point"
        if create:
            if stat.S_IMODE(st.st_mode) != 0o700:
                os.chmod(here, 0o700, follow_symlinks=False)
            with contextlib.suppress(FileExistsError):
                fd = os.open(
                    here / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                try:
                    os.write(fd, _GITIGNORE)
                finally:
                    os.close(fd)
        elif not os.access(here, os.W_OK):
            return f"{here} is not writable"
    except OSError as exc:
        return f"{here}: {exc.strerror or exc}"
    return None


def _ours(path: Path) -> bool:
    """A real directory (no symlink) of this process's user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def fallback_dir(workspace: Path, data_dir: Path) -> Path:
    """Where layers go when the workspace cannot hold them.

    Beside the data directory or, when that lies inside the workspace (the overlay's lower layer, of
    which only ``.aleph-tx`` is masked), in a directory of this user's in the temporary directory.
    """
    root = data_dir.resolve() / "exec"
    workspace = workspace.resolve()
    if root == workspace or root.is_relative_to(workspace):
        return Path(tempfile.gettempdir()) / f"aleph-layers-{os.geteuid()}"
    return root / "layers"


def layers_check(workspace: Path, data_dir: Path) -> tuple[str, str]:
    """``aleph doctor``'s ``exec.layers``: where transaction layers go here, and whether a commit renames."""
    root, note = placement(workspace, fallback_dir(workspace, data_dir))
    if note is None:
        return "ok", f"transaction layers under {root}: the workspace's filesystem, a commit renames"
    return "warn", note


def placement(workspace: Path, fallback: Path, *, create: bool = False) -> tuple[Path, str | None]:
    """Where layers go (the directory that holds the runtimes' directories) and, on the fallback, why.

    ``create``: make ``.aleph-tx`` (0700, with its ``.gitignore``) when it is missing; without it nothing
    is written (what ``aleph doctor`` asks).
    """
    workspace = workspace.resolve()
    reason = _check_in_workspace(workspace, create=create)
    if reason is None:
        return workspace / LAYERS_DIR, None
    note = f"transaction layers cannot live in the workspace ({reason}); they are made under {fallback}"
    probe = fallback
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not _same_dev(probe, workspace):
        note += ", another filesystem than the workspace's: a commit copies each file instead of renaming it"
    return fallback, note


class LayerRoot:
    """A runtime's directory of layers (locked while it lives) and the sweep of dead runtimes' ones."""

    def __init__(self, workspace: Path, fallback: Path) -> None:
        self.workspace = workspace.resolve()
        self.fallback = fallback
        self._lock = threading.Lock()
        self._fd = -1
        self._mine: Path | None = None
        self._root: Path | None = None
        self._closed = False
        self.note: str | None = None
        """Why layers are not in the workspace (None when they are, or before :meth:`place`)."""

    def place(self) -> Path:
        """The directory holding the runtimes' directories (``.aleph-tx`` made on first use)."""
        with self._lock:
            if self._root is None:
                self._root, self.note = placement(self.workspace, self.fallback, create=True)
            return self._root

    def mine(self) -> Path:
        """The directory of this runtime's layers, made and locked on first use."""
        with self._lock:
            if self._closed:
                raise OSError("the runtime's layers are closed")
            if self._mine is not None:
                return self._mine
        root = self.place()
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _ours(root):
            raise OSError(f"{root} is not a directory of uid {os.geteuid()}: no layer is made there")
        staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=root))
        fd = os.open(staging / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file: nobody else holds it
            mine = root / f"{_RUNTIME_PREFIX}{secrets.token_hex(8)}"
            os.rename(staging, mine)  # named rt- only once locked: a sweep never takes a live runtime's lock
        except BaseException:
            os.close(fd)
            remove_tree(staging, ignore_errors=True)
            raise
        with self._lock:
            if self._mine is None and not self._closed:
                self._mine, self._fd = mine, fd
                return mine
            kept = self._mine
        os.close(fd)  # another thread made one first, or the runtime closed meanwhile
        remove_tree(mine, ignore_errors=True)
        if kept is None:
            raise OSError("the runtime's layers are closed")
        return kept

    def sweep(self) -> list[str]:
        """Remove the layers of runtimes that are gone (their lock is free); the directories removed.

        Run at start, after interrupted commits were finished or rolled back (those need their layer).
        Looks in the workspace's ``.aleph-tx`` and in the fallback directory (either may hold some).
        """
        removed: list[str] = []
        roots = {self.fallback}
        if _check_in_workspace(self.workspace, create=False) is None and (self.workspace / LAYERS_DIR).is_dir():
            roots.add(self.workspace / LAYERS_DIR)
        cutoff = time.time() - _STALE_S
        for root in roots:
            if not _ours(root):
                continue  # never sweep a directory someone else made (a shared /tmp)
            try:
                entries = list(os.scandir(root))
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                if path == self._mine or not entry.is_dir(follow_symlinks=False):
                    continue
                with contextlib.suppress(OSError):
                    if entry.name.startswith(_RUNTIME_PREFIX):
                        if self._take(path):
                            removed.append(str(path))
                    elif entry.name.startswith((_STAGING_PREFIX, _LEGACY_PREFIX)) and entry.stat().st_mtime < cutoff:
                        remove_tree(path, ignore_errors=True)
                        removed.append(str(path))
        return removed

    @staticmethod
    def _take(path: Path) -> bool:
        """Remove a runtime's directory if its runtime is gone (its lock is free)."""
        try:
            fd = os.open(path / "lock", os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            fd = -1  # removed half-way by an earlier sweep: nobody holds it
        try:
            if fd >= 0:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return False  # a live runtime's
            remove_tree(path, ignore_errors=True)
            return True
        finally:
            if fd >= 0:
                os.close(fd)

    def close(self) -> None:
        """Remove this runtime's directory (and what layers are left in it) and release its lock."""
        with self._lock:
            mine, fd = self._mine, self._fd
            self._mine, self._fd, self._closed = None, -1, True
        if mine is not None:
            remove_tree(mine, ignore_errors=True)
        if fd >= 0:
            os.close(fd)
