"""Read-only workspace confinement: core's descriptor walker, and the open file every parser reads.

A path is walked and opened beneath one directory descriptor by :class:`aleph.ConfinedRoot` (see its
module for the symlink and ``..`` policy): a link inside the workspace works, one pointing out is refused
however it is reached, and nothing is resolved and then reopened by name. The opened descriptor is what
every parser and subprocess reads (``/dev/fd/N``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import aleph
from aleph import PathRefused as PathError

__all__ = ["OpenFile", "PathError", "Workspace"]


@dataclass(frozen=True, slots=True)
class OpenFile:
    """A regular file opened read-only inside the workspace: its descriptor, canonical path and size."""

    fd: int
    rel: str
    size: int


class Workspace(aleph.ConfinedRoot):
    """The confinement root this family reads beneath."""

    @contextmanager
    def open_file(self, path: str) -> Iterator[OpenFile]:
        """Open an existing regular file read-only (never a FIFO, device, socket or directory)."""
        with self.open_regular(path) as (fd, target):
            yield OpenFile(fd, target.rel, os.fstat(fd).st_size)
