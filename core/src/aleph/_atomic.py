"""Writing a file so that readers see the old content or the new, never a half-written one.

The content goes to a temporary file in the same directory (created with its final mode, so a secret is
never briefly world-readable), is flushed and fsynced, optionally checked, then renamed over the target;
the directory is fsynced so the rename survives a crash. Anything that fails leaves the target as it was
and no temporary file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    mode: int | None = 0o600,
    check: Callable[[Path], None] | None = None,
    durable: bool = True,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    :param mode: the file's permission bits; None keeps those of an existing file (0600 for a new one).
    :param check: called with the written temporary file before it replaces ``path``; what it raises
        aborts the write (``aleph mcp add`` validates a configuration this way).
    :param durable: fsync the file and its directory (off for caches where a lost write is harmless).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if mode is None:
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o600
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename is still atomic
    finally:
        os.close(fd)
