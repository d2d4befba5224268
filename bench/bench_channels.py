"""Channels: ask_user's round trip on a local IRC server and through MCP elicitation, and pairing end to end.

Run: python bench/bench_channels.py [rounds]   (default 50; needs Debian's ngircd: scripts/setup-system)
Target (aleph-channels issue): ask_user round trip <= 50 ms plus the transport's own latency.

- IRC: the baseline is the server's own round trip measured in the same run: one raw client sends a
  PRIVMSG to another, which answers at once. The measured call is ask_user through the full chokepoint
  (rt.tool_service): the bot sends the question, the paired person answers at once, the call returns.
- MCP: ``aleph serve`` over Streamable HTTP on loopback (in this process) and the SDK's client, on both
  protocol eras. The baseline is a plain ``tools/call`` of a tool that returns at once, through the same
  server and chokepoint; the measured call is ask_user answered at once by the client's elicitation
  handler (legacy: ``elicitation/create`` inside the call; 2026-07-28: ``input_required`` and a retry,
  which is a second HTTP round trip by design, so its figure is also shown against two plain calls).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aleph_channels.plugin  # noqa: E402
from _util import percentile  # noqa: E402

import aleph  # noqa: E402
from aleph.testing import isolated_runtime  # noqa: E402
from tests.channels.conftest import irc_config  # noqa: E402
from tests.channels.servers import IrcPerson, Ngircd  # noqa: E402

CODE = re.compile(r"pairing code is ([A-Z0-9]{4}-[A-Z0-9]{4})")


async def bare_round_trip(port: int, rounds: int) -> list[float]:
    a, b = await IrcPerson("pinger").connect(port), await IrcPerson("ponger").connect(port)
    samples = []
    for i in range(rounds):
        start = time.perf_counter()
        a.say("ponger", f"ping {i}")
        await b.heard()
        b.say("pinger", f"pong {i}")
        await a.heard()
        samples.append((time.perf_counter() - start) * 1e3)
    await a.close()
    await b.close()
    return samples


async def through_aleph(port: int, ws: Path, rounds: int) -> tuple[list[float], float]:
    async with isolated_runtime(ws, aleph_channels.plugin, config_toml=irc_config(port)) as rt:
        hub = aleph_channels.channel_hub(rt)
        await hub.ensure_started("irc")
        bob = await IrcPerson("bob").connect(port)
        op = rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="op", caller_role="operator"))
        start = time.perf_counter()
        bob.say("alephbot", "hello")
        code = CODE.search(await bob.heard()).group(1)  # type: ignore[union-attr]
        assert (await op.call("channel_pairing", {"action": "approve", "code": code})).success
        bob.say("alephbot", "first message")
        assert await hub.receive("alice", timeout=30) is not None
        pairing_ms = (time.perf_counter() - start) * 1e3
        turn = aleph.TurnContext(session_key="b", channel_id="irc", conversation_id="bob")
        service = rt.tool_service(agent="alice", channel="irc", turn=turn)

        async def answer() -> None:
            await bob.heard()
            bob.say("alephbot", "yes")

        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            responder = asyncio.ensure_future(answer())
            result = await service.call("ask_user", {"question": "Proceed?", "timeout_s": 30})
            samples.append((time.perf_counter() - start) * 1e3)
            await responder
            assert result.success and json.loads(result.output)["answer"] == "yes", result
        await bob.close()
        return samples, pairing_ms


async def through_mcp(ws: Path, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """(plain tools/call, ask_user) samples in ms per protocol era, over aleph serve on loopback HTTP."""
    import anyio
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from aleph._mcp.serve import AlephMcpServer, bind_loopback

    @aleph.tool(idempotent=True, inline=True)
    def ping(n: int = 0) -> int:
        """Return n (the baseline: a call that does nothing)."""
        return n

    async def answer(context: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    out: dict[str, tuple[list[float], list[float]]] = {}
    sock = bind_loopback("127.0.0.1", 0)
    started = anyio.Event()
    async with isolated_runtime(ws, aleph_channels.plugin) as rt, anyio.create_task_group() as tg:
        rt.register(ping)
        tg.start_soon(lambda: AlephMcpServer(rt).run_http(sock, ready=lambda _port: started.set()))
        await started.wait()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        for era, mode in (("2026-07-28", "auto"), ("legacy", "legacy")):
            async with httpx2.AsyncClient(timeout=30) as http:
                async with Client(
                    streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=answer
                ) as c:
                    for _ in range(3):  # warm up both paths
                        await c.call_tool("ping", {"n": 1})
                        await c.call_tool("ask_user", {"question": "Proceed?"})
                    plain, asked = [], []
                    for i in range(rounds):
                        start = time.perf_counter()
                        result = await c.call_tool("ping", {"n": i})
                        plain.append((time.perf_counter() - start) * 1e3)
                        assert not result.is_error
                        start = time.perf_counter()
                        result = await c.call_tool("ask_user", {"question": "Proceed?"})
                        asked.append((time.perf_counter() - start) * 1e3)
                        assert not result.is_error and '"answer":"yes"' in result.content[0].text.replace(" ", "")  # type: ignore[union-attr]
                    out[era] = (plain, asked)
        tg.cancel_scope.cancel()
    sock.close()
    return out


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = Ngircd(Path(tmp))
        try:
            ws = Path(tmp) / "ws"
            ws.mkdir()
            bare = await bare_round_trip(server.port, rounds)
            aleph_ms, pairing_ms = await through_aleph(server.port, ws, rounds)
        finally:
            server.stop()
        mcp_ws = Path(tmp) / "mcp-ws"
        mcp_ws.mkdir()
        mcp = await through_mcp(mcp_ws, rounds)
    b50, a50 = percentile(bare, 0.5), percentile(aleph_ms, 0.5)
    print(f"IRC round trip, two bare clients     p50 {b50:7.2f} ms  p95 {percentile(bare, 0.95):7.2f} ms")
    print(f"ask_user through the chokepoint      p50 {a50:7.2f} ms  p95 {percentile(aleph_ms, 0.95):7.2f} ms")
    print(f"ask_user overhead over the server    p50 {a50 - b50:7.2f} ms  (target <= 50 ms)  ratio {a50 / b50:.2f}x")
    print(f"pairing end to end (code, approve, first message delivered): {pairing_ms:.1f} ms")
    for era, (plain, asked) in mcp.items():
        p50, q50 = percentile(plain, 0.5), percentile(asked, 0.5)
        trips = 2 if era == "2026-07-28" else 1
        print(f"MCP {era:10}  plain tools/call          p50 {p50:7.2f} ms  p95 {percentile(plain, 0.95):7.2f} ms")
        print(f"MCP {era:10}  ask_user (elicitation)    p50 {q50:7.2f} ms  p95 {percentile(asked, 0.95):7.2f} ms")
        print(
            f"MCP {era:10}  ask_user overhead         p50 {q50 - trips * p50:7.2f} ms over {trips} plain call(s)"
            f"  (target <= 50 ms)  ratio {q50 / p50:.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))
