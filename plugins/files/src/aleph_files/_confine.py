"""Workspace confinement for the files family: core's descriptor walker plus protected paths.

Every path is walked and opened beneath one directory descriptor by :class:`aleph.ConfinedRoot` (see
its module for the symlink and ``..`` policy). This family adds what writing needs: the protected
paths nothing may write (Aleph's own configuration, policy, ledger and keys, and the files a program on
the host runs code from), and the journal its writes note temporary files in.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from pathlib import Path

import aleph
from aleph import ConfinedTarget as Target
from aleph import PathRefused as PathError
from aleph_files._journal import TempJournal

__all__ = ["MAX_NAME_BYTES", "MAX_PATH_BYTES", "PathError", "Target", "Workspace"]


MAX_PATH_BYTES = aleph.ConfinedRoot.MAX_PATH_BYTES
"""Longest path accepted (Linux ``PATH_MAX``)."""
MAX_NAME_BYTES = aleph.ConfinedRoot.MAX_NAME_BYTES
"""Longest single component accepted (Linux ``NAME_MAX``)."""


class Workspace(aleph.ConfinedRoot):
    """The confinement root with the paths nothing may write. Thread-safe, like its base."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        protected: Iterable[str | os.PathLike[str]] = (),
        patterns: Iterable[str] = aleph.ProtectedPaths.HOST_EXECUTED,
    ) -> None:
        super().__init__(root)
        rules: set[tuple[str, ...]] = set()
        for path in protected:
            parts = Path(path).resolve().parts
            if parts[: len(self._root_parts)] == self._root_parts and len(parts) > len(self._root_parts):
                rules.add(tuple(parts[len(self._root_parts) :]))
        self.protected: tuple[tuple[str, ...], ...] = tuple(sorted(rules))
        # Files a program on the host runs code from (git's config and pointers, .envrc, ...): aleph.ProtectedPaths.
        self.patterns = aleph.ProtectedPaths([*aleph.ProtectedPaths.HOST_EXECUTED, *patterns])
        self.journal: TempJournal | None = None
        """Where writes note their temporary files (set by the plugin); None writes without notes."""

    def resolve(self, path: str, *, follow_last: bool = True, create_dirs: bool = False) -> Target:
        """As :meth:`aleph.ConfinedRoot.resolve`; directories it would make are judged before any is made.

        A write that is then refused must leave nothing behind: an empty ``refs/`` or ``objects/`` made
        on the way is what completes a bare repository (:meth:`_in_bare_repository`).
        """
        if create_dirs:
            try:
                return super().resolve(path, follow_last=follow_last)
            except PathError as exc:
                if exc.kind != "missing":
                    raise
            rel = self._planned_rel(path)
            if rel is not None and self.is_protected(rel):
                raise PathError(
                    "denied", f"{path!r} is a protected path (a repository's config or hooks, or Aleph's own files)"
                )
        return super().resolve(path, follow_last=follow_last, create_dirs=create_dirs)

    def _planned_rel(self, path: str) -> str | None:
        """The workspace-relative path ``path`` will have once its missing directories exist."""
        parts = self.split(path)
        for cut in range(len(parts) - 1, 0, -1):
            try:
                target = super().resolve("/".join(parts[:cut]))
            except PathError:
                continue
            with target:
                if target.lstat() is None:
                    return posixpath.normpath("/".join([target.rel, *parts[cut:]])).lstrip("/")
                return None  # it exists: the missing directory is further down, judged on that walk
        return None

    # -- checks ------------------------------------------------------------------------------

    def is_protected(self, rel: str) -> bool:
        """Whether writing ``rel`` would touch a protected path (it is one, or lies inside or above one)."""
        parts = tuple(p for p in rel.split("/") if p not in ("", "."))
        for rule in self.protected:
            n = min(len(rule), len(parts))
            if parts[:n] == rule[:n]:
                return True
        rel_path = "/".join(parts)
        if not rel_path:
            return False
        # What is above a protected pattern holds it (deleting or moving `.git` moves its config);
        # a file at a pattern's leading component (a `.git` gitdir pointer) redirects it.
        # And what the repository's git config points git at (an include, a hooks directory, a script), as of now.
        if self.patterns.with_git_names(self.root).hit(rel_path, non_dir=True) is not None:
            return True
        return self._in_bare_repository(parts)

    def _in_bare_repository(self, parts: tuple[str, ...]) -> bool:
        """A repository without a ``.git`` (``HEAD``, ``objects/``, ``refs/``): its config, hooks and pointers.

        git takes such a directory for a git directory and runs its ``config`` (aliases, ``core.pager``)
        and ``hooks`` when run in it, so they are refused as ``.git/config`` is, and so is completing one
        (its ``HEAD``, ``objects`` or ``refs``) around a ``config`` or ``hooks`` already there.
        """
        for i, name in enumerate(parts):
            if name == ".git":
                return False  # the patterns judge what is inside a .git directory
            code = name in aleph.ProtectedPaths.GIT_DIR_CODE
            if not code and name not in aleph.ProtectedPaths.GIT_DIR_SHAPE:
                continue
            directory = self.root.joinpath(*parts[:i])
            shape = [(directory / n).exists() or n == name for n in aleph.ProtectedPaths.GIT_DIR_SHAPE]
            if not all(shape):
                continue
            if code or any(os.path.lexists(directory / n) for n in ("config", "hooks")):
                return True
        return False

    def check_writable(self, target: Target, original: str) -> None:
        """Refuse writes to the workspace root and to protected paths."""
        if target.name == ".":
            raise PathError("denied", "the workspace root itself cannot be written, moved or deleted")
        if self.is_protected(target.rel):
            raise PathError(
                "denied",
                f"{original!r} is a protected path (Aleph's own configuration, policy, ledger or keys, "
                "or .git/hooks and .git/config); it can only be changed through the gated config tool",
            )
