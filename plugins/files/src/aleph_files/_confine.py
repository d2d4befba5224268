"""Workspace confinement for the files family: core's descriptor walker plus protected paths.

Every path is walked and opened beneath one directory descriptor by :class:`aleph.ConfinedRoot` (see
its module for the symlink and ``..`` policy). This family adds what writing needs: the protected
paths nothing may write (Aleph's own configuration, policy, ledger and keys, and the files a program on
the host runs code from), and the journal its writes note temporary files in.
"""

from __future__ import annotations

import os
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
        return self.patterns.with_git_names(self.root).hit(rel_path, non_dir=True) is not None

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
