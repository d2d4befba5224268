"""Per-runtime state of the hub family: configuration, the SQLite store, paths, and the running call."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx

import aleph
from aleph_hub._config import HubConfig
from aleph_hub._skills import SkillRoot, skill_roots
from aleph_hub._store import HubStore

__all__ = ["HubState", "consent", "owner", "running_call"]


class HubState:
    """What every hub tool shares; the store opens on first use (``<data_dir>/hub.sqlite``)."""

    def __init__(self, config: HubConfig, context: aleph.PluginContext) -> None:
        self.config = config
        self.context = context
        self._store: HubStore | None = None
        self._lock = threading.Lock()
        self._http: httpx.AsyncClient | None = None

    def http(self) -> httpx.AsyncClient:
        """One HTTP client for the index, made on first use (building its TLS context costs ~0.2 s)."""
        with self._lock:  # also called from a worker thread, to overlap with pip
            if self._http is None:
                self._http = httpx.AsyncClient(timeout=self.config.timeout_seconds, follow_redirects=True)
            return self._http

    async def aclose(self) -> None:
        """Close the HTTP client and the store."""
        client, self._http = self._http, None
        if client is not None:
            await client.aclose()
        self.close()

    @property
    def store(self) -> HubStore:
        """The hub's SQLite store."""
        with self._lock:
            if self._store is None:
                self._store = HubStore(self.context.data_dir / "hub.sqlite")
            return self._store

    def close(self) -> None:
        """Close the store."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    @property
    def workspace(self) -> Path:
        """The workspace root."""
        return self.context.workspace

    def roots(self) -> list[SkillRoot]:
        """Skill folders in precedence order."""
        return skill_roots(self.workspace, self.config.skills_dirs, self.config.user_skills_dirs)

    def user_skills_dir(self) -> Path:
        """Where user-scope skills are installed and created."""
        return Path(self.config.user_skills_dirs[0] if self.config.user_skills_dirs else "~/.aleph/skills").expanduser()

    def project_skills_dir(self) -> Path:
        """Where project-scope skills are installed: ``<workspace>/.aleph/skills``."""
        return self.workspace / ".aleph" / "skills"

    def plugin_folder(self) -> Path:
        """The plugin folder installs go to with ``install_target = "folder"``."""
        if self.config.plugin_folder:
            return (self.workspace / self.config.plugin_folder).expanduser().resolve()
        return self.context.data_dir / "plugins" / "site"

    def locks_dir(self) -> Path:
        """Where lockfiles are written (``<data_dir>/hub/locks``)."""
        return self.context.data_dir / "hub" / "locks"

    async def known_tools(self) -> set[str]:
        """Names of the tools this caller can see (for "the tools a skill names"); empty outside a call."""
        try:
            service = self.context.tool_service()
            return {d.name for d in await service.list()}
        except RuntimeError:
            return set()


def owner() -> str:
    """Whose choices a skill state is: the calling principal's owner key (``main`` outside a call).

    The one place the hub asks who is calling; no tool argument names it.
    """
    principal = aleph.current_principal()
    if principal is None or principal.owner == "default":
        return "main"
    return principal.owner


def running_call(tool: str) -> aleph.CallContext:
    """The running call, or a clear error when the tool was invoked outside the chokepoint."""
    ctx = aleph.current_call()
    if ctx is None:
        raise aleph.ExecutionFailed(tool, "this tool must run through a tool service (the chokepoint), not directly")
    return ctx


async def consent(tool: str, kind: str, subject: str, digest: str, shown: dict[str, Any]) -> None:
    """Ask a human, through the chokepoint, to approve what an install adds (``hub_consent``).

    Raises the chokepoint's error when nobody approves: :class:`aleph.ApprovalDenied`,
    :class:`aleph.ApprovalUnavailable`, :class:`aleph.ApprovalExpired` or, for a deferred ask,
    :class:`aleph.ApprovalRequired`.
    """
    disclosure = json.dumps(shown, indent=1, sort_keys=True, ensure_ascii=False, default=str)
    await running_call(tool).subcall(
        "hub_consent", {"kind": kind, "subject": subject, "digest": digest, "disclosure": disclosure}
    )
