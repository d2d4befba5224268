"""The Aleph node service: a Dask worker plugin with its own Aleph runtime, policy and ledger.

The node answers one comm operation, ``aleph_node``, on its worker's TLS listener. A request is acted on
only when the connection's peer certificate has the ``aleph-center`` role, the request's signature verifies
against the center key pinned in this node's ``[cluster_node]``, it names this node, has not expired and
was not delivered before. A command then runs through the node's own chokepoint (``bash`` of its exec
family, judged under the node's ``aleph.toml``: unattended, so anything its policy does not allow outright
is refused), whatever the center decided. Every request that runs or is refused is a row in the node's
ledger carrying the request id, principal, argv digest and result digest; the reply is signed with the
node's own ledger key, which the center pinned when an operator joined the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from distributed.protocol import to_serialize

import aleph
from aleph_cluster._config import NodeConfig
from aleph_cluster._confine import ConfinedDir, ConfinementError
from aleph_cluster._pki import ROLE_CENTER, peer_identity
from aleph_cluster._transfer import TransferError, Transfers
from aleph_cluster._wire import Replay, Request, WireError, digest, reply_message

__all__ = ["NODE_OP", "NodeService", "node_identity_agent"]

log = logging.getLogger("aleph.cluster.node")

NODE_OP = "aleph_node"
"""The comm operation the node service answers."""
RECORDED = {"invoke": "node_invoke", "put_end": "node_file", "get_begin": "node_file", "drain": "node_manage"}
"""Request kinds that are a row in the node's ledger (by the center tool they serve)."""
LEDGER_AGENT = "cluster-node"
"""The node's ledger chain for cluster requests (rows carry the calling principal)."""


def node_identity_agent(name: str) -> str:
    """The keystore identity whose key signs this node's replies."""
    return f"cluster-node:{name}"


class _Hooks:
    """An in-process plugin that hands the node service the runtime's plugin context."""

    def __init__(self) -> None:
        self.context: aleph.PluginContext | None = None

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        """Keep the context: its ledger and tool services are the node's, at call time."""
        self.context = context


class NodeService:
    """One node: verifies requests, runs them through its own chokepoint, records and signs the results."""

    def __init__(self, config: NodeConfig, config_path: Path, *, workspace: Path | None = None) -> None:
        self.config = config
        self.name = config.name
        self.center_key = bytes.fromhex(config.center_key)
        self.center_fp = digest(config.center_key)[:16]
        self._hooks = _Hooks()
        self.runtime = aleph.load(config_path, workspace=workspace, plugins=[self._hooks])
        if self._hooks.context is None:
            raise aleph.ConfigError("the node runtime did not register its cluster hooks", file=str(config_path))
        ledger = self._hooks.context.ledger
        if ledger is None:
            raise aleph.ConfigError(
                "a cluster node needs its ledger: remove `[ledger] enabled = false`", file=str(config_path)
            )
        self.ledger = ledger
        self.signer = ledger.keystore.signer(node_identity_agent(self.name))
        rt_config = self.runtime.config
        protected = [*(Path(f) for f in rt_config.files), rt_config.data_dir]
        self.workspace = ConfinedDir(rt_config.workspace_root, protected)
        self.transfers = Transfers(
            self.workspace, rt_config.data_dir / "cluster" / "partial", config.max_file_mb * 1024 * 1024
        )
        self.replay = Replay()
        self.running: dict[str, asyncio.Task[Any]] = {}
        self._owners: dict[str, str] = {}
        """Request id -> the principal it runs for: a cancel from anyone else answers like an unknown id."""
        self.draining = False
        self.started_ms = int(time.time() * 1000)

    async def aclose(self) -> None:
        """Cancel what runs (killing its processes) and close the runtime."""
        for task in list(self.running.values()):
            task.cancel()
        if self.running:
            await asyncio.gather(*self.running.values(), return_exceptions=True)
        await self.runtime.aclose()

    # -- the comm handler ------------------------------------------------------------------------

    async def handle(self, comm: Any, request: bytes = b"", signature: bytes = b"", data: Any = None) -> dict:
        """Answer one ``aleph_node`` operation (Dask passes the comm first)."""
        _, role = peer_identity(getattr(comm, "extra_info", {}).get("peercert"))
        if role != ROLE_CENTER:
            log.warning("refused an aleph_node request from a peer whose certificate role is %r", role)
            return {"error": {"kind": "wire", "message": f"node {self.name} answers the center only"}}
        try:
            if data is not None and not isinstance(data, bytes):
                data = bytes(data)  # a frame may arrive as a memoryview
            req = Request.open(request, signature, center_key=self.center_key, node=self.name)
            self.replay.admit(req)
        except WireError as exc:
            log.warning("refused a request: %s", exc)
            return {"error": {"kind": "wire", "message": f"node {self.name} refused the request: {exc}"}}
        outcome = "ok"
        extra: bytes | None = None
        try:
            result, extra = await self._dispatch(req, data)
            reply = self._reply(req, result=result)
        except (TransferError, ConfinementError) as exc:
            outcome, reply = "error", self._reply(req, error={"kind": "invalid", "message": str(exc)})
        except aleph.ToolError as exc:
            denied = isinstance(exc, aleph.PermissionDenied)
            outcome = "denied" if denied else "error"
            message = exc.reason if isinstance(exc, aleph.PermissionDenied) else str(exc)
            reply = self._reply(req, error={"kind": exc.kind, "message": message})
        if req.kind in RECORDED or outcome == "denied":
            # durable before the center hears of it: nothing is reported done that the node has not recorded
            await self._record(req, outcome, reply["result_digest"])
            await self.ledger.flush()
        if extra is not None:
            reply["data"] = to_serialize(extra)  # a frame of its own (see DaskBackend.send)
        return reply

    def _reply(self, req: Request, *, result: Any = None, error: dict[str, str] | None = None) -> dict[str, Any]:
        payload = {"result": result} if error is None else {"error": error}
        rdigest = digest(payload)
        return {
            **payload,
            "node": self.name,
            "request_id": req.id,
            "result_digest": rdigest,
            "node_key": self.signer.public_key,
            "node_sig": self.signer.sign(reply_message(req.id, self.name, rdigest)),
        }

    async def _dispatch(self, req: Request, data: bytes | None) -> tuple[Any, bytes | None]:
        kind, body = req.kind, req.body
        if kind == "info":
            return self._info(), None
        if kind == "cancel":
            target = str(body.get("target", ""))
            task = self.running.get(target) if self._owners.get(target) == req.principal else None
            if task is not None:
                task.cancel()
            return {"cancelled": task is not None}, None
        if kind == "drain":
            self.draining = bool(body.get("draining", True))
            return {"draining": self.draining, "running": len(self.running)}, None
        if kind in ("invoke", "put_begin"):
            self._admit_new_work(req)
        if kind in ("put_begin", "get_begin"):
            self._judge_transfer(req)
        if kind == "invoke":
            return await self._invoke(req), None
        if kind == "get_chunk":
            meta, chunk = await asyncio.to_thread(self.transfers.get_chunk, body)
            return meta, chunk
        if kind == "put_chunk":
            return await asyncio.to_thread(self.transfers.put_chunk, req.principal, body, data or b""), None
        handlers = {
            "put_begin": lambda: self.transfers.put_begin(req.principal, body),
            "put_end": lambda: self.transfers.put_end(req.principal, body),
            "get_begin": lambda: self.transfers.get_begin(body),
        }
        if kind not in handlers:
            raise TransferError(f"unknown request kind {kind!r}")
        return await asyncio.to_thread(handlers[kind]), None

    def _judge_transfer(self, req: Request) -> None:
        """A push or pull is a ``node_file`` call under this node's own policy, for the principal and its chain.

        Rules see ``direction`` and ``remote_path`` (this node's path; ``local_path``, the center's, is not
        known here and carries the same path). Judged on the rules alone (the ``full`` tier: a copy asks
        nothing of the exec tier); anything but an allow is refused, as nobody on the node can approve.
        """
        who = req.acting()
        turn = aleph.TurnContext(session_key=who.session or "", unattended=True, caller_role=who.role, call_id=req.id)
        service = self.runtime.tool_service(principal=who, turn=turn, tier="full")
        direction = "push" if req.kind == "put_begin" else "pull"
        path = str(req.body.get("path") or "") or "-"
        args = {"node": self.name, "direction": direction, "local_path": path, "remote_path": path}
        decision = service.decision_for("node_file", args)
        if decision != "allow":
            raise aleph.PermissionDenied(
                "node_file", f"node {self.name}'s policy does not let {req.principal} {direction} {path!r} ({decision})"
            )

    def _admit_new_work(self, req: Request) -> None:
        if self.draining:
            raise aleph.ExecutionFailed("node_" + req.kind, f"node {self.name} is draining and takes no new work")
        if len(self.running) >= self.config.max_concurrent_calls:
            raise aleph.ExecutionFailed(
                "node_" + req.kind, f"node {self.name} is running {len(self.running)} calls, its limit; try later"
            )

    def _info(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "tags": list(self.config.tags),
            "identity_fp": self.signer.fingerprint,
            "center_fp": self.center_fp,
            "cpus": os.cpu_count() or 1,
            "load": os.getloadavg()[0],
            "running": len(self.running),
            "draining": self.draining,
            "started_ms": self.started_ms,
            "tools": sorted(d.name for d in self.runtime.registry.definitions()),
        }

    async def _invoke(self, req: Request) -> dict[str, Any]:
        body = req.body
        args: dict[str, Any] = {"command": body.get("command"), "working_dir": body.get("working_dir", ".")}
        if body.get("timeout_seconds") is not None:
            args["timeout_seconds"] = body["timeout_seconds"]
        timeout = min(float(body.get("timeout_seconds") or 60.0), self.config.max_timeout_seconds)
        who = req.acting()
        turn = aleph.TurnContext(
            session_key=who.session or "",
            channel_id=req.channel,
            unattended=True,  # nobody on the node can approve: what its policy asks for is refused
            caller_role=who.role,
            call_id=req.id,
            principal=req.principal,
            refs=(("request_id", req.id), ("center", self.center_fp), ("node", self.name)),
        )
        tier = self.config.exec_tier  # the node operator's choice; its policy and floor apply under every tier
        # The principal and everyone it acts for: the node's layers of every agent of the chain apply.
        service = self.runtime.tool_service(principal=who, turn=turn, tier=tier)
        task = asyncio.ensure_future(service.execute("bash", args))
        self.running[req.id] = task
        self._owners[req.id] = req.principal
        try:
            output = await asyncio.wait_for(asyncio.shield(task), timeout + 10)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise aleph.ExecutionFailed(
                "node_invoke", f"node {self.name}: the command overran {timeout:.0f}s"
            ) from None
        except asyncio.CancelledError:
            if not task.cancelled() and not task.done():
                raise  # the node itself is stopping
            raise aleph.Cancelled("node_invoke") from None
        finally:
            self.running.pop(req.id, None)
            self._owners.pop(req.id, None)
        return output.value if isinstance(output.value, dict) else {"output": output.value}

    async def _record(self, req: Request, outcome: str, result_digest: str) -> None:
        """The node's half of the ledger story: one row per request that ran or was refused."""
        await self.ledger.append(
            aleph.LedgerRecord(
                agent_id=LEDGER_AGENT,
                action="tool_denied" if outcome == "denied" else "tool_call",
                target=RECORDED.get(req.kind, "node_file"),  # a refused put_begin: the push it starts
                outcome=outcome,  # type: ignore[arg-type]
                detail=f"{req.kind} on node {self.name}",
                args_fp=digest(req.body),
                principal=req.recorded_principal(),
                result_fp=result_digest,
                refs={"request_id": req.id, "center": self.center_fp, "node": self.name, "kind": req.kind},
            )
        )
