"""The managed configuration file, and the question every change of it asks: does it only tighten.

``<data_dir>/managed/config.toml`` (see :attr:`aleph.AlephConfig.managed_file`) is the operator's own
file that Aleph's tools write; core reads it over the user and project files. Writes are atomic (a
temporary file, fsync, rename, 0600) and validated by reloading the configuration: a change core
rejects is undone before the call returns, so nothing is left half-written.

:func:`loosening` compares values by effect: actions rank ``allow < ask < deny``, tiers
``plan < ask < auto < full`` (looser upward), allow-lists and delegation lists by inclusion, roles
``guest < member < operator``. A change that cannot be shown to tighten is treated as loosening.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import tomlkit

__all__ = ["ManagedFile", "get_path", "leaves", "loosening", "set_path"]

_ACTION = {"allow": 0, "ask": 1, "deny": 2}
_TIER = {"plan": 0, "ask": 1, "auto": 2, "full": 3}
_ROLE = {"guest": 0, "member": 1, "operator": 2}
_MISSING = object()
_THREADS = threading.Lock()


class ManagedFile:
    """Reads and atomically writes the managed TOML."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's write lock (threads and processes): read-modify-write never interleaves."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _THREADS, open(self.path.parent / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def text(self) -> str:
        """The file's text ("" when it does not exist)."""
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def restore(self, text: str | None) -> None:
        """Put back what :meth:`snapshot` returned (None: the file did not exist)."""
        if text is None:
            self.path.unlink(missing_ok=True)
        else:
            self.write(text)

    def snapshot(self) -> str | None:
        """The file's text, or None when it does not exist."""
        return self.text() if self.path.exists() else None

    def document(self) -> tomlkit.TOMLDocument:
        """The parsed file (comments and order kept)."""
        return tomlkit.parse(self.text())

    def write(self, text: str) -> None:
        """Replace the file with ``text`` atomically (0600 in a 0700 directory)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def get_path(table: Mapping[str, Any], dotted: str) -> Any:
    """The value at ``dotted`` in nested tables, or None."""
    node: Any = table
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def set_path(doc: tomlkit.TOMLDocument, dotted: str, value: Any) -> None:
    """Set (or with None remove) ``dotted`` in ``doc``, creating tables on the way."""
    parts = dotted.split(".")
    node: Any = doc
    for part in parts[:-1]:
        if part not in node:
            if value is None:
                return
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, Mapping):
            raise ValueError(f"config_path: {dotted!r} goes through {part!r}, which is not a table")
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def leaves(prefix: str, value: Any) -> dict[str, Any]:
    """Dotted key → leaf value (lists are leaves)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(leaves(f"{prefix}.{key}" if prefix else str(key), inner))
        return out
    return {prefix: value}


def loosening(config: Mapping[str, Any], dotted: str, value: Any) -> list[str]:
    """What setting ``dotted`` to ``value`` would loosen, one line each (empty: it only tightens)."""
    old_leaves = leaves(dotted, get_path(config, dotted)) if isinstance(get_path(config, dotted), Mapping) else {}
    new_leaves = leaves(dotted, value) if isinstance(value, Mapping) else {dotted: value}
    if not isinstance(value, Mapping):
        old_leaves = {dotted: get_path(config, dotted)}
    out = []
    if dotted == "policies" or dotted.startswith("policies."):
        out.append(f"{dotted}: a policies.* setting always needs a human's approval")
    for key in sorted(set(old_leaves) | set(new_leaves)):
        old = old_leaves.get(key, _MISSING)
        new = new_leaves.get(key, _MISSING)
        if old == new:
            continue
        if not _tightens(key, None if old is _MISSING else old, new):
            out.append(f"{key}: {_show(old)} -> {_show(new)}")
    return out


def _show(value: Any) -> str:
    return "(unset)" if value is _MISSING or value is None else repr(value)


def _tightens(key: str, old: Any, new: Any) -> bool:
    last = key.rsplit(".", 1)[-1]
    if new is _MISSING or new is None:
        return False  # removing a setting gives back what was below it: not shown to tighten
    if ".tool_permissions.overrides." in key:
        if new not in _ACTION:
            return False
        return new == "deny" or (old in _ACTION and _ACTION[new] >= _ACTION[old])
    if key.endswith(".tool_permissions.default"):
        return new in _ACTION and _ACTION[new] >= _ACTION.get(old if old is not None else "allow", 0)
    if last == "exec_tier":
        return new in _TIER and _TIER[new] <= _TIER.get(old if old is not None else "full", 3)
    if key.startswith("agents.") and last == "allowed_tools":
        return isinstance(new, list) and (old is None or (isinstance(old, list) and set(new) <= set(old)))
    if key.startswith("agents.") and last == "accepts_delegation_from":
        return isinstance(new, list) and "*" not in new and set(new) <= set(old or [])
    if key.startswith("agents.") and last == "bounded_by":
        return isinstance(new, list) and set(new) >= set(old or [])
    if key.startswith("channels.") and last == "role":
        return new in _ROLE and _ROLE[new] <= _ROLE.get(old if old is not None else "operator", 2)
    if key == "sandbox.command_policy.enforcement":
        return False
    return False
