"""aleph.integrations.openai_agents against the real Agents SDK, driven by an offline Model of our own.

The SDK's own tests drive runs with a fake ``Model``; this one makes the scripted tool calls once and then
answers with every tool output it was sent. No network, no API key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, RunState, Usage, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import aleph
from aleph.integrations.openai_agents import AlephAgentTools

from .conftest import Env, build_tools

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_trace_export() -> None:
    # The SDK exports traces to OpenAI by default; these runs are offline.
    set_tracing_disabled(True)


class ScriptedModel(Model):
    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        self.calls = calls
        self.offered: list[list[str]] = []
        self.outputs: list[str] = []

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.offered.append(sorted(t.name for t in tools))
        items = input if isinstance(input, list) else []
        outputs = [
            str(i.get("output")) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if not outputs:
            out: list[Any] = [
                ResponseFunctionToolCall(
                    id=f"fc-{n}",
                    call_id=f"call-{n}",
                    name=name,
                    arguments=json.dumps(args),
                    type="function_call",
                    status="completed",
                )
                for n, (name, args) in enumerate(self.calls)
            ]
        else:
            self.outputs = outputs
            text = ResponseOutputText(text=" | ".join(outputs), type="output_text", annotations=[])
            out = [ResponseOutputMessage(id="m", content=[text], role="assistant", status="completed", type="message")]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("these tests do not stream")


@dataclass
class Chat:
    session_key: str


async def run(env: Env, model: ScriptedModel, **service: Any) -> tuple[Agent[Any], Any, AlephAgentTools]:
    tools = AlephAgentTools(env.service(**service))
    agent = Agent(name="main", model=model, tools=await tools.tools())
    result = await Runner.run(agent, "go", context=Chat("chat-1"))
    return agent, result, tools


async def test_an_allowed_tool_runs_once_and_leaves_one_ledger_row(env: Env) -> None:
    model = ScriptedModel(("note_add", {"text": "milk"}))
    _, result, _ = await run(env, model)
    assert result.final_output == "added note 1"
    assert env.book.notes == ["milk"]
    assert await env.rows() == [("tool_call", "note_add", "ok")]


async def test_a_denied_tool_is_absent_and_a_call_to_it_is_refused(env: Env) -> None:
    model = ScriptedModel(("notes_list", {}))
    await run(env, model)
    assert model.offered[0] == sorted(d.name for d in await env.service().list())
    assert "vault_open" not in model.offered[0]
    stray = AlephAgentTools(env.service())._function_tool(
        aleph.ToolDefinition("vault_open", "Open the vault.", {"type": "object", "properties": {}})
    )
    agent = Agent(name="main", model=ScriptedModel(("vault_open", {})), tools=[stray])
    result = await Runner.run(agent, "open", context=Chat("chat-1"))
    assert "permission denied" in result.final_output
    assert env.book.vault_opened == 0
    assert await env.rows() == [("tool_denied", "vault_open", "denied")]


async def test_an_ask_interrupts_the_run_and_resumes_on_approve(env: Env) -> None:
    env.book.notes.extend(["a", "b"])
    agent, result, _ = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    [item] = result.interruptions
    assert item.tool_name == "note_delete"
    assert env.book.notes == ["a", "b"]
    state = result.to_state()
    state.approve(item)
    resumed = await Runner.run(agent, state)
    assert resumed.final_output == "deleted 'a'"
    assert env.book.notes == ["b"]
    assert await env.rows() == [("approval_granted", "note_delete", "ok"), ("tool_call", "note_delete", "ok")]


async def test_an_ask_resumes_on_reject_through_the_chokepoint(env: Env) -> None:
    env.book.notes.extend(["a"])
    agent, result, tools = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    [item] = result.interruptions
    state = result.to_state()
    told = await tools.reject(state, item, "keep it")
    resumed = await Runner.run(agent, state)
    assert env.book.notes == ["a"]
    assert "did not approve" in told and "keep it" in told
    assert told in resumed.final_output
    assert await env.rows() == [("approval_denied", "note_delete", "denied")]


async def test_a_plain_sdk_reject_never_runs_the_tool(env: Env) -> None:
    env.book.notes.extend(["a"])
    agent, result, _ = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    state = result.to_state()
    state.reject(result.interruptions[0])
    await Runner.run(agent, state)
    assert env.book.notes == ["a"]
    assert await env.rows() == []


async def test_a_standing_approval_of_the_whole_tool_does_not_cover_other_arguments(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    agent, result, _ = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    state = result.to_state()
    state.approve(result.interruptions[0], always_approve=True)
    resumed = await Runner.run(agent, state)
    assert "standing approval" in resumed.final_output
    assert env.book.notes == ["a", "b", "c"]


async def test_the_turn_carries_the_contexts_session_key_and_the_call_id(env: Env) -> None:
    seen: list[aleph.TurnContext | None] = []

    @aleph.tool(idempotent=True, inline=True)
    def whoami() -> str:
        """Report the turn."""
        seen.append(aleph.current_turn())
        return "me"

    env.rt.register(whoami)
    await run(env, ScriptedModel(("whoami", {})))
    tools = AlephAgentTools(env.service())
    agent = Agent(name="main", model=ScriptedModel(("whoami", {})), tools=await tools.tools())
    await Runner.run(agent, "go", context=None, run_config=RunConfig(group_id="thread-7"))
    assert [(t.session_key, t.call_id) for t in seen if t is not None] == [("chat-1", "call-0"), ("thread-7", "call-0")]


async def test_bad_arguments_are_told_to_the_model(env: Env) -> None:
    model = ScriptedModel(("note_add", {"txt": 1}))
    _, result, _ = await run(env, model)
    assert "text: Field required" in result.final_output
    assert env.book.notes == []


async def test_a_tool_allowed_whatever_its_arguments_needs_no_sdk_approval_and_the_others_do(env: Env) -> None:
    tools = {t.name: t for t in await AlephAgentTools(env.service()).tools()}
    assert tools["note_add"].needs_approval is False and tools["notes_list"].needs_approval is False
    assert callable(tools["note_delete"].needs_approval)  # asks: the SDK must ask the chokepoint per call


async def test_a_tool_built_as_never_asking_is_refused_not_run_when_the_policy_now_asks(env: Env) -> None:
    from aleph._chokepoint._permissions import PermissionLayer, PermissionPolicy

    service = env.service()
    tools = AlephAgentTools(service)
    agent = Agent(name="main", model=ScriptedModel(("note_add", {"text": "milk"})), tools=await tools.tools())
    ask = PermissionLayer.from_config("global", {"overrides": {"note_add": "ask"}}, workspace=service._cp.workspace)
    service.policy = PermissionPolicy([ask])  # the policy changed after the tools were taken
    result = await Runner.run(agent, "add milk", context=Chat("chat-1"))
    assert not result.interruptions
    assert "needs a human's approval that this run did not ask for" in result.final_output
    assert env.book.notes == []


async def test_a_tool_built_as_never_asking_is_refused_when_the_turn_now_forbids_it(env: Env) -> None:
    service = env.service()
    tools = AlephAgentTools(service)
    agent = Agent(name="main", model=ScriptedModel(("note_add", {"text": "milk"})), tools=await tools.tools())
    service.turn = aleph.TurnContext(session_key="chat-1", plan_mode=True)  # planning now: nothing mutates
    result = await Runner.run(agent, "add milk", context=Chat("chat-1"))
    assert not result.interruptions and "permission denied" in result.final_output
    assert env.book.notes == []


async def test_a_saved_run_state_resumed_twice_runs_the_call_approved_once_only_once(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    agent, result, _ = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    [item] = result.interruptions
    state = result.to_state()
    state.approve(item)
    saved = state.to_string()
    first = await Runner.run(agent, await RunState.from_string(agent, saved))
    again = await Runner.run(agent, await RunState.from_string(agent, saved))
    assert first.final_output == "deleted 'a'"
    assert env.book.notes == ["b", "c"]
    assert "already used" in again.final_output


async def test_two_resumes_of_one_state_racing_run_the_approved_call_once(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    agent, result, _ = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    [item] = result.interruptions
    state = result.to_state()
    state.approve(item)
    saved = state.to_string()
    states = [await RunState.from_string(agent, saved) for _ in range(2)]
    async with anyio.create_task_group() as tg:
        for s in states:
            tg.start_soon(Runner.run, agent, s)
    assert env.book.notes == ["b", "c"]


async def test_a_used_approval_is_refused_by_another_runtime_on_the_same_data_directory(env: Env) -> None:
    env.book.notes.extend(["a", "b"])
    agent, result, _ = await run(env, ScriptedModel(("note_delete", {"index": 1})))
    [item] = result.interruptions
    state = result.to_state()
    state.approve(item)
    saved = state.to_string()
    await Runner.run(agent, await RunState.from_string(agent, saved))
    async with aleph.load(entry_points=False) as other:  # a second process's runtime on the same data directory
        for tool in build_tools(env.book):
            other.register(tool)
        tools = AlephAgentTools(other.tool_service(agent="main"))
        agent2 = Agent(name="main", model=ScriptedModel(("note_delete", {"index": 1})), tools=await tools.tools())
        replay = await Runner.run(agent2, await RunState.from_string(agent2, saved))
    assert env.book.notes == ["b"]
    assert "already used" in replay.final_output
