"""Interop: an ACP one-file edit through the chokepoint, and A2A send-to-first-update, against bare baselines.

Run: python bench/bench_interop.py [rounds]   (default 30)
Targets (aleph-interop issue): the ACP overhead printed as a ratio; A2A send-to-first-update <= 1.2x the bare
SDK. Baselines are measured in the same run:
- ACP: the same SDK-built agent in a live session writes the file itself (isolation "none", ``direct``)
  against the same agent asking Aleph to write it (fs/write_text_file -> file_write through the chokepoint,
  ledgered, under bubblewrap).
- A2A: the SDK's own client (create_client + send_message, to the first streamed event) against
  ``a2a_delegate`` to its first progress chunk, both against one SDK server under uvicorn on loopback.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _util import percentile  # noqa: E402

import aleph  # noqa: E402
from tests.interop.conftest import acp_config, runtime  # noqa: E402
from tests.interop.remote import RemoteAgent  # noqa: E402


async def acp_rounds(ws: Path, isolation: str, verb: str, rounds: int) -> list[float]:
    async with runtime(ws, acp_config(isolation=isolation)) as rt:
        service = rt.tool_service(agent="bench", turn=aleph.TurnContext(session_key="b"), tier="full")
        first = await service.call("acp_delegate", {"task": "say ready", "agent": "script"})
        session = json.loads(first.output)["session_id"]
        samples = []
        for i in range(rounds):
            start = time.perf_counter()
            result = await service.call("acp_delegate", {"task": f"{verb} f{i}.txt x", "session_id": session})
            samples.append((time.perf_counter() - start) * 1e3)
            assert result.success and "failed" not in json.loads(result.output)["reply"], result
        return samples


async def a2a_bare(url: str, rounds: int) -> list[float]:
    import a2a.client
    from a2a.helpers.proto_helpers import new_message, new_text_part
    from a2a.types import Role, SendMessageRequest

    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        client = await a2a.client.create_client(url, client_config=a2a.client.ClientConfig(streaming=True))
        message = new_message([new_text_part("summarise")], role=Role.ROLE_USER)
        async for _response in client.send_message(SendMessageRequest(message=message)):
            samples.append((time.perf_counter() - start) * 1e3)
            break
        await client.close()
    return samples


class FirstChunk(aleph.ToolProgressCallback):
    def __init__(self) -> None:
        self.at: float | None = None

    def on_tool_start(self, tool_name: str, args_summary: str) -> None: ...

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None: ...

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        if self.at is None:
            self.at = time.perf_counter()


async def a2a_aleph(ws: Path, url: str, rounds: int) -> list[float]:
    async with runtime(ws) as rt:
        service = rt.tool_service(agent="bench", turn=aleph.TurnContext(session_key="b"), tier="full")
        assert (await service.call("a2a_agents", {"action": "add", "name": "remote", "url": url})).success
        samples = []
        for _ in range(rounds):
            probe = FirstChunk()
            previous = aleph.set_tool_progress_handler(probe)
            start = time.perf_counter()
            result: Any = await service.call("a2a_delegate", {"agent": "remote", "task": "summarise"})
            aleph.set_tool_progress_handler(previous)
            assert result.success and probe.at is not None, result
            samples.append((probe.at - start) * 1e3)
        return samples


def line(label: str, samples: list[float]) -> float:
    p50 = percentile(samples, 0.5)
    print(f"{label:<58} p50 {p50:8.2f} ms  p95 {percentile(samples, 0.95):8.2f} ms")
    return p50


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("direct", "aleph", "a2a"):
            (Path(tmp) / name).mkdir()
        direct = await acp_rounds(Path(tmp) / "direct", "none", "direct", rounds)
        through = await acp_rounds(Path(tmp) / "aleph", "bubblewrap", "write", rounds)
        remote = RemoteAgent()
        try:
            bare = await a2a_bare(remote.url, rounds)
            ours = await a2a_aleph(Path(tmp) / "a2a", remote.url, rounds)
        finally:
            remote.stop()
    d, t = (
        line("ACP one-file edit, agent writes it itself", direct),
        line("ACP one-file edit through Aleph's file_write", through),
    )
    print(f"  ACP overhead: {t / d:.2f}x ({t - d:+.2f} ms a prompt)")
    b, o = line("A2A send to first update, bare SDK client", bare), line("A2A send to first update, a2a_delegate", ours)
    print(f"  A2A ratio: {o / b:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
