"""ask_user under `aleph serve`: the question reaches the MCP client's user through elicitation, both eras.

A real `aleph serve` child over stdio (the channels family loaded through its entry point) and the SDK's
own client: legacy clients get `elicitation/create` while the call is open, 2026-07-28 clients get
`input_required` and retry with the answer. One test serves Streamable HTTP in this process to read the
signed ledger the call wrote.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aleph_channels.plugin
import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import aleph
from aleph._mcp.serve import AlephMcpServer, bind_loopback
from aleph.testing import isolated_runtime

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")
ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])


def params(workspace: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(workspace), env=env)


class Human:
    """An elicitation handler that answers from a script and keeps what it was shown."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(request)
        answer = self.answers.pop(0) if self.answers else "cancel"
        if isinstance(answer, str):
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=answer)


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def out(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    return json.loads(text(result))  # type: ignore[no-any-return]


@ERAS
async def test_a_choice_is_asked_of_the_clients_user_and_answered(workspace: Path, mode: str) -> None:
    human = Human({"answer": "stable"})
    async with Client(params(workspace), mode=mode, elicitation_callback=human) as client:
        assert ("2026-07-28" == client.protocol_version) == (mode == "auto")
        result = await client.call_tool(
            "ask_user", {"question": "Deploy which build?", "choices": ["canary", "stable"]}
        )
    assert out(result) == {
        "answered": True,
        "outcome": "accepted",
        "channel": "mcp",
        "untrusted": True,
        "answer": "stable",
    }
    (shown,) = human.asked
    assert isinstance(shown, types.ElicitRequestFormParams) and shown.message == "Deploy which build?"
    assert shown.requested_schema["properties"]["answer"]["enum"] == ["canary", "stable"]


@ERAS
async def test_a_form_comes_back_typed(workspace: Path, mode: str) -> None:
    form = [
        {"name": "replicas", "label": "How many replicas?", "kind": "number"},
        {"name": "confirm", "label": "Go ahead?", "kind": "yes_no"},
    ]
    human = Human({"replicas": 3, "confirm": True})
    async with Client(params(workspace), mode=mode, elicitation_callback=human) as client:
        result = await client.call_tool("ask_user", {"question": "Scale-up", "form": form})
    assert out(result)["form"] == {"replicas": 3, "confirm": True}
    schema = human.asked[0].requested_schema  # type: ignore[union-attr]
    assert schema["properties"]["confirm"] == {"type": "boolean", "title": "Go ahead?"}
    assert schema["properties"]["replicas"]["type"] == "number"


@ERAS
@pytest.mark.parametrize(
    ("action", "reason"), [("decline", "declined to answer"), ("cancel", "dismissed the question")]
)
async def test_decline_and_cancel_are_told_to_the_model_plainly(
    workspace: Path, mode: str, action: str, reason: str
) -> None:
    async with Client(params(workspace), mode=mode, elicitation_callback=Human(action)) as client:
        result = await client.call_tool("ask_user", {"question": "Ship it?"})
    answer = out(result)
    assert answer["answered"] is False and answer["outcome"] == ("declined" if action == "decline" else "cancelled")
    assert reason in answer["reason"]


@ERAS
async def test_a_wrong_typed_answer_is_an_error_naming_the_field(workspace: Path, mode: str) -> None:
    form = [{"name": "replicas", "label": "How many?", "kind": "number"}]
    async with Client(params(workspace), mode=mode, elicitation_callback=Human({"replicas": "lots"})) as client:
        result = await client.call_tool("ask_user", {"question": "Scale", "form": form})
    assert result.is_error and "field 'replicas' must be a number" in text(result)


@ERAS
async def test_a_client_without_elicitation_cannot_be_asked(workspace: Path, mode: str) -> None:
    async with Client(params(workspace), mode=mode) as client:
        result = await client.call_tool("ask_user", {"question": "Anyone?"})
    assert result.is_error
    assert "cannot be asked: it did not declare the elicitation capability" in text(result)


async def test_a_forged_or_replayed_answer_is_refused(workspace: Path) -> None:
    answer = {"aleph_question": types.ElicitResult(action="accept", content={"answer": "yes"})}
    arguments = {"question": "Proceed?"}
    async with Client(params(workspace), mode="auto", elicitation_callback=Human()) as client:
        first = await client.session.call_tool("ask_user", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        state = first.request_state
        forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "ask_user", arguments, input_responses=answer, request_state=forged, allow_input_required=True
            )
        with pytest.raises(MCPError, match="Invalid or expired requestState"):  # bound to the question asked
            await client.session.call_tool(
                "ask_user", {"question": "Delete?"}, input_responses=answer, request_state=state
            )
        done = await client.session.call_tool("ask_user", arguments, input_responses=answer, request_state=state)
        assert isinstance(done, types.CallToolResult) and out(done)["answer"] == "yes"
        again = await client.session.call_tool("ask_user", arguments, input_responses=answer, request_state=state)
        assert isinstance(again, types.CallToolResult) and again.is_error and "already used" in text(again)


@asynccontextmanager
async def serving(workspace: Path) -> AsyncIterator[tuple[str, aleph.Aleph]]:
    sock = bind_loopback("127.0.0.1", 0)
    started = anyio.Event()
    async with isolated_runtime(workspace, aleph_channels.plugin) as rt, anyio.create_task_group() as tg:
        tg.start_soon(lambda: AlephMcpServer(rt).run_http(sock, ready=lambda _port: started.set()))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", rt
        finally:
            tg.cancel_scope.cancel()
    sock.close()


@ERAS
async def test_the_answer_is_ledgered_on_the_call_but_a_secret_field_never_is(workspace: Path, mode: str) -> None:
    form = [
        {"name": "user", "label": "Account", "kind": "text"},
        {"name": "otp", "label": "One-time code", "kind": "text", "secret": True},
    ]
    human = Human({"user": "ada", "otp": "924117"})
    async with serving(workspace) as (url, rt), httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=human) as c:
            result = await c.call_tool("ask_user", {"question": "Log in", "form": form})
        assert out(result)["form"] == {"user": "ada", "otp": "924117"}  # the model gets what it asked for
        assert rt.chokepoint.ledger is not None
        rows = [r for r in rt.chokepoint.ledger.rows("default") if r.target == "ask_user"]
        assert rows and rows[-1].refs is not None
        assert rows[-1].refs["human_outcome"] == "accepted"
        assert json.loads(rows[-1].refs["human_answer"]) == {"user": "ada"}
        assert "924117" not in json.dumps([(r.refs, r.detail) for r in rows], default=str)
