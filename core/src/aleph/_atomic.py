"""Writing a file so that readers see the old content or the new, never a half-written one.

The content goes to a temporary file in the same directory (created with its final mode, so a secret is
never briefly world-readable), is flushed and fsynced, optionally checked, then renamed over the target;
the directory is fsynced so the rename survives a crash. Anything that fails leaves the target as it was
and no temporary file behind.

:func:`create_atomic` is the same for a file that several processes may create at once (a key, a
store's first file): the first one links its complete temporary file into place, the others find it
there and read it; nobody ever sees it empty or half-written. Temporary names carry the writer's pid
(``.<name>.<pid>.<random>.tmp``), so :func:`remove_stale_temporaries` can clear what a process killed
mid-write left, without touching a live writer's file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["create_atomic", "remove_stale_temporaries", "write_atomic"]


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
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:200]}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
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


def create_atomic(path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True when this call created it.

    The complete, fsynced content is hard-linked into place (``link`` fails if the name exists), so of
    several processes creating the file together exactly one wins and every reader sees the whole file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name[:200]}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp_name, target)
        except FileExistsError:
            return False
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    _fsync_dir(target.parent)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temporaries(directory: str | os.PathLike[str], *, suffix: str = ".tmp") -> list[str]:
    """Remove ``.<name>.<pid>.<random><suffix>`` files in ``directory`` whose writer process is gone.

    Returns the names removed. A temporary file of a live process (or of a pid that cannot be read
    from the name) is left alone.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(".") and name.endswith(suffix)):
            continue
        parts = name[: -len(suffix)].rsplit(".", 2)
        if len(parts) != 3 or not parts[1].isdigit() or _alive(int(parts[1])):
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(name)
        except OSError:
            continue
    return removed
