"""kill -9 under load: every call a client was told succeeded has its durable ledger row and its effect.

Several ``aleph serve`` processes share one data directory and one workspace; real MCP SDK clients
drive ``file_write`` and ``remember`` through each. Every server is killed with SIGKILL at a random
moment while calls are in flight, then all start again on the same directories; many rounds. At the
end a fresh runtime (which runs the recovery at start) must show: every acknowledged call in the ledger
(0 missing), every acknowledged file on disk whole (0 lost or torn), no temporary file left, and every
chain verifying.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import Client

import aleph

from ._servers import Server, call, write_config

pytestmark = pytest.mark.anyio

ROUNDS = int(os.environ.get("ALEPH_TEST_FAULT_ROUNDS", "6"))
SERVERS = 3
SESSIONS = 2  # concurrent client sessions per server


@dataclass(frozen=True)
class Acked:
    tool: str
    key: str  # a token unique to the call, found in its ledger row's detail
    path: str | None = None
    content: str | None = None


async def drive(
    url: str, tag: str, acked: list[Acked], server: Server, state: dict[str, int], rng: random.Random
) -> None:
    """Call until the server dies; record what was acknowledged; kill the server after its quota of acks."""
    try:
        async with Client(url, mode="legacy") as client:
            for i in range(10_000):
                key = f"{tag}-{i}"
                if i % 3 == 2:
                    content = f"Fact {key}: the nightly build of project {key} runs on {i % 7 + 1} workers"
                    ok, _ = await call(client, "remember", {"action": "add", "content": content})
                    item = Acked("remember", key)
                else:
                    path = f"out/{tag}/{i}.txt"
                    content = f"{key}\n" * (1 + rng.randrange(20_000))  # up to ~300 KB: a kill lands mid-write too
                    ok, _ = await call(client, "file_write", {"path": path, "content": content, "create_dirs": True})
                    item = Acked("file_write", key, path, content)
                if ok:
                    acked.append(item)
                    state["acks"] += 1
                    if state["acks"] == state["quota"]:
                        # A random instant after the quota: other sessions are mid-call, this one goes on.
                        await anyio.sleep(rng.random() * 0.02)
                        await anyio.to_thread.run_sync(server.kill)
    except Exception:
        pass  # the server was killed under us: whatever had no answer was never acknowledged


async def test_every_acknowledged_call_survives_kill_9_at_random_moments(tmp_path: Path, workspace: Path) -> None:
    seed = int(os.environ.get("ALEPH_TEST_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    data = tmp_path / "data"
    write_config(workspace, data)
    acked: list[Acked] = []
    for round_ in range(ROUNDS):
        servers = [Server.start(workspace) for _ in range(SERVERS)]
        try:
            urls = [await server.wait_ready() for server in servers]
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    for s, (server, url) in enumerate(zip(servers, urls, strict=True)):
                        state = {"acks": 0, "quota": rng.randint(4, 40)}
                        for session in range(SESSIONS):
                            tg.start_soon(drive, url, f"r{round_}s{s}c{session}", acked, server, state, rng)
        finally:
            for server in servers:
                server.kill()
    assert len(acked) >= ROUNDS * SERVERS * 4, f"seed {seed}: too few calls were acknowledged to test anything"

    async with aleph.load(workspace / "aleph.toml", workspace=workspace) as rt:  # recovery at start runs here
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        rows = ledger.rows("default")
        details: dict[str, list[tuple[int, str]]] = {"file_write": [], "remember": []}
        for row in rows:
            if row.action == "tool_call" and row.outcome == "ok" and row.target in details:
                details[row.target].append((row.seq, row.detail))
        found = {id(a): [seq for seq, d in details[a.tool] if a.key in d] for a in acked}
        missing = [a for a in acked if not found[id(a)]]
        assert [] == missing, f"seed {seed}: {len(missing)} acknowledged call(s) without a ledger row"
        lost = [a.path for a in acked if a.path and _read(workspace / a.path) != a.content]
        assert [] == lost, f"seed {seed}: {len(lost)} acknowledged file(s) lost or torn"
        report = ledger.verify("default")
        assert report.ok, f"seed {seed}: {report.reason}"
        # The recovery at start sealed what the killed writers had written: every acknowledged row is vouched for.
        assert (0, False) == (report.unsigned_tail, report.torn_tail), f"seed {seed}: {report}"
        unvouched = [a for a in acked if min(found[id(a)]) > report.rows]
        assert [] == unvouched, f"seed {seed}: {len(unvouched)} acknowledged row(s) no signature vouches for"
        assert [] == sorted(str(p) for p in workspace.rglob("*.aleph-tmp")), f"seed {seed}: temporary files left"
        assert [] == list((data / "files" / "inflight").iterdir())


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
