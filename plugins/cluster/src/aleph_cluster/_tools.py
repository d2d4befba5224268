"""node_list, node_invoke, node_invoke_many and node_manage (node_file is in :mod:`aleph_cluster._filetool`).

Each remote call is judged twice: here by the center's chokepoint (node_invoke carries a shell command, so
the command-policy floor sees it, and where this runtime has ``bash`` the call must also pass as that
``bash`` call), and on the node by the node's own policy. The center's ledger row of each call names the
node, request id, argv digest and result digest; the node's row carries the same, for the cross-check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_cluster._center import Center, NodeError, RemoteReply, WorkerInfo
from aleph_cluster._config import check_tags
from aleph_cluster._handle import CenterHandle
from aleph_cluster._pki import ROLE_NODE
from aleph_cluster._wire import new_request_id

__all__ = ["NodeInvokeManyTool", "NodeInvokeTool", "NodeListTool", "NodeManageTool", "raise_node_error"]

_STALE_SECONDS = 10.0
_GRACE_SECONDS = 15.0
"""Beyond the command's own timeout: the node's reply, its ledger row and the transport."""


def raise_node_error(tool: str, exc: NodeError) -> None:
    """The ToolError a model sees for a node that failed; it always names the node."""
    if exc.kind == "missing":
        raise aleph.ExecutionFailed(tool, str(exc)) from None
    if exc.kind == "refused":
        raise aleph.PermissionDenied(tool, str(exc)) from None
    raise aleph.TransportError(tool, str(exc)) from None


def raise_remote_error(tool: str, node: str, error: dict[str, str]) -> None:
    """Map an error a node reported onto the matching ToolError (text from the node, prefixed with its name)."""
    message = str(error.get("message", "failed"))
    if error.get("kind") in ("permission_denied", "approval_unavailable", "approval_denied"):
        raise aleph.PermissionDenied(tool, f"node {node} refused it under its own policy: {message}")
    if error.get("kind") == "cancelled":
        raise aleph.Cancelled(tool)
    raise aleph.ExecutionFailed(tool, f"node {node}: {message}")


def _refs(reply: RemoteReply, call: aleph.CallContext) -> dict[str, str]:
    return {
        "node": reply.node,
        "request_id": reply.request_id,
        "argv_digest": reply.argv_digest,
        "result_digest": reply.result_digest,
        "principal": reply.principal or call.agent or "default",
        "node_sig": reply.node_sig,
    }


def annotate(reply: RemoteReply) -> None:
    """Put the remote call's identity on this call's ledger row (the center's half of the cross-check)."""
    call = aleph.current_call()
    if call is not None:
        call.annotate(**_refs(reply, call))


async def record_request(reply: RemoteReply) -> None:
    """One signed row per remote request of a fan-out (its own half of the cross-check)."""
    call = aleph.current_call()
    if call is not None:
        await call.record("node_request", f"request {reply.request_id} to node {reply.node}", **_refs(reply, call))


def clip(text: Any, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` bytes keeping head and tail, and whether it was cut."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    data = text.encode()
    if len(data) <= limit:
        return text, False
    half = limit // 2
    head = data[:half].decode(errors="ignore")
    tail = data[-half:].decode(errors="ignore")
    return f"{head}\n… [{len(data) - 2 * half} bytes cut] …\n{tail}", True


async def judge_as_bash(command: str, timeout: float | None, working_dir: str) -> None:
    """Where this runtime has ``bash``, the remote command must pass as that bash call too."""
    call = aleph.current_call()
    if call is None:
        return
    args: dict[str, Any] = {"command": command, "working_dir": working_dir}
    if timeout is not None:
        args["timeout_seconds"] = timeout
    try:
        await call.authorize("bash", args)
    except aleph.ToolNotFound:
        pass  # no exec family here: node_invoke's own rules and the command floor decided


class NodeListArgs(ToolArgs):
    tag: str | None = Field(default=None, max_length=32)
    """Only nodes with this tag."""


class NodeListTool(AlephTool[NodeListArgs]):
    NAME = "node_list"
    DESCRIPTION = (
        "List the cluster's nodes: id, host, address, tags, cpus, memory, load, seconds since last seen, health "
        "(ok, stale, draining, pending = connected but not joined by an operator, gone = joined but not connected)."
    )
    Args = NodeListArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("cluster",))

    def __init__(self, handle: CenterHandle) -> None:
        self.handle = handle

    async def call(self, args: NodeListArgs) -> dict[str, Any]:
        center = await self.handle.get(self.NAME)
        try:
            workers = await asyncio.wait_for(center.backend.workers(), center.config.connect_timeout_seconds)
        except (OSError, TimeoutError) as exc:
            unreachable = f"the scheduler {center.config.scheduler} is not reachable: {exc}"
            raise aleph.TransportError(self.NAME, unreachable) from None
        joined = center.store.all()
        now = time.time()
        nodes = []
        for name in sorted(set(workers) | set(joined)):
            w, rec = workers.get(name), joined.get(name)
            tags = list(rec.tags) if rec else []
            if args.tag is not None and args.tag not in tags:
                continue
            nodes.append(_node_row(name, w, rec is not None, bool(rec and rec.draining), tags, now))
        return {"nodes": nodes, "count": len(nodes)}


def _node_row(name: str, w: WorkerInfo | None, joined: bool, draining: bool, tags: list[str], now: float) -> dict:
    if w is None:
        health = "gone"
    elif not joined:
        health = "pending"
    elif draining:
        health = "draining"
    elif now - w.last_seen > _STALE_SECONDS or w.status not in ("running", "paused"):
        health = "stale"
    else:
        health = "ok"
    return {
        "id": name,
        "host": w.host if w else None,
        "address": w.address if w else None,
        "tags": tags,
        "cpus": w.cpus if w else None,
        "memory_bytes": w.memory_bytes if w else None,
        "memory_used_bytes": w.memory_used if w else None,
        "load": round(w.cpu_percent / 100.0, 3) if w else None,
        "last_seen_seconds": round(max(0.0, now - w.last_seen), 3) if w else None,
        "health": health,
    }


class NodeInvokeArgs(ToolArgs):
    node: str = Field(min_length=1, max_length=63)
    """The node to run on (an id from node_list)."""
    command: str = Field(min_length=1, max_length=100_000)
    """The bash command, run in the node's workspace sandbox under the node's own policy."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=170)
    """Wall time on the node (at most 170 s, the exec family's limit); the process group is killed after it."""
    working_dir: str = Field(default=".", max_length=4096)
    """Directory on the node, relative to its workspace."""


def uncontained_remote(input: Mapping[str, Any]) -> str | None:
    """Why a remote command's effects are not held back here: they land on the node, under its own rules."""
    return "its effects land on another machine, under that node's own sandbox and transactions"


class _RemoteCommand:
    """What both remote-command tools tell the chokepoint: the shell text they run, and that it is uncontained."""

    def __init__(self, handle: CenterHandle) -> None:
        self.handle = handle

    def shell_command(self, input: Mapping[str, Any]) -> str | None:
        """The shell text this call runs remotely, for the chokepoint's command-policy floor."""
        command = input.get("command")
        return command if isinstance(command, str) else None

    def uncontained(self, input: Mapping[str, Any]) -> str | None:
        """Under the ``auto`` tier a remote command is asked about: this side cannot hold its effects back."""
        return uncontained_remote(input)


class NodeInvokeTool(_RemoteCommand, AlephTool[NodeInvokeArgs]):
    NAME = "node_invoke"
    DESCRIPTION = (
        "Run one bash command on one named node and return exit_code, stdout and stderr (bounded), whether it "
        "timed out, and the node's changeset summary. The node judges it again under its own policy and may "
        "refuse what this side allowed. Cancelling the call kills the remote process."
    )
    Args = NodeInvokeArgs
    FACTS = ToolFacts(max_duration_ms=200_000, tags=("cluster", "exec"))

    async def call(self, args: NodeInvokeArgs) -> dict[str, Any]:
        center = await self.handle.get(self.NAME)
        await judge_as_bash(args.command, args.timeout_seconds, args.working_dir)
        try:
            return await invoke_one(center, self.NAME, args.node, args.command, args.timeout_seconds, args.working_dir)
        except NodeError as exc:
            raise_node_error(self.NAME, exc)
            raise


async def invoke_one(
    center: Center, tool: str, node: str, command: str, timeout: float | None, working_dir: str, *, record: bool = True
) -> dict[str, Any]:
    """Run ``command`` on ``node``; on cancellation the node is told to kill it. Raises NodeError/ToolError."""
    worker, rec = await center.resolve(node)
    body: dict[str, Any] = {"command": command, "working_dir": working_dir}
    if timeout is not None:
        body["timeout_seconds"] = timeout
    wait = min(timeout or center.config.call_timeout_seconds, center.config.max_timeout_seconds) + _GRACE_SECONDS
    request_id = new_request_id()
    try:
        reply = await center.request(worker, rec.identity_key, "invoke", body, timeout=wait, request_id=request_id)
    except asyncio.CancelledError:
        await asyncio.shield(center.cancel(worker, rec.identity_key, request_id))  # kill it before we return
        raise
    except NodeError:
        center.cancel_later(worker, rec.identity_key, request_id)  # a silent node may still run it; do not wait
        raise
    if record:
        annotate(reply)
    else:
        await record_request(reply)
    if reply.error is not None:
        raise_remote_error(tool, node, reply.error)
    result = reply.result if isinstance(reply.result, dict) else {}
    limit = center.config.max_output_bytes
    stdout, cut_out = clip(result.get("stdout"), limit)
    stderr, cut_err = clip(result.get("stderr"), limit)
    out = {k: v for k, v in result.items() if k not in ("stdout", "stderr")}
    out.update(
        node=node,
        request_id=reply.request_id,
        stdout=stdout,
        stderr=stderr,
        truncated=bool(result.get("truncated")) or cut_out or cut_err,
    )
    return out


class NodeInvokeManyArgs(ToolArgs):
    command: str = Field(min_length=1, max_length=100_000)
    """The bash command to run on each chosen node."""
    tag: str | None = Field(default=None, max_length=32)
    """Run on every joined node with this tag (give tag or nodes)."""
    nodes: list[str] | None = Field(default=None, max_length=256)
    """Run on these nodes (give tag or nodes)."""
    mode: Literal["all", "any", "quorum"] = "all"
    """Success when all nodes, any node, or a quorum of nodes exit 0."""
    quorum: int | None = Field(default=None, ge=1, le=10_000)
    """Nodes that must succeed in quorum mode (default: a majority)."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=170)
    """Wall time on each node (at most 170 s)."""
    max_concurrency: int | None = Field(default=None, ge=1, le=256)
    """Nodes talked to at once (at most [cluster] max_concurrency)."""


class NodeInvokeManyTool(_RemoteCommand, AlephTool[NodeInvokeManyArgs]):
    NAME = "node_invoke_many"
    DESCRIPTION = (
        "Run one bash command on many nodes (by tag or by name) with bounded concurrency. Returns each node's "
        "result; mode all/any/quorum decides success, and every node that failed is listed, never hidden."
    )
    Args = NodeInvokeManyArgs
    FACTS = ToolFacts(max_duration_ms=600_000, tags=("cluster", "exec"))

    async def call(self, args: NodeInvokeManyArgs) -> dict[str, Any]:
        center = await self.handle.get(self.NAME)
        if (args.tag is None) == (args.nodes is None):
            raise aleph.ValidationFailed(self.NAME, "give exactly one of tag or nodes")
        await judge_as_bash(args.command, args.timeout_seconds, ".")
        names = args.nodes if args.nodes is not None else self._tagged(center, args.tag or "")
        names = list(dict.fromkeys(names))
        if not names:
            raise aleph.ExecutionFailed(self.NAME, f"no joined node has tag {args.tag!r}")
        if len(names) > center.config.max_nodes_per_call:
            raise aleph.ValidationFailed(
                self.NAME, f"{len(names)} nodes; the limit is {center.config.max_nodes_per_call}"
            )
        need = {"all": len(names), "any": 1, "quorum": args.quorum or len(names) // 2 + 1}[args.mode]
        if need > len(names):
            raise aleph.ValidationFailed(self.NAME, f"quorum {need} is more than the {len(names)} nodes chosen")
        limit = min(args.max_concurrency or center.config.max_concurrency, center.config.max_concurrency)
        gate = asyncio.Semaphore(limit)

        async def one(name: str) -> dict[str, Any]:
            async with gate:
                try:
                    out = await invoke_one(
                        center, self.NAME, name, args.command, args.timeout_seconds, ".", record=False
                    )
                except NodeError as exc:
                    return {"node": name, "ok": False, "error": str(exc)}
                except aleph.ToolError as exc:
                    return {"node": name, "ok": False, "error": str(exc)}
                return {**out, "ok": out.get("exit_code") == 0 and not out.get("timed_out")}

        results = await asyncio.gather(*(one(n) for n in names))
        ok = sum(1 for r in results if r["ok"])
        failed = [r["node"] for r in results if not r["ok"]]
        call = aleph.current_call()
        if call is not None:
            ids = ",".join(str(r.get("request_id", "-"))[:8] for r in results)
            call.annotate(nodes=",".join(names)[:256], request_ids=ids[:256], succeeded=ok, failed=len(failed))
        summary = {"mode": args.mode, "needed": need, "succeeded": ok, "failed": failed, "results": results}
        if ok < need:
            lines = "; ".join(f"{r['node']}: {r.get('error') or 'exit ' + str(r.get('exit_code'))}" for r in results)
            raise aleph.ExecutionFailed(
                self.NAME, f"mode {args.mode} needed {need} of {len(names)} nodes, {ok} succeeded ({lines})"
            )
        return {**summary, "satisfied": True}

    @staticmethod
    def _tagged(center: Center, tag: str) -> list[str]:
        return sorted(name for name, rec in center.store.all().items() if tag in rec.tags and not rec.draining)


class NodeManageArgs(ToolArgs):
    action: Literal["join", "drain", "undrain", "leave", "tag"]
    """join: admit a connected node and pin its key; drain/undrain: stop/resume new calls; leave: retire it;
    tag: replace the center's tags for it."""
    node: str = Field(min_length=1, max_length=63)
    """The node's id."""
    tags: list[str] | None = Field(default=None, max_length=32)
    """For join and tag: the tags to set."""

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_tags(value)


class NodeManageTool(AlephTool[NodeManageArgs]):
    NAME = "node_manage"
    DESCRIPTION = (
        "Operator only: join a connected node (pinning its identity key), drain or undrain it, make it leave "
        "(retired after its running calls), or set its tags."
    )
    Args = NodeManageArgs
    FACTS = ToolFacts(max_duration_ms=120_000, tags=("cluster", "admin"))

    def __init__(self, handle: CenterHandle) -> None:
        self.handle = handle

    async def call(self, args: NodeManageArgs) -> dict[str, Any]:
        call = aleph.current_call()
        turn = call.turn if call is not None else None
        # Until core carries a role fact, the turn's caller role decides; no turn at all is not an operator.
        if turn is None or not turn.caller_is_operator():
            raise aleph.PermissionDenied(self.NAME, "managing nodes needs the operator role")
        center = await self.handle.get(self.NAME)
        try:
            return await self._act(center, args)
        except NodeError as exc:
            raise_node_error(self.NAME, exc)
            raise

    async def _act(self, center: Center, args: NodeManageArgs) -> dict[str, Any]:
        if args.action == "join":
            workers = await center.workers(fresh=True)
            worker = workers.get(args.node)
            if worker is None:
                raise NodeError(args.node, f"no node named {args.node!r} is connected", kind="missing")
            reply = await center.request(worker, None, "info", {}, timeout=center.config.connect_timeout_seconds)
            info = reply.result if isinstance(reply.result, dict) else {}
            if info.get("node") != args.node:
                raise NodeError(args.node, f"the worker named {args.node} answers as {info.get('node')!r}")
            cn, role = await center.backend.peer_identity(worker.address)
            if cn != args.node or role != ROLE_NODE:
                raise NodeError(args.node, f"the worker named {args.node} holds a certificate for {cn!r} ({role!r})")
            key = reply.node_key
            tags = check_tags(list(args.tags if args.tags is not None else info.get("tags") or []))
            center.store.join(args.node, key, tags)
            call = aleph.current_call()
            if call is not None:  # a read on the node, so no node row to cross-check: name what was pinned
                call.annotate(node=args.node, identity_fp=str(info.get("identity_fp", ""))[:64])
            return {"node": args.node, "joined": True, "identity_fp": info.get("identity_fp"), "tags": tags}
        worker, rec = await center.resolve(args.node, for_work=False)
        if args.action == "tag":
            center.store.set_tags(args.node, list(args.tags or []))
            return {"node": args.node, "tags": list(args.tags or [])}
        if args.action in ("drain", "undrain"):
            draining = args.action == "drain"
            center.store.set_draining(args.node, draining)
            reply = await center.request(worker, rec.identity_key, "drain", {"draining": draining}, timeout=10.0)
            annotate(reply)
            return {"node": args.node, "draining": draining, "running": (reply.result or {}).get("running")}
        # leave: no new calls, wait (bounded) for running ones, then the scheduler retires the worker
        center.store.set_draining(args.node, True)
        deadline = time.monotonic() + center.config.max_timeout_seconds
        while True:
            reply = await center.request(worker, rec.identity_key, "drain", {"draining": True}, timeout=10.0)
            running = int((reply.result or {}).get("running") or 0)
            if running == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)  # polling the node's own count: it has no event to subscribe to
        await center.backend.retire(worker.address)
        center.store.forget(args.node)
        center.forget_workers()
        annotate(reply)
        return {"node": args.node, "left": True, "abandoned_calls": running}
