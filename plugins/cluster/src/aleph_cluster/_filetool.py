"""node_file: push a workspace file to a node, or pull one from it; chunked, sha256 end to end, resumable.

Both ends confine paths to their own workspace (component-by-component opens, no symlinks, Aleph's own
files protected). Each chunk is bound to its signed request by its SHA-256, and the whole file's SHA-256 is
checked by the receiver before the file appears at its destination (atomically; a mismatch leaves nothing).
An interrupted transfer resumes from the bytes already held, for the same principal only: partial pulls
live under one folder per principal on the center, partial pushes likewise on the node.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_cluster._center import Center, NodeError, RemoteReply, WorkerInfo
from aleph_cluster._confine import ConfinedDir, ConfinementError
from aleph_cluster._handle import CenterHandle
from aleph_cluster._tools import annotate, raise_node_error, raise_remote_error
from aleph_cluster._transfer import file_sha256, transfer_id

__all__ = ["NodeFileTool"]

_WINDOW = 3
"""Chunks of one push in flight at once."""


class NodeFileArgs(ToolArgs):
    node: str = Field(min_length=1, max_length=63)
    """The node (an id from node_list)."""
    direction: Literal["push", "pull"]
    """push: this workspace -> node; pull: node -> this workspace."""
    local_path: str = Field(min_length=1, max_length=4096)
    """Path in this side's workspace."""
    remote_path: str = Field(min_length=1, max_length=4096)
    """Path in the node's workspace."""
    overwrite: bool = False
    """Replace an existing destination file."""
    resume: bool = True
    """Continue an interrupted transfer of the same file from where it stopped."""


class NodeFileTool(AlephTool[NodeFileArgs]):
    NAME = "node_file"
    DESCRIPTION = (
        "Copy a file between this workspace and a node's workspace (push or pull), in chunks, with the SHA-256 "
        "checked end to end; an interrupted copy resumes. Paths stay inside each side's workspace."
    )
    Args = NodeFileArgs
    FACTS = ToolFacts(max_duration_ms=3_600_000, tags=("cluster", "files"))

    def __init__(self, handle: CenterHandle, workspace: ConfinedDir) -> None:
        self.handle = handle
        self.workspace = workspace

    async def call(self, args: NodeFileArgs) -> dict[str, Any]:
        center = await self.handle.get(self.NAME)
        try:
            worker, rec = await center.resolve(args.node)
            started = time.monotonic()
            if args.direction == "push":
                out, last = await self._push(center, worker, rec.identity_key, args)
            else:
                out, last = await self._pull(center, worker, rec.identity_key, args)
        except NodeError as exc:
            raise_node_error(self.NAME, exc)
            raise
        except ConfinementError as exc:
            raise aleph.PermissionDenied(self.NAME, str(exc)) from None
        annotate(last)
        elapsed = time.monotonic() - started
        moved = out["size"] - out["resumed_from"]
        return {**out, "seconds": round(elapsed, 3), "mb_per_s": round(moved / 1e6 / elapsed, 1) if elapsed else None}

    def _timeout(self, center: Center) -> float:
        return center.config.call_timeout_seconds

    async def _ask(
        self, center: Center, worker: WorkerInfo, key: bytes, kind: str, body: dict, data: bytes | None = None
    ) -> RemoteReply:
        reply = await center.request(worker, key, kind, body, timeout=self._timeout(center), data=data)
        if reply.error is not None:
            raise_remote_error(self.NAME, worker.name, reply.error)
        return reply

    async def _push(
        self, center: Center, worker: WorkerInfo, key: bytes, args: NodeFileArgs
    ) -> tuple[dict[str, Any], RemoteReply]:
        fd, size = await anyio.to_thread.run_sync(self.workspace.open_read, args.local_path)
        try:
            limit = center.config.max_file_mb * 1024 * 1024
            if size > limit:
                raise aleph.ValidationFailed(self.NAME, f"{args.local_path} is {size} bytes; the limit is {limit}")
            sha = await anyio.to_thread.run_sync(file_sha256, fd)
            common = {"path": args.remote_path, "size": size, "sha256": sha, "overwrite": args.overwrite}
            begin = await self._ask(center, worker, key, "put_begin", {**common, "resume": args.resume})
            tid, offset = begin.result["transfer"], int(begin.result["offset"])
            resumed_from = offset
            chunk = center.config.chunk_kib * 1024

            def read(at: int) -> tuple[bytes, str]:
                data = os.pread(fd, chunk, at)
                return data, hashlib.sha256(data).hexdigest()

            # a few chunks in flight on their own connections: the node keeps early ones in memory and
            # writes in order, and the next chunk is read and hashed while the others are on the wire
            inflight: set[asyncio.Future[RemoteReply]] = set()
            try:
                while offset < size or inflight:
                    while offset < size and len(inflight) < _WINDOW:
                        data, digest = await asyncio.to_thread(read, offset)
                        if not data:
                            raise aleph.ExecutionFailed(self.NAME, f"{args.local_path} shrank while it was being sent")
                        body = {"transfer": tid, "offset": offset, "chunk_sha256": digest}
                        inflight.add(asyncio.ensure_future(self._ask(center, worker, key, "put_chunk", body, data)))
                        offset += len(data)
                    done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        task.result()  # a refused chunk stops the transfer
            finally:
                for task in inflight:
                    task.cancel()
                if inflight:
                    await asyncio.gather(*inflight, return_exceptions=True)
            end = await self._ask(center, worker, key, "put_end", {**common, "transfer": tid})
        finally:
            os.close(fd)  # every read was awaited above: none still uses the descriptor
        out = {
            "direction": "push",
            "node": worker.name,
            "local_path": args.local_path,
            "remote_path": args.remote_path,
            "size": size,
            "sha256": end.result["sha256"],
            "resumed_from": resumed_from,
        }
        return out, end

    async def _pull(
        self, center: Center, worker: WorkerInfo, key: bytes, args: NodeFileArgs
    ) -> tuple[dict[str, Any], RemoteReply]:
        if not args.overwrite and self.workspace.size_of(args.local_path) is not None:
            raise aleph.ValidationFailed(self.NAME, f"{args.local_path} exists; pass overwrite=true to replace it")
        begin = await self._ask(center, worker, key, "get_begin", {"path": args.remote_path})
        size, sha = int(begin.result["size"]), str(begin.result["sha256"])
        limit = center.config.max_file_mb * 1024 * 1024
        if size > limit:
            raise aleph.ValidationFailed(self.NAME, f"{args.remote_path} is {size} bytes; the limit is {limit}")
        call = aleph.current_call()
        principal = (call.agent if call is not None else None) or "default"
        part = self._partial(principal, worker.name, args.remote_path, size, sha)
        if not args.resume or not part.exists() or part.stat().st_size > size:
            part.write_bytes(b"")
        offset = resumed_from = part.stat().st_size
        chunk = center.config.chunk_kib * 1024
        running = hashlib.sha256() if offset == 0 else None  # a resumed pull is hashed from the file at the end
        with open(part, "ab") as out_file:
            while offset < size:
                body = {"path": args.remote_path, "offset": offset, "length": min(chunk, size - offset)}
                reply = await self._ask(center, worker, key, "get_chunk", body)
                data = reply.data or b""
                meta = reply.result or {}
                if not data or hashlib.sha256(data).hexdigest() != meta.get("chunk_sha256"):
                    raise aleph.ExecutionFailed(self.NAME, f"chunk at {offset} from node {worker.name} is damaged")
                await anyio.to_thread.run_sync(out_file.write, data)
                if running is not None:
                    running.update(data)
                offset += len(data)
        got = running.hexdigest() if running is not None else await anyio.to_thread.run_sync(_sha_of, part)
        if got != sha:
            part.unlink(missing_ok=True)
            raise aleph.ExecutionFailed(
                self.NAME, f"{args.remote_path} from node {worker.name} arrived with sha256 {got}, expected {sha}"
            )
        try:
            await anyio.to_thread.run_sync(
                lambda: self.workspace.install(args.local_path, part, overwrite=args.overwrite)
            )
        finally:
            part.unlink(missing_ok=True)
        out = {
            "direction": "pull",
            "node": worker.name,
            "local_path": args.local_path,
            "remote_path": args.remote_path,
            "size": size,
            "sha256": got,
            "resumed_from": resumed_from,
        }
        return out, begin

    def _partial(self, principal: str, node: str, path: str, size: int, sha: str) -> Path:
        # One folder per principal: the one place a partial pull is filtered by its owner.
        owner = hashlib.sha256(principal.encode()).hexdigest()[:32]
        folder = self.handle.data_dir / "cluster" / "partial" / owner
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return folder / f"{transfer_id(principal, f'{node}:{path}', size, sha)}.part"


def _sha_of(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return file_sha256(fd)
    finally:
        os.close(fd)
