"""The center, built on first use from ``[cluster]`` (so a runtime without a cluster still loads)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aleph
from aleph_cluster._center import Center, DaskBackend
from aleph_cluster._config import ClusterConfig
from aleph_cluster._store import NodeStore

__all__ = ["CenterHandle"]


class CenterHandle:
    """Builds the :class:`Center` once, at the first call that needs it; closed with the runtime."""

    def __init__(self, config: ClusterConfig, base_dir: Path, data_dir: Path, context: aleph.PluginContext) -> None:
        self.config = config
        self.base_dir = base_dir
        self.data_dir = data_dir
        self.context = context
        self._center: Center | None = None
        self._lock = asyncio.Lock()

    async def get(self, tool: str) -> Center:
        """The center; raises a clear ExecutionFailed when ``[cluster]`` does not name a scheduler."""
        if self._center is not None:
            return self._center
        if self.config.scheduler is None:
            raise aleph.ExecutionFailed(
                tool, "cluster not configured: set [cluster] scheduler (tls://host:port) and tls_dir in aleph.toml"
            )
        async with self._lock:
            if self._center is None:
                try:
                    files = self.config.tls(self.base_dir)
                except ValueError as exc:
                    raise aleph.ExecutionFailed(tool, str(exc)) from None
                missing = files.missing()
                if missing:
                    raise aleph.ExecutionFailed(tool, f"cluster TLS files missing: {', '.join(missing)}")
                ledger = self.context.ledger
                if ledger is None:
                    raise aleph.ExecutionFailed(tool, "the cluster signs requests with the ledger key: enable [ledger]")
                signer = ledger.keystore.signer(self.config.identity)
                store = NodeStore(self.data_dir / "cluster.db")
                self._center = Center(self.config, DaskBackend(self.config, files), store, signer)
        return self._center

    async def aclose(self) -> None:
        """Close the center if it was built."""
        if self._center is not None:
            await self._center.aclose()
            self._center = None
