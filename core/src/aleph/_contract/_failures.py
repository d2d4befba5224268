"""Naming what went wrong when a tool fails for a reason outside its code: a full disk, a locked database.

An exception a tool did not turn into a :class:`~aleph.ToolError` is either a bug in the tool (reported
as a panic, with its type) or a condition of the machine a user can cause and fix: a full data
directory, missing permissions, a database another process holds. Those are described by their cause,
with what to do, and never called a panic: ``remember`` on a full disk says "the data directory is
full", not "tool panicked: OperationalError".
"""

from __future__ import annotations

import errno
import sys

__all__ = ["describe_environment_error"]

# SQLite's messages (sqlite3.OperationalError / DatabaseError text) -> what they mean for a user.
_SQLITE = (
    ("database or disk is full", "the data directory is full (SQLite: database or disk is full); free some space"),
    ("disk i/o error", "a disk I/O error in its database (SQLite: disk I/O error); check the data directory's disk"),
    ("database is locked", "its database is busy: another process holds a lock on it; try again shortly"),
    ("database table is locked", "its database is busy: another process holds a lock on it; try again shortly"),
    (
        "attempt to write a readonly database",
        "its database is read-only; check the permissions of the data directory and its files",
    ),
    (
        "unable to open database file",
        "its database file cannot be opened; check that the data directory exists and is writable",
    ),
    ("database disk image is malformed", "its database file is damaged (SQLite: database disk image is malformed)"),
    ("file is not a database", "its database file is damaged or not a database (SQLite: file is not a database)"),
)

_ERRNO = {
    errno.ENOSPC: "the disk is full (no space left on device)",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the filesystem is read-only",
    errno.EMFILE: "too many open files in this process",
    errno.ENFILE: "too many open files on this machine",
    errno.EIO: "an I/O error (the disk may be failing)",
}


def describe_environment_error(exc: BaseException) -> str | None:
    """What ``exc`` means for a person when a machine condition caused it; None when it looks like a bug."""
    sqlite3 = sys.modules.get("sqlite3")  # loaded whenever the exception came from it
    if sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError):
        text = str(exc).lower()
        for needle, meaning in _SQLITE:
            if needle in text:
                return meaning
        return None
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, OSError) and exc.errno in _ERRNO:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{_ERRNO[exc.errno]}{where}"
    return None
