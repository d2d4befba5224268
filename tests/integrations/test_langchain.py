"""aleph.integrations.langchain against real LangChain and LangGraph, with an offline chat model of our own.

The agent is LangChain's ``create_agent`` (a LangGraph graph) with an in-memory checkpointer, so an ask
is a real LangGraph interrupt and a resume is a real ``Command(resume=...)``. The model makes its scripted
tool calls once, then answers with every tool result it was sent. No network, no API key.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import aleph
from aleph.integrations.langchain import langchain_tools

from .conftest import Env

pytestmark = pytest.mark.anyio


class ScriptedChat(BaseChatModel):
    calls: list[tuple[str, dict[str, Any]]]
    offered: list[list[str]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.offered.append(sorted(t.name for t in tools))
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            message = AIMessage(
                content="",
                tool_calls=[
                    {"name": n, "args": a, "id": f"call-{i}", "type": "tool_call"}
                    for i, (n, a) in enumerate(self.calls)
                ],
            )
        else:
            message = AIMessage(content=" | ".join(str(m.content) for m in results))
        return ChatResult(generations=[ChatGeneration(message=message)])


async def graph(env: Env, *calls: tuple[str, dict[str, Any]], **service: Any) -> tuple[Any, ScriptedChat]:
    model = ScriptedChat(calls=list(calls), offered=[])
    tools = await langchain_tools(env.service(**service))
    return create_agent(model, tools, checkpointer=InMemorySaver()), model


CONFIG: Any = {"configurable": {"thread_id": "thread-1"}}


def last(result: dict[str, Any]) -> str:
    return str(result["messages"][-1].content)


async def test_an_allowed_tool_runs_once_and_leaves_one_ledger_row(env: Env) -> None:
    agent, _ = await graph(env, ("note_add", {"text": "milk"}))
    result = await agent.ainvoke({"messages": [("user", "remember milk")]}, CONFIG)
    assert last(result) == "added note 1"
    assert env.book.notes == ["milk"]
    assert await env.rows() == [("tool_call", "note_add", "ok")]


async def test_a_denied_tool_is_absent(env: Env) -> None:
    agent, model = await graph(env, ("notes_list", {}))
    await agent.ainvoke({"messages": [("user", "list")]}, CONFIG)
    assert model.offered[0] == sorted(d.name for d in await env.service().list())
    assert "vault_open" not in model.offered[0]


async def test_an_ask_interrupts_and_resumes_on_approve(env: Env) -> None:
    env.book.notes.extend(["a", "b"])
    agent, _ = await graph(env, ("note_delete", {"index": 1}))
    first = await agent.ainvoke({"messages": [("user", "delete")]}, CONFIG)
    [pending] = first["__interrupt__"]
    assert pending.value["type"] == "tool_approval"
    assert (pending.value["name"], pending.value["args"], pending.value["tool_call_id"]) == (
        "note_delete",
        {"index": 1},
        "call-0",
    )
    assert pending.value["aleph"]["rule_id"] and env.book.notes == ["a", "b"]
    second = await agent.ainvoke(Command(resume={pending.id: {"type": "approve"}}), CONFIG)
    assert last(second) == "deleted 'a'"
    assert env.book.notes == ["b"]
    assert await env.rows() == [("approval_granted", "note_delete", "ok"), ("tool_call", "note_delete", "ok")]


async def test_an_ask_resumes_on_reject_and_the_chokepoint_records_the_no(env: Env) -> None:
    env.book.notes.extend(["a"])
    agent, _ = await graph(env, ("note_delete", {"index": 1}))
    first = await agent.ainvoke({"messages": [("user", "delete")]}, CONFIG)
    [pending] = first["__interrupt__"]
    second = await agent.ainvoke(Command(resume={pending.id: {"type": "reject", "message": "keep it"}}), CONFIG)
    assert env.book.notes == ["a"]
    assert "did not approve" in last(second) and "keep it" in last(second)
    assert second["messages"][-2].status == "error"
    assert await env.rows() == [("approval_denied", "note_delete", "denied")]


async def test_an_edit_runs_the_humans_arguments_and_only_those(env: Env) -> None:
    env.book.notes.extend(["a", "b"])
    agent, _ = await graph(env, ("note_delete", {"index": 1}))
    first = await agent.ainvoke({"messages": [("user", "delete")]}, CONFIG)
    [pending] = first["__interrupt__"]
    edit = {"type": "edit", "edited_action": {"name": "note_delete", "args": {"index": 2}}}
    second = await agent.ainvoke(Command(resume={pending.id: edit}), CONFIG)
    assert last(second) == "deleted 'b'" and env.book.notes == ["a"]


async def test_two_asks_in_one_step_are_answered_each_on_its_own(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    agent, _ = await graph(env, ("note_delete", {"index": 3}), ("note_delete", {"index": 1}))
    first = await agent.ainvoke({"messages": [("user", "delete two")]}, CONFIG)
    by_index = {p.value["args"]["index"]: p.id for p in first["__interrupt__"]}
    assert sorted(by_index) == [1, 3]
    answers = {by_index[3]: True, by_index[1]: False}
    await agent.ainvoke(Command(resume=answers), CONFIG)
    assert env.book.notes == ["a", "b"]


async def test_the_turn_carries_the_thread_id_and_the_call_id(env: Env) -> None:
    seen: list[tuple[aleph.TurnContext | None, str | None]] = []

    @aleph.tool(idempotent=True, inline=True)
    def whoami() -> str:
        """Report the turn."""
        call = aleph.current_call()
        seen.append((aleph.current_turn(), call.call_id if call else None))
        return "me"

    env.rt.register(whoami)
    agent, _ = await graph(env, ("whoami", {}))
    await agent.ainvoke({"messages": [("user", "who")]}, {"configurable": {"thread_id": "t-9"}})
    [(turn, call_id)] = seen
    assert turn is not None and (turn.session_key, turn.call_id, call_id) == ("t-9", "call-0", "call-0")


async def test_errors_reach_the_model_as_error_tool_messages(env: Env) -> None:
    agent, _ = await graph(env, ("note_add", {"txt": 1}))
    result = await agent.ainvoke({"messages": [("user", "add")]}, CONFIG)
    assert "text: Field required" in last(result)
    assert result["messages"][-2].status == "error"
    assert env.book.notes == []


async def test_a_sync_invoke_says_the_tools_are_async(env: Env) -> None:
    [tool] = [t for t in await langchain_tools(env.service()) if t.name == "notes_list"]
    message = tool.invoke({"name": "notes_list", "args": {}, "id": "c", "type": "tool_call"})
    assert "asynchronous" in str(message.content)


async def test_resuming_the_same_checkpoint_twice_runs_the_approved_call_once(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    agent, _ = await graph(env, ("note_delete", {"index": 1}))
    first = await agent.ainvoke({"messages": [("user", "delete")]}, CONFIG)
    [pending] = first["__interrupt__"]
    interrupted = (await agent.aget_state(CONFIG)).config
    done = await agent.ainvoke(Command(resume={pending.id: {"type": "approve"}}), interrupted)
    replay = await agent.ainvoke(Command(resume={pending.id: {"type": "approve"}}), interrupted)
    assert last(done) == "deleted 'a'"
    assert env.book.notes == ["b", "c"]
    assert "already used" in last(replay)
