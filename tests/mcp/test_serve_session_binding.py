"""A legacy HTTP session's grants belong to the client that opened it, not to whoever presents its id.

Alice approves ``text_stats`` "for this session" on a 2025 (legacy) Streamable HTTP session. Bob sends a
``tools/call`` carrying alice's ``Mcp-Session-Id`` with his own ``Authorization`` (or none): the 2026-07-28
era binds an approval's state to the request's ``Authorization`` (docs/mcp.md), and the legacy era now
binds a session's grants the same way. Bob's call ran on alice's grant; now he is asked about it (a client
answers for its own calls) and his decline refuses it, while alice's grant still covers alice. The server
runs in this process (the SDK app under uvicorn on loopback); alice is the SDK's ``Client``, bob raw
``httpx2`` requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .test_serve_attacks import ARGS, Human, serving

pytestmark = pytest.mark.anyio

LEGACY = "2025-06-18"


def call(rid: int) -> bytes:
    params = {"name": "text_stats", "arguments": ARGS}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


async def bobs_call(http: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """Bob's ``tools/call`` on the session: every message the server sends on it; bob declines what he is asked."""
    seen: list[dict[str, Any]] = []
    async with http.stream("POST", url, content=call(91), headers=headers) as response:
        async for line in response.aiter_lines():
            if not (line.startswith("data:") and line[5:].strip()):
                continue
            message = json.loads(line[5:])
            seen.append(message)
            if message.get("method") == "elicitation/create":
                decline = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "decline"}}
                await http.post(url, content=json.dumps(decline).encode(), headers=headers)
            elif message.get("id") == 91:
                break
    return seen


@pytest.mark.parametrize("bob_token", ["bob", None])
async def test_another_client_presenting_a_legacy_session_id_gets_none_of_its_grants(
    workspace: Path, bob_token: str | None
) -> None:
    seen: list[str] = []

    async def keep_session(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            seen.append(response.headers["mcp-session-id"])

    alice = Human({"decision": "approve_for_session"})
    async with serving(workspace) as url:
        hooks = {"response": [keep_session]}
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer alice"}, event_hooks=hooks, timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="legacy", elicitation_callback=alice) as a:
                assert not (await a.call_tool("text_stats", ARGS)).is_error
                assert 1 == len(alice.asked)
                headers = {
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                    "Mcp-Session-Id": seen[-1],
                    "MCP-Protocol-Version": LEGACY,
                }
                if bob_token:
                    headers["Authorization"] = f"Bearer {bob_token}"
                async with httpx2.AsyncClient(timeout=30) as bob:
                    seen = await bobs_call(bob, url, headers)
                # Bob's call did not run on alice's grant: the server asked about it (on bob's own stream),
                # and bob's decline refused it.
                assert ["elicitation/create", None] == [m.get("method") for m in seen]
                assert seen[-1]["result"]["isError"], f"bob's call ran on alice's session grant: {seen[-1]}"
                # Alice's own grant still covers alice's call, without asking her again.
                assert not (await a.call_tool("text_stats", ARGS)).is_error
                assert 1 == len(alice.asked)
