"""Approval over `aleph serve` with the official SDK client, on both protocol eras.

2026-07-28 (`mode="auto"`, the SDK's default) carries the question as an `input_required` result and the
client retries with the answer; the legacy handshake sends `elicitation/create` during the call. Both ask
the client's elicitation handler and honour once / session / always / deny with a reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")
ASK = '[policies.tool_permissions.overrides]\ntext_stats = "ask"\n'
ARGS = {"text": "one two"}


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
        answer = self.answers.pop(0)
        if isinstance(answer, str):  # "decline" or "cancel"
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=answer)


@pytest.fixture
def asking(workspace: Path) -> Path:
    (workspace / "aleph.toml").write_text(ASK)
    return workspace


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_approve_once_runs_the_call_and_asks_again_next_time(asking: Path, mode: str) -> None:
    human = Human({"decision": "approve_once"}, {"decision": "approve_once"})
    async with Client(params(asking), mode=mode, elicitation_callback=human) as client:
        assert ("2026-07-28" == client.protocol_version) == (mode == "auto")
        first = await client.call_tool("text_stats", ARGS)
        assert not first.is_error, text(first)
        assert '"words":2' in text(first)
        second = await client.call_tool("text_stats", ARGS)
        assert not second.is_error, text(second)
    assert 2 == len(human.asked)
    shown = human.asked[0]
    assert isinstance(shown, types.ElicitRequestFormParams)
    assert "text_stats" in shown.message and "text=one two" in shown.message
    choices = shown.requested_schema["properties"]["decision"]["enum"]
    assert ["approve_once", "approve_for_session", "approve_always", "deny"] == choices


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_deny_with_a_reason_refuses_and_tells_the_model_why(asking: Path, mode: str) -> None:
    human = Human({"decision": "deny", "reason": "not now"})
    async with Client(params(asking), mode=mode, elicitation_callback=human) as client:
        result = await client.call_tool("text_stats", ARGS)
    assert result.is_error
    assert "the user did not approve running `text_stats`" in text(result)
    assert 'The user said: "not now"' in text(result)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_decline_is_a_denial(asking: Path, mode: str) -> None:
    async with Client(params(asking), mode=mode, elicitation_callback=Human("decline")) as client:
        result = await client.call_tool("text_stats", ARGS)
    assert result.is_error and "did not approve" in text(result)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_approve_for_session_covers_the_same_call_only(asking: Path, mode: str) -> None:
    human = Human({"decision": "approve_for_session"}, {"decision": "deny"})
    async with Client(params(asking), mode=mode, elicitation_callback=human) as client:
        assert not (await client.call_tool("text_stats", ARGS)).is_error
        assert not (await client.call_tool("text_stats", ARGS)).is_error  # not asked again
        other = await client.call_tool("text_stats", {"text": "different words"})  # asked: other arguments
        assert other.is_error
    assert 2 == len(human.asked)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_without_elicitation_gets_a_refusal_naming_what_it_lacks(asking: Path, mode: str) -> None:
    async with Client(params(asking), mode=mode) as client:
        result = await client.call_tool("text_stats", ARGS)
    assert result.is_error
    assert "did not declare the elicitation capability" in text(result)
    assert "the call did not run" in text(result)


async def _first_round(client: Client, arguments: dict[str, Any]) -> types.InputRequiredResult:
    first = await client.session.call_tool("text_stats", arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None and "aleph_approval" in first.input_requests
    assert first.request_state is not None
    return first


APPROVE = {"aleph_approval": types.ElicitResult(action="accept", content={"decision": "approve_once"})}


async def test_the_request_state_is_sealed_and_checked(asking: Path) -> None:
    async with Client(params(asking), mode="auto", elicitation_callback=Human()) as client:
        first = await _first_round(client, ARGS)
        state = first.request_state
        assert state is not None and "text_stats" not in state  # sealed, not readable

        forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "text_stats", ARGS, input_responses=APPROVE, request_state=forged, allow_input_required=True
            )
        # The answer binds to the arguments it was shown.
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "text_stats", {"text": "other"}, input_responses=APPROVE, request_state=state, allow_input_required=True
            )
        done = await client.session.call_tool(
            "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
        )
        assert isinstance(done, types.CallToolResult) and not done.is_error
        # "Once" means once: the same answer cannot be replayed.
        again = await client.session.call_tool(
            "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
        )
        assert isinstance(again, types.CallToolResult) and again.is_error
        assert "already used" in text(again)


async def test_state_from_another_server_is_refused(asking: Path) -> None:
    async with Client(params(asking), mode="auto", elicitation_callback=Human()) as client:
        state = (await _first_round(client, ARGS)).request_state
    async with Client(params(asking), mode="auto", elicitation_callback=Human()) as client:
        result = await client.session.call_tool(
            "text_stats", ARGS, input_responses=APPROVE, request_state=state, allow_input_required=True
        )
    assert isinstance(result, types.CallToolResult) and result.is_error
    assert "asked by another server or session" in text(result)
