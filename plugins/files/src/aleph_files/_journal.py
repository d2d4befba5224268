"""A note of every temporary file a write has open, so a restart removes what a killed writer left.

:func:`aleph_files._io.atomic_write` writes ``.<name>.<random>.aleph-tmp`` next to its target and
renames it into place. Killed between the two (``kill -9``, a crash), the temporary file would stay in
the user's workspace. Before creating it, the writer notes it here (``<data_dir>/files/inflight/
<pid>.<random>``: the parent's workspace-relative path and the temporary name); after the rename it
drops the note. At start, notes of processes that are gone name exactly the files to remove; nothing
walks the workspace. The notes are not fsynced: a killed process's page cache survives it, and after a
power cut the temporary file itself may be gone too.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

__all__ = ["TEMP_SUFFIX", "TempJournal"]

TEMP_SUFFIX = ".aleph-tmp"
log = logging.getLogger("aleph.files")


class _Directories(Protocol):
    def open_dir(self, path: str) -> AbstractContextManager[tuple[int, str]]: ...


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class TempJournal:
    """The notes of one data directory, shared by every process that writes files through it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def note(self, parent_rel: str, tmp_name: str) -> str | None:
        """Note a temporary file about to be created; returns the note's name for :meth:`drop`.

        None when the note cannot be written (the data directory is full or read-only): the write goes
        on without it, since the note only helps clean up after a crash.
        """
        name = f"{os.getpid()}.{secrets.token_hex(8)}"
        try:
            fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, json.dumps([parent_rel, tmp_name]).encode())
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("files: cannot note a temporary file in %s (%s); writing without the note", self.directory, exc)
            self.drop(name)
            return None
        return name

    def drop(self, name: str) -> None:
        """The temporary file is renamed into place or removed: forget it."""
        try:
            os.unlink(self.directory / name)
        except FileNotFoundError:
            pass

    def recover(self, ws: _Directories) -> list[str]:
        """Remove the temporary files that processes now gone left; returns their workspace paths."""
        removed = []
        for entry in os.scandir(self.directory):
            pid, _, _ = entry.name.partition(".")
            if not pid.isdigit() or _alive(int(pid)):
                continue
            try:
                with open(entry.path, "rb") as fh:
                    parent_rel, tmp_name = json.loads(fh.read())
                if not (isinstance(tmp_name, str) and tmp_name.startswith(".") and tmp_name.endswith(TEMP_SUFFIX)):
                    raise ValueError(f"not a temporary file name: {tmp_name!r}")
                if "/" in tmp_name or not isinstance(parent_rel, str):
                    raise ValueError("malformed note")
                with ws.open_dir(parent_rel) as (fd, _):
                    os.unlink(tmp_name, dir_fd=fd)
                removed.append(f"{parent_rel}/{tmp_name}")
            except FileNotFoundError:
                pass  # renamed into place: nothing left to clean
            except Exception as exc:  # OSError, a malformed note, or the workspace refusing the path
                if getattr(exc, "kind", None) != "missing":  # its directory is gone: nothing left either
                    log.warning("files: cannot clear the temporary file noted in %s: %s", entry.path, exc)
            self.drop(entry.name)
        if removed:
            log.warning("files: removed %d temporary file(s) left by an interrupted write: %s", len(removed), removed)
        return removed
