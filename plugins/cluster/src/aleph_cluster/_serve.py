"""Starting the parts of a cluster: the TLS scheduler, and a node (a Dask worker with the Aleph node plugin).

``aleph cluster scheduler`` and ``aleph cluster node`` run these in the foreground until SIGTERM/SIGINT.
Both refuse to start without TLS files; a node also refuses when its certificate's CN is not its name or
its role is not ``aleph-node``, so a node cannot pass for another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

import aleph
from aleph_cluster._config import NodeConfig, TlsFiles, security_for
from aleph_cluster._pki import ROLE_NODE, ROLE_SCHEDULER, read_identity

__all__ = ["AlephNodePlugin", "load_node_config", "run_node", "run_scheduler"]

log = logging.getLogger("aleph.cluster")


def load_node_config(config_path: Path) -> tuple[NodeConfig, TlsFiles]:
    """``[cluster_node]`` of ``config_path`` and its TLS files, checked (a message naming the problem)."""
    config = aleph.load_config(config_path)
    node = config.section("cluster_node", NodeConfig)
    try:
        files = node.tls(Path(config_path).resolve().parent)
    except ValueError as exc:
        raise aleph.ConfigError(str(exc), file=str(config_path), key="cluster_node") from None
    missing = files.missing()
    if missing:
        raise aleph.ConfigError(f"TLS files missing: {', '.join(missing)}", file=str(config_path), key="cluster_node")
    cn, role = read_identity(files.cert_file)
    if cn != node.name or role != ROLE_NODE:
        raise aleph.ConfigError(
            f"certificate {files.cert_file} is for {cn!r} with role {role!r}; this node is {node.name!r} "
            f"and needs role {ROLE_NODE!r} (aleph cluster issue DIR {node.name})",
            file=str(config_path),
            key="cluster_node.name",
        )
    return node, files


class AlephNodePlugin(WorkerPlugin):
    """Runs an Aleph node service inside a Dask worker and answers ``aleph_node`` on its TLS listener."""

    name = "aleph-node"
    idempotent = True

    def __init__(self, config_path: str, workspace: str | None = None) -> None:
        self.config_path = config_path
        self.workspace = workspace
        self.service: Any = None

    async def setup(self, worker: Any) -> None:
        """Load the node's own runtime (its policy, exec family, ledger) and add the handler."""
        from aleph_cluster._node import NODE_OP, NodeService

        node, _ = load_node_config(Path(self.config_path))
        if worker.name != node.name:
            raise aleph.ConfigError(f"worker name {worker.name!r} is not the node name {node.name!r}")
        ws = Path(self.workspace) if self.workspace else None
        self.service = await asyncio.to_thread(NodeService, node, Path(self.config_path), workspace=ws)
        worker.handlers[NODE_OP] = self.service.handle

    async def teardown(self, worker: Any) -> None:
        """Stop running calls (their processes are killed) and close the runtime."""
        if self.service is not None:
            await self.service.aclose()


def no_plain_http(files: TlsFiles) -> Any:
    """Dask config for the HTTP listener every scheduler and worker opens: no routes, and TLS, never plaintext."""
    import dask

    return dask.config.set(
        {
            "distributed.scheduler.http.routes": [],
            "distributed.worker.http.routes": [],
            "distributed.scheduler.dashboard.tls.cert": str(files.cert_file),
            "distributed.scheduler.dashboard.tls.key": str(files.key_file),
            "distributed.scheduler.dashboard.tls.ca-file": str(files.ca_file),
        }
    )


async def _until_signalled(stop: asyncio.Event, closed: Any) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.ensure_future(stop.wait())
    finished = asyncio.ensure_future(closed())
    await asyncio.wait({waiter, finished}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()


async def run_node(config_path: Path, *, workspace: Path | None = None, ready: Any = None) -> None:
    """Run this machine's node until signalled: a Dask worker on TLS with :class:`AlephNodePlugin`."""
    from distributed import Worker

    node, files = load_node_config(config_path)
    plugin = AlephNodePlugin(str(Path(config_path).resolve()), str(workspace) if workspace else None)
    kwargs: dict[str, Any] = {"name": node.name, "nthreads": node.nthreads, "security": security_for(files, "worker")}
    if node.host:
        kwargs["host"] = node.host
    if node.port:
        kwargs["port"] = node.port
    with no_plain_http(files):
        worker = Worker(node.scheduler, plugins=(plugin,), dashboard=False, **kwargs)
        await worker
    if plugin.service is None:  # a failed setup is only logged by Dask: a node without its service must not run
        await worker.close()
        raise aleph.ConfigError("the Aleph node service did not start; see the log above", file=str(config_path))
    print(f"aleph cluster node {node.name} at {worker.address}", flush=True)
    if ready is not None:
        ready(worker.address)
    stop = asyncio.Event()
    await _until_signalled(stop, worker.finished)
    with contextlib.suppress(Exception):
        await worker.close()


async def run_scheduler(tls_dir: Path, *, host: str, port: int) -> None:
    """Run a TLS-only Dask scheduler with the certificate ``aleph cluster init`` made."""
    from distributed import Scheduler

    files = TlsFiles(
        ca_file=tls_dir / "ca.crt",
        cert_file=tls_dir / "scheduler" / "scheduler.crt",
        key_file=tls_dir / "scheduler" / "scheduler.key",
    )
    missing = files.missing()
    if missing:
        raise aleph.ConfigError(f"TLS files missing: {', '.join(missing)} (run `aleph cluster init {tls_dir}`)")
    _, role = read_identity(files.cert_file)
    if role != ROLE_SCHEDULER:
        raise aleph.ConfigError(f"{files.cert_file} has role {role!r}, not {ROLE_SCHEDULER!r}")
    with no_plain_http(files):
        scheduler = Scheduler(
            host=host, port=port, protocol="tls", security=security_for(files, "scheduler"), dashboard=False
        )
        await scheduler
    print(f"aleph cluster scheduler at {scheduler.address}", flush=True)
    stop = asyncio.Event()
    await _until_signalled(stop, scheduler.finished)
    with contextlib.suppress(Exception):
        await scheduler.close()
