"""The client's workspace from MCP roots, for ``aleph serve`` on legacy-handshake sessions.

A client that declared the ``roots`` capability is asked ``roots/list`` once per connection, at its first
request; the first ``file://`` root that is a directory, and not ``/``, the home directory or above it,
becomes that connection's workspace: a runtime loaded for it (its ``aleph.toml`` read from there) serves
the connection. The 2026-07-28 revision deprecates roots (SEP-2577), so those clients get the launch
directory or ``--workspace``. At most ``MAX_WORKSPACES`` runtimes are kept; past that a connection keeps
the default workspace.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import anyio

from aleph._workspace import broad_workspace_reason

if TYPE_CHECKING:
    from aleph._runtime import Aleph

__all__ = ["MAX_WORKSPACES", "ROOTS_WAIT_S", "RootWorkspaces", "workspace_from_roots"]

log = logging.getLogger("aleph.serve")

MAX_WORKSPACES = 4
ROOTS_WAIT_S = 5.0
"""How long a client has to answer ``roots/list`` before the default workspace is kept."""


def workspace_from_roots(roots: list[Any]) -> tuple[Path | None, list[str]]:
    """(the first usable root directory or None, why each earlier root was passed over)."""
    skipped: list[str] = []
    for root in roots[:64]:
        uri = str(getattr(root, "uri", ""))
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            skipped.append(f"{uri[:200]}: not a local file:// root")
            continue
        path = Path(unquote(parts.path))
        try:
            path = path.resolve(strict=True)
        except OSError:
            skipped.append(f"{path}: does not exist")
            continue
        if not path.is_dir():
            skipped.append(f"{path}: not a directory")
            continue
        reason = broad_workspace_reason(path)
        if reason is not None:
            skipped.append(f"{path}: {reason}")
            continue
        return path, skipped
    return None, skipped


class RootWorkspaces:
    """Runtimes by workspace: the default one, and one per root a client named (entered on demand)."""

    def __init__(self, default: Aleph, load: Callable[[Path], Aleph]) -> None:
        self.default = default
        self._load = load
        self._runtimes: dict[Path, Aleph] = {default.config.workspace_root: default}
        self._stack = contextlib.AsyncExitStack()
        self._lock = anyio.Lock()
        self.subscribers: list[Callable[[Aleph], object]] = []
        """Called with each runtime entered for a root (the server subscribes to its registry)."""

    async def for_roots(self, roots: list[Any]) -> Aleph:
        """The runtime of the workspace ``roots`` name, or the default one."""
        path, skipped = workspace_from_roots(roots)
        for why in skipped:
            print(f"aleph serve: ignoring the client's root {why}", file=sys.stderr, flush=True)
        if path is None:
            return self.default
        async with self._lock:
            found = self._runtimes.get(path)
            if found is not None:
                return found
            if len(self._runtimes) >= MAX_WORKSPACES:
                log.warning("not opening a workspace for %s: %d already open", path, MAX_WORKSPACES)
                return self.default
            try:
                rt = await self._stack.enter_async_context(self._load(path))
            except Exception as exc:  # a bad aleph.toml in the client's project: say so, keep serving
                print(f"aleph serve: cannot use the client's root {path}: {exc}", file=sys.stderr, flush=True)
                return self.default
            self._runtimes[path] = rt
            print(f"aleph serve: workspace {path} (the client's root)", file=sys.stderr, flush=True)
            for subscriber in self.subscribers:
                subscriber(rt)
            return rt

    async def aclose(self) -> None:
        """Close every runtime entered for a root (the default one belongs to the caller)."""
        await self._stack.aclose()
