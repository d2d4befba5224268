"""node_file: sha256 end to end, resume owned by the principal that started it, confinement on both sides."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest
from _harness import Cluster
from aleph_cluster._wire import digest

import aleph


def payload(size: int) -> bytes:
    return os.urandom(size)


def test_push_and_pull_keep_the_bytes_and_check_their_sha256(cluster: Cluster) -> None:
    data = payload(9 * 1024 * 1024 + 123)  # more than two chunks, not a multiple of the chunk size
    (cluster.center_dir / "big.bin").write_bytes(data)
    rt = cluster.center()

    async def run() -> tuple[dict, dict]:
        async with rt:
            s = rt.tool_service(agent="alice")
            push = await s.execute(
                "node_file",
                {
                    "node": "node-a",
                    "direction": "push",
                    "local_path": "big.bin",
                    "remote_path": "in/big.bin",
                    "overwrite": True,
                },
            )
            pull = await s.execute(
                "node_file",
                {
                    "node": "node-a",
                    "direction": "pull",
                    "local_path": "back/big.bin",
                    "remote_path": "in/big.bin",
                    "overwrite": True,
                },
            )
            return push.value, pull.value

    push, pull = asyncio.run(run())
    sha = hashlib.sha256(data).hexdigest()
    assert (push["sha256"], push["size"], push["resumed_from"]) == (sha, len(data), 0)
    assert (cluster.node_dir("node-a") / "workspace" / "in" / "big.bin").read_bytes() == data
    assert pull["sha256"] == sha and (cluster.center_dir / "back" / "big.bin").read_bytes() == data


def test_an_interrupted_push_resumes_for_its_owner_and_is_missing_for_anyone_else(cluster: Cluster) -> None:
    data = payload(6 * 1024 * 1024)
    (cluster.center_dir / "resume.bin").write_bytes(data)
    rt = cluster.center()
    sha = hashlib.sha256(data).hexdigest()

    async def send_first_chunk() -> None:
        """What an interrupted push leaves: the node holds the first chunk for alice."""
        handle = rt.registry.get("node_file").tool.handle  # type: ignore[union-attr]
        center = await handle.get("node_file")
        worker, rec = await center.resolve("node-a")
        common = {"path": "resumed.bin", "size": len(data), "sha256": sha, "overwrite": True}
        first = {**common, "resume": False}
        begin = await center.request(worker, rec.identity_key, "put_begin", first, timeout=10, principal="alice")
        chunk = data[: 4 * 1024 * 1024]
        body = {"transfer": begin.result["transfer"], "offset": 0, "chunk_sha256": hashlib.sha256(chunk).hexdigest()}
        await center.request(worker, rec.identity_key, "put_chunk", body, timeout=10, data=chunk, principal="alice")

    async def run() -> tuple[dict, dict]:
        async with rt:
            await send_first_chunk()
            args = {
                "node": "node-a",
                "direction": "push",
                "local_path": "resume.bin",
                "remote_path": "resumed.bin",
                "overwrite": True,
            }
            bob = await rt.tool_service(agent="bob").execute("node_file", args)
            await send_first_chunk()
            alice = await rt.tool_service(agent="alice").execute("node_file", args)
            return bob.value, alice.value

    bob, alice = asyncio.run(run())
    assert bob["resumed_from"] == 0  # alice's partial upload answers bob exactly like a missing one
    assert alice["resumed_from"] == 4 * 1024 * 1024
    assert alice["sha256"] == sha and (cluster.node_dir("node-a") / "workspace" / "resumed.bin").read_bytes() == data


@pytest.mark.parametrize(
    ("direction", "local", "remote", "says"),
    [
        ("push", "kit-src.txt", "../escape.txt", "climbs out"),
        ("push", "kit-src.txt", "/etc/passwd", "absolute"),
        ("push", "kit-src.txt", "link-out/x.txt", "symlink"),
        ("pull", "x.txt", "link-out/passwd", "symlink"),
        ("push", "../outside.txt", "x.txt", "climbs out"),
        ("push", ".aleph-data/cluster.db", "x.txt", "protected"),
        ("pull", "aleph.toml", "in/big.bin", "protected"),
    ],
)
def test_paths_stay_inside_each_workspace(cluster: Cluster, direction: str, local: str, remote: str, says: str) -> None:
    (cluster.center_dir / "kit-src.txt").write_text("x")
    link = cluster.node_dir("node-a") / "workspace" / "link-out"
    if not link.is_symlink():
        link.symlink_to("/etc")
    rt = cluster.center()

    async def run() -> aleph.ToolResult:
        async with rt:
            return await rt.tool_service(agent="alice").call(
                "node_file",
                {
                    "node": "node-a",
                    "direction": direction,
                    "local_path": local,
                    "remote_path": remote,
                    "overwrite": True,
                },
            )

    result = asyncio.run(run())
    assert not result.success
    assert says in (result.error or ""), result.error
    assert not (cluster.root / "escape.txt").exists() and not (cluster.node_dir("node-a") / "escape.txt").exists()


def test_a_chunk_that_does_not_match_its_signed_sha256_is_refused(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> str:
        async with rt:
            handle = rt.registry.get("node_file").tool.handle  # type: ignore[union-attr]
            center = await handle.get("node_file")
            worker, rec = await center.resolve("node-a")
            good = b"a" * 1000
            common = {
                "path": "tampered.bin",
                "size": 1000,
                "sha256": hashlib.sha256(good).hexdigest(),
                "overwrite": True,
            }
            begin = await center.request(worker, rec.identity_key, "put_begin", common, timeout=10)
            body = {"transfer": begin.result["transfer"], "offset": 0, "chunk_sha256": hashlib.sha256(good).hexdigest()}
            reply = await center.request(worker, rec.identity_key, "put_chunk", body, timeout=10, data=b"b" * 1000)
            assert reply.error is not None and reply.result_digest == digest({"error": reply.error})
            return reply.error["message"]

    assert "does not match its signed sha256" in asyncio.run(run())


def test_chunks_arriving_out_of_order_are_written_in_order(cluster: Cluster) -> None:
    rt = cluster.center()
    data = payload(2 * 1024 * 1024)
    first, second = data[: 1024 * 1024], data[1024 * 1024 :]

    async def run() -> tuple[int, int, str, str]:
        async with rt:
            center = await rt.registry.get("node_file").tool.handle.get("node_file")  # type: ignore[union-attr]
            worker, rec = await center.resolve("node-a")
            common = {
                "path": "ordered.bin",
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "overwrite": True,
            }
            begin = await center.request(worker, rec.identity_key, "put_begin", {**common, "resume": False}, timeout=10)
            tid = begin.result["transfer"]

            async def chunk(offset: int, block: bytes):
                body = {"transfer": tid, "offset": offset, "chunk_sha256": hashlib.sha256(block).hexdigest()}
                return await center.request(worker, rec.identity_key, "put_chunk", body, timeout=10, data=block)

            far = await chunk(512 * 1024 * 1024, b"x")  # beyond what a node keeps in memory ahead
            early = await chunk(len(first), second)
            late = await chunk(0, first)
            end = await center.request(worker, rec.identity_key, "put_end", {**common, "transfer": tid}, timeout=10)
            return early.result["offset"], late.result["offset"], end.result["sha256"], far.error["message"]

    held_after_early, held_after_late, sha, far = asyncio.run(run())
    assert (held_after_early, held_after_late) == (0, len(data))
    assert sha == hashlib.sha256(data).hexdigest()
    assert (cluster.node_dir("node-a") / "workspace" / "ordered.bin").read_bytes() == data
    assert "too far ahead" in far
