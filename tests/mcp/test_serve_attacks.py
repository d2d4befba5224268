"""``aleph serve`` under attack, on both protocol eras: grants and approval state never cross clients, and no
frame a client sends (oversized, malformed, deeply nested, not UTF-8) stops the server from serving the next one.

The HTTP server runs in this process on a loopback socket (the real SDK app under uvicorn); clients are the
SDK's own ``Client`` or raw ``httpx2`` requests. The stdio attacks drive a real ``aleph serve`` child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import aleph
from aleph._mcp._serve_frames import MIN_FRAME_BYTES
from aleph._mcp.serve import AlephMcpServer, bind_loopback

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")
ASK = '[policies.tool_permissions.overrides]\ntext_stats = "ask"\n'
ARGS = {"text": "one two"}
APPROVE = {"aleph_approval": types.ElicitResult(action="accept", content={"decision": "approve_once"})}


class Human:
    """An elicitation handler that answers from a script and keeps what it was shown."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(request)
        answer = self.answers.pop(0) if self.answers else "decline"
        if isinstance(answer, str):
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=answer)


@asynccontextmanager
async def serving(workspace: Path, config: str = ASK) -> AsyncIterator[str]:
    """``aleph serve --http`` in this process; yields its URL."""
    import aleph_example.plugin

    (workspace / "aleph.toml").write_text(config)
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, plugins=[aleph_example.plugin], entry_points=False)
    sock = bind_loopback("127.0.0.1", 0)
    port = sock.getsockname()[1]
    started = anyio.Event()
    async with rt, anyio.create_task_group() as tg:
        server = AlephMcpServer(rt)
        tg.start_soon(lambda: server.run_http(sock, ready=lambda _port: started.set()))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            tg.cancel_scope.cancel()
    sock.close()


@asynccontextmanager
async def client(url: str, mode: str, human: Human | None = None, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, elicitation_callback=human) as c:
            yield c


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def first_round(c: Client) -> types.InputRequiredResult:
    first = await c.session.call_tool("text_stats", ARGS, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
    return first


class TestGrantsStayWithTheirConnection:
    async def test_a_session_grant_on_one_legacy_connection_does_not_cover_another(self, workspace: Path) -> None:
        alice, bob = Human({"decision": "approve_for_session"}), Human({"decision": "deny"})
        async with serving(workspace) as url:
            async with client(url, "legacy", alice) as a, client(url, "legacy", bob) as b:
                assert not (await a.call_tool("text_stats", ARGS)).is_error
                assert not (await a.call_tool("text_stats", ARGS)).is_error  # alice's grant holds for alice
                refused = await b.call_tool("text_stats", ARGS)  # bob's own human is asked, and says no
        assert refused.is_error and (len(alice.asked), len(bob.asked)) == (1, 1)

    async def test_the_modern_http_era_keeps_no_session_between_calls(self, workspace: Path) -> None:
        human = Human({"decision": "approve_once"}, {"decision": "approve_once"})
        async with serving(workspace) as url, client(url, "auto", human) as c:
            assert not (await c.call_tool("text_stats", ARGS)).is_error
            assert not (await c.call_tool("text_stats", ARGS)).is_error
        assert len(human.asked) == 2
        offered = human.asked[0].requested_schema["properties"]["decision"]["enum"]  # type: ignore[union-attr]
        assert "approve_for_session" not in offered  # no session on this wire: not offered as if there were

    async def test_an_answer_for_the_session_is_refused_where_it_was_not_offered(self, workspace: Path) -> None:
        async with serving(workspace) as url, client(url, "auto", Human()) as c:
            state = (await first_round(c)).request_state
            forged_choice = {
                "aleph_approval": types.ElicitResult(action="accept", content={"decision": "approve_for_session"})
            }
            result = await c.session.call_tool(
                "text_stats", ARGS, input_responses=forged_choice, request_state=state, allow_input_required=True
            )
        assert isinstance(result, types.CallToolResult) and result.is_error
        assert "not one of the offered choices" in text(result)


class TestRequestState:
    async def test_a_state_presented_by_another_client_is_refused_and_stays_usable(self, workspace: Path) -> None:
        async with serving(workspace) as url:
            async with client(url, "auto", Human(), token="alice") as a, client(url, "auto", Human(), token="bob") as b:
                state = (await first_round(a)).request_state
                stolen = await b.session.call_tool(
                    "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
                )
                mine = await a.session.call_tool(
                    "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
                )
        assert isinstance(stolen, types.CallToolResult) and stolen.is_error
        assert "asked by another server or session" in text(stolen)
        assert isinstance(mine, types.CallToolResult) and not mine.is_error  # the refusal did not burn alice's answer

    async def test_a_state_of_a_client_that_left_is_refused_to_the_next_one(self, workspace: Path) -> None:
        async with serving(workspace) as url:
            async with client(url, "auto", Human(), token="same") as a:
                state = (await first_round(a)).request_state
            async with client(url, "auto", Human(), token="other") as b:
                result = await b.session.call_tool(
                    "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
                )
        assert isinstance(result, types.CallToolResult) and result.is_error

    async def test_a_replayed_answer_is_refused_over_http(self, workspace: Path) -> None:
        async with serving(workspace) as url, client(url, "auto", Human()) as c:
            state = (await first_round(c)).request_state
            once = await c.session.call_tool(
                "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
            )
            again = await c.session.call_tool(
                "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
            )
        assert isinstance(once, types.CallToolResult) and not once.is_error
        assert isinstance(again, types.CallToolResult) and "already used" in text(again)

    @pytest.mark.parametrize(
        "forged",
        ["", "not-base64!", "A" * 100, json.dumps({"v": 2, "fp": "x", "session": "", "nonce": "n", "offered": []})],
        ids=["empty", "garbage", "random", "plaintext"],
    )
    async def test_a_forged_state_is_refused(self, workspace: Path, forged: str) -> None:
        async with serving(workspace) as url, client(url, "auto", Human()) as c:
            try:
                result: Any = await c.session.call_tool(
                    "text_stats", ARGS, input_responses=APPROVE, request_state=forged, allow_input_required=True
                )
            except MCPError as exc:
                result = exc
            # Whatever the shape of the refusal, the call did not run on a forged answer.
            assert isinstance(result, MCPError) or isinstance(result, types.InputRequiredResult) or result.is_error
            assert (await c.call_tool("text_stats", {"text": "x"})).is_error  # still asks, nobody approved


HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
}


class TestHostileFramesOverHttp:
    @pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
    async def test_an_oversized_body_is_refused_and_the_server_keeps_serving(self, workspace: Path, era: str) -> None:
        headers = HEADERS if era != "legacy" else {k: v for k, v in HEADERS.items() if k != "MCP-Protocol-Version"}
        async with serving(workspace, "") as url:
            async with httpx2.AsyncClient(timeout=60) as http:
                big = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"' + b"x" * (MIN_FRAME_BYTES * 2)
                response = await http.post(url, content=big + b'"}}', headers=headers)
                assert response.status_code == 413
            async with client(url, "auto" if era != "legacy" else "legacy") as c:
                assert not (await c.call_tool("text_stats", {"text": "still here"})).is_error

    @pytest.mark.parametrize(
        "body",
        [
            b"{",
            b"[" * 200_000 + b"]" * 200_000,
            b'{"jsonrpc":"2.0","id":1,"method":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}",
            b"\xff\xfe\x00garbage",
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\udcff","arguments":{}}}',
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"text_stats","arguments":[]}}',
        ],
        ids=["truncated", "deep-array", "deep-object", "not-utf8", "lone-surrogate-name", "arguments-not-object"],
    )
    async def test_a_malformed_body_gets_an_error_and_the_server_keeps_serving(
        self, workspace: Path, body: bytes
    ) -> None:
        async with serving(workspace, "") as url:
            async with httpx2.AsyncClient(timeout=60) as http:
                response = await http.post(url, content=body, headers={**HEADERS, "Mcp-Method": "tools/call"})
            assert response.status_code < 500 or response.status_code == 413
            if response.status_code == 200:
                assert "error" in response.text.lower() or '"isError":true' in response.text
            async with client(url, "auto") as c:
                assert not (await c.call_tool("text_stats", {"text": "still here"})).is_error


def _stdio_serve(workspace: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return subprocess.Popen(
        [ALEPH, "serve"], cwd=workspace, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _request(rid: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


def _read_answer(proc: subprocess.Popen[bytes], rid: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, f"the server closed its output before answering request {rid}"
        message = json.loads(line)
        if message.get("id") == rid:
            return message


class TestHostileFramesOverStdio:
    def test_oversized_and_malformed_lines_are_dropped_and_the_next_request_is_answered(self, workspace: Path) -> None:
        (workspace / "aleph.toml").write_text("")
        proc = _stdio_serve(workspace)
        assert proc.stdin is not None
        try:
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            proc.stdin.write(_request(1, "initialize", init))
            proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            proc.stdin.flush()
            assert "result" in _read_answer(proc, 1)
            hostile = [
                b"x" * (MIN_FRAME_BYTES * 3) + b"\n",  # oversized: read through in pieces, dropped
                b"{\n",
                b"[" * 100_000 + b"\n",
                b"\xff\xfe\xfd\n",
                b'{"jsonrpc":"2.0","id":"x","method":5}\n',
            ]
            for frame in hostile:
                proc.stdin.write(frame)
            proc.stdin.write(_request(2, "tools/call", {"name": "text_stats", "arguments": {"text": "a b c"}}))
            proc.stdin.flush()
            answer = _read_answer(proc, 2)
            assert answer["result"]["isError"] is False
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()


class TestAnswersBelongToTheirSession:
    async def test_a_client_cannot_answer_another_sessions_approval_question(self, workspace: Path) -> None:
        """Bob posts approvals for every question id on his own legacy session while alice's is open: alice's
        call waits for alice's human, who declines, so it does not run."""
        forged_sent = anyio.Event()

        class SlowHuman(Human):
            async def __call__(self, context: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
                self.asked.append(request)
                with anyio.fail_after(30):
                    await forged_sent.wait()
                return types.ElicitResult(action="decline")

        alice = SlowHuman()
        async with serving(workspace) as url:

            async def bob() -> None:
                legacy = {k: v for k, v in HEADERS.items() if k != "MCP-Protocol-Version"}
                init = {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "bob", "version": "1"},
                }
                async with httpx2.AsyncClient(timeout=30) as http:
                    first = await http.post(url, content=_request(1, "initialize", init), headers=legacy)
                    session = first.headers["mcp-session-id"]
                    headers = {**legacy, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
                    await http.post(
                        url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=headers
                    )
                    with anyio.fail_after(30):
                        while not alice.asked:
                            await anyio.sleep(0.02)
                    approve = {"action": "accept", "content": {"decision": "approve_once"}}
                    for rid in range(0, 8):
                        body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": approve}).encode()
                        await http.post(url, content=body, headers=headers)
                forged_sent.set()

            async with client(url, "legacy", alice) as a, anyio.create_task_group() as tg:
                tg.start_soon(bob)
                result = await a.call_tool("text_stats", ARGS)
        assert result.is_error and "did not approve" in text(result)
        assert len(alice.asked) == 1
