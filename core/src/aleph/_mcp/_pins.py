"""Pins: the hash of each MCP tool's full definition when it was first seen or trusted.

A later definition with a different hash (a "rug pull") is not adopted silently: the manager
re-gates the tool until ``aleph mcp trust`` re-pins it. The file is written atomically, mode 0600.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from pathlib import Path

from aleph._atomic import write_atomic

__all__ = ["PinStore"]

log = logging.getLogger("aleph.mcp")


class PinStore:
    """``{server_id: {tool_name: sha256}}`` persisted in ``<data_dir>/mcp/pins.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pins: dict[str, dict[str, str]] | None = None

    def _load(self) -> dict[str, dict[str, str]]:
        if self._pins is None:
            pins: dict[str, dict[str, str]] = {}
            try:
                raw = json.loads(self.path.read_text(encoding="utf-8"))
                servers = raw.get("servers", {}) if isinstance(raw, dict) else {}
                for sid, tools in servers.items():
                    if isinstance(tools, dict):
                        pins[str(sid)] = {str(k): str(v) for k, v in tools.items() if isinstance(v, str)}
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:
                # Keep the unreadable file for inspection instead of overwriting it with fresh pins.
                kept = self.path.with_name(f"{self.path.name}.unreadable-{int(time.time())}")
                with contextlib.suppress(OSError):
                    self.path.rename(kept)
                log.warning(
                    "MCP pin file %s is unreadable (%s); kept as %s, every tool is pinned afresh", self.path, exc, kept
                )
            self._pins = pins
        return self._pins

    def get(self, server_id: str, tool: str) -> str | None:
        """The pinned hash of ``tool`` on ``server_id``, or None if never seen."""
        with self._lock:
            return self._load().get(server_id, {}).get(tool)

    def knows(self, server_id: str) -> bool:
        """Whether ``server_id`` was listed before (it has been seen and trusted, with or without tools)."""
        with self._lock:
            return server_id in self._load()

    def set_many(self, server_id: str, hashes: dict[str, str]) -> None:
        """Pin every ``tool → hash`` in ``hashes`` and persist.

        A server seen for the first time is recorded even with no tools, so a tool it adds later is not
        trusted for being new (the manager re-gates it).
        """
        with self._lock:
            pins = self._load()
            if not hashes and server_id in pins:
                return
            pins.setdefault(server_id, {}).update(hashes)
            self._save(pins)

    def _save(self, pins: dict[str, dict[str, str]]) -> None:
        write_atomic(self.path, json.dumps({"version": 1, "servers": pins}, indent=2, sort_keys=True))
