"""The center's side of the cluster: who the nodes are, and one signed request to one node.

:class:`Backend` is what the tools need from an engine; :class:`DaskBackend` implements it over Dask
distributed's TLS comms: membership and retirement through the scheduler, requests straight to the
worker's listener (one round trip, pooled TLS connections). A reply is accepted only when it is signed by
the key pinned for that node at join time; a node that dies or falls silent mid-call is an error naming
it, raised within the call's timeout, and nothing it did not confirm is reported as done.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

import aleph
from aleph_cluster._config import ClusterConfig, TlsFiles, security_for
from aleph_cluster._pki import peer_identity
from aleph_cluster._store import NodeRecord, NodeStore
from aleph_cluster._wire import REQUEST_DOMAIN, Request, digest, reply_message, verify

__all__ = ["Backend", "Center", "DaskBackend", "NodeError", "RemoteReply", "WorkerInfo"]

NODE_OP = "aleph_node"
WORKERS_TTL = 1.0
"""Seconds the scheduler's membership is reused between calls (node_list always asks afresh)."""


class NodeError(Exception):
    """A node could not be reached or answered wrongly; ``node`` names it."""

    def __init__(self, node: str, message: str, *, kind: str = "transport") -> None:
        self.node = node
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker as the scheduler sees it."""

    name: str
    address: str
    host: str
    cpus: int
    memory_bytes: int
    cpu_percent: float
    memory_used: int
    last_seen: float
    status: str


@dataclass(frozen=True, slots=True)
class RemoteReply:
    """A verified reply: the result (or the node's error), its digest and the node's signature."""

    node: str
    request_id: str
    argv_digest: str
    result: Any
    error: dict[str, str] | None
    result_digest: str
    node_sig: str
    node_key: bytes
    data: bytes | None = None
    principal: str = ""
    """Who the request ran for, as both ledgers record it (:meth:`Request.recorded_principal`)."""


class Backend(Protocol):
    """What the cluster tools need from a distributed engine (Dask today; Ray could sit behind it)."""

    async def workers(self) -> dict[str, WorkerInfo]: ...

    async def send(
        self, address: str, request: bytes, signature: bytes, data: bytes | None, timeout: float
    ) -> dict: ...

    async def retire(self, address: str) -> None: ...

    async def peer_identity(self, address: str) -> tuple[str, str]: ...

    async def aclose(self) -> None: ...


class DaskBackend:
    """Dask distributed over mutual TLS: the scheduler for membership, worker comms for requests."""

    def __init__(self, config: ClusterConfig, files: TlsFiles) -> None:
        from distributed.core import ConnectionPool

        assert config.scheduler is not None
        self.scheduler = config.scheduler
        security: Any = security_for(files, "client")
        self.pool = ConnectionPool(
            limit=512, connection_args=security.get_connection_args("client"), timeout=config.connect_timeout_seconds
        )
        self._started = False

    async def _pool(self) -> Any:
        if not self._started:
            await self.pool.start()
            self._started = True
        return self.pool

    async def workers(self) -> dict[str, WorkerInfo]:
        """Every worker the scheduler knows, by name."""
        pool = await self._pool()
        ident = await pool(self.scheduler).identity()
        out = {}
        for address, w in ident.get("workers", {}).items():
            metrics = w.get("metrics") or {}
            name = str(w.get("name", address))
            out[name] = WorkerInfo(
                name=name,
                address=address,
                host=str(w.get("host", "")),
                cpus=int(w.get("nthreads", 0)),
                memory_bytes=int(w.get("memory_limit") or 0),
                cpu_percent=float(metrics.get("cpu") or 0.0),
                memory_used=int(metrics.get("memory") or 0),
                last_seen=float(w.get("last_seen") or 0.0),
                status=str(w.get("status", "")),
            )
        return out

    async def send(self, address: str, request: bytes, signature: bytes, data: bytes | None, timeout: float) -> dict:
        """One signed request to the worker at ``address``; raises ``OSError``/``TimeoutError`` on failure."""
        from distributed.protocol import to_serialize

        pool = await self._pool()
        kwargs: dict[str, Any] = {"request": request, "signature": signature}
        if data is not None:
            # a frame of its own, not a msgpack field: about twice the throughput for chunk-sized bytes
            kwargs["data"] = to_serialize(data)
        return await asyncio.wait_for(getattr(pool(address), NODE_OP)(**kwargs), timeout)

    async def retire(self, address: str) -> None:
        """Ask the scheduler to retire and close the worker."""
        pool = await self._pool()
        await pool(self.scheduler).retire_workers(workers=[address], close_workers=True)

    async def peer_identity(self, address: str) -> tuple[str, str]:
        """``(CN, role)`` of the certificate the worker at ``address`` presents in the TLS handshake."""
        from distributed.comm import connect

        comm = await connect(address, timeout=self.pool.timeout, **self.pool.connection_args)
        try:
            return peer_identity(comm.extra_info.get("peercert"))
        finally:
            await comm.close()

    async def aclose(self) -> None:
        """Close pooled connections."""
        if self._started:
            await self.pool.close()


class Center:
    """The center: the backend, the node store and the signing key; shared by the five tools."""

    def __init__(self, config: ClusterConfig, backend: Backend, store: NodeStore, signer: Any) -> None:
        self.config = config
        self.backend = backend
        self.store = store
        self.signer = signer
        self._background: set[asyncio.Future[None]] = set()
        self._workers: tuple[float, dict[str, WorkerInfo]] | None = None

    async def workers(self, *, fresh: bool = False) -> dict[str, WorkerInfo]:
        """The scheduler's workers, reused for up to a second (a call to a node that left fails and refreshes)."""
        now = time.monotonic()
        if not fresh and self._workers is not None and now - self._workers[0] < WORKERS_TTL:
            return self._workers[1]
        workers = await asyncio.wait_for(self.backend.workers(), self.config.connect_timeout_seconds)
        self._workers = (now, workers)
        return workers

    def forget_workers(self) -> None:
        """Drop the cached membership (after a node failed or joined or left)."""
        self._workers = None

    async def aclose(self) -> None:
        """Close the backend and the store."""
        for task in list(self._background):
            task.cancel()
        await self.backend.aclose()
        self.store.close()

    async def resolve(self, name: str, *, for_work: bool = True) -> tuple[WorkerInfo, NodeRecord]:
        """The live worker and the joined record of node ``name``; refuses unknown, pending or draining nodes."""
        try:
            workers = await self.workers()
            if name not in workers:  # it may have connected since the membership was read
                workers = await self.workers(fresh=True)
        except (OSError, TimeoutError) as exc:
            raise NodeError(name, f"the scheduler {self.config.scheduler} is not reachable: {exc}") from None
        record = self.store.get(name)
        worker = workers.get(name)
        if worker is None or record is None:
            known = sorted(n for n in workers if self.store.get(n) is not None)
            if worker is not None:
                raise NodeError(name, f"node {name} is connected but not joined; an operator runs node_manage join")
            raise NodeError(name, f"no node named {name!r} is connected; joined and connected: {known}", kind="missing")
        if for_work and record.draining:
            raise NodeError(name, f"node {name} is draining and takes no new calls")
        return worker, record

    async def request(
        self,
        worker: WorkerInfo,
        pinned_key: bytes | None,
        kind: str,
        body: dict[str, Any],
        *,
        timeout: float,
        data: bytes | None = None,
        request_id: str | None = None,
        principal: str | None = None,
    ) -> RemoteReply:
        """Sign ``body`` as a ``kind`` request for the calling principal, send it, verify the reply.

        ``pinned_key`` None (join only) accepts whichever key the node signs with; the caller pins it.
        """
        call = aleph.current_call()
        bound = call.principal if call is not None else None
        acting_for: tuple[str, ...] = ()
        role = "member"
        if principal is None:  # the principal the host bound to this call, never a tool argument
            principal = (call.agent if call is not None else None) or "default"
            if bound is not None and bound.agent == principal:
                # Everyone the call is made for goes along: the node judges by each one's policy too.
                acting_for, role = tuple(p.agent for p in bound.chain), bound.role
        channel = (call.channel if call is not None else None) or ""
        req, text = Request.make(
            node=worker.name,
            kind=kind,
            principal=principal,
            channel=channel,
            body=body,
            ttl_seconds=timeout + 30,
            request_id=request_id,
            acting_for=acting_for,
            role=role,
        )
        signature = self.signer.sign(REQUEST_DOMAIN + text)
        started = time.monotonic()
        try:
            reply = await self.backend.send(worker.address, text, signature, data, timeout)
        except TimeoutError:
            self.forget_workers()
            raise NodeError(
                worker.name, f"node {worker.name} did not answer within {timeout:g}s; the call is not reported as done"
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a closed comm, a refused TLS handshake, a dead worker
            self.forget_workers()
            waited = time.monotonic() - started
            raise NodeError(
                worker.name,
                f"node {worker.name} went away after {waited:.1f}s ({type(exc).__name__}: {exc}); "
                "the call is not reported as done",
            ) from None
        return self._check(worker.name, req, body, reply, pinned_key)

    def _check(self, name: str, req: Request, body: dict, reply: Any, pinned_key: bytes | None) -> RemoteReply:
        if not isinstance(reply, dict):
            raise NodeError(name, f"node {name} sent a malformed reply")
        if "node_sig" not in reply:
            err = reply.get("error") or {}
            message = err.get("message") if isinstance(err, dict) else None
            raise NodeError(name, str(message or f"node {name} sent an unsigned reply"), kind="refused")
        key = reply.get("node_key")
        if not isinstance(key, bytes) or (pinned_key is not None and key != pinned_key):
            raise NodeError(name, f"node {name} signed with a key other than the one pinned when it joined")
        payload = {"error": reply["error"]} if "error" in reply else {"result": reply.get("result")}
        rdigest = digest(payload)
        if reply.get("request_id") != req.id or reply.get("result_digest") != rdigest:
            raise NodeError(name, f"node {name}'s reply does not match the request or its own digest")
        if not verify(key, reply["node_sig"], reply_message(req.id, name, rdigest)):
            raise NodeError(name, f"node {name}'s reply signature does not verify")
        return RemoteReply(
            node=name,
            request_id=req.id,
            argv_digest=digest(body),
            result=reply.get("result"),
            error=reply.get("error"),
            result_digest=rdigest,
            node_sig=bytes(reply["node_sig"]).hex(),
            node_key=key,
            principal=req.recorded_principal(),
            data=bytes(reply["data"]) if reply.get("data") is not None else None,
        )

    def cancel_later(self, worker: WorkerInfo, pinned_key: bytes, target: str) -> None:
        """Send a cancel in the background (the caller reports its error now, not after a connect timeout)."""
        task = asyncio.ensure_future(self.cancel(worker, pinned_key, target))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def cancel(self, worker: WorkerInfo, pinned_key: bytes, target: str) -> None:
        """Ask the node to cancel request ``target`` (its process group is killed); best effort."""
        try:
            await self.request(worker, pinned_key, "cancel", {"target": target}, timeout=5.0)
        except NodeError:
            pass
