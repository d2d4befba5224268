"""aleph.integrations.pydantic_ai against the real pydantic-ai, driven by its own offline FunctionModel."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import aleph
from aleph.integrations.pydantic_ai import AlephToolset, approvals

from .conftest import Env

pytestmark = pytest.mark.anyio


class Script:
    """A model that makes the given tool calls once, then answers with every tool result it was sent."""

    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        self.calls = calls
        self.offered: list[list[str]] = []
        self.seen: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(t.name for t in info.function_tools))
        returns = [
            p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart) and p.tool_call_id
        ]
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"call-{i}") for i, (name, args) in enumerate(self.calls)]
            )
        self.seen = [str(p.content) for p in returns]
        return ModelResponse(parts=[TextPart(" | ".join(self.seen))])


def agent(env: Env, script: Script, **service: Any) -> Agent[None, str | DeferredToolRequests]:
    toolset = AlephToolset(env.service(**service), id="aleph")
    return Agent(FunctionModel(script), toolsets=[toolset], output_type=[str, DeferredToolRequests])


async def test_an_allowed_tool_runs_once_and_leaves_one_ledger_row(env: Env) -> None:
    script = Script(("note_add", {"text": "milk"}))
    result = await agent(env, script).run("remember milk")
    assert result.output == "added note 1"
    assert env.book.notes == ["milk"]
    assert await env.rows() == [("tool_call", "note_add", "ok")]


async def test_the_toolset_lists_what_the_chokepoint_lists_with_alephs_schemas(env: Env) -> None:
    script = Script(("notes_list", {}))
    await agent(env, script).run("list")
    service = env.service()
    listed = [d.name for d in await service.list()]
    assert script.offered[0] == listed
    assert "vault_open" not in listed
    toolset = AlephToolset(service)
    tools = await toolset.get_tools(None)  # type: ignore[arg-type]
    by_name = {f["name"]: f["parameters"] for f in await service.dispatcher_schema()}
    assert {name: t.tool_def.parameters_json_schema for name, t in tools.items()} == by_name


async def test_a_denied_tool_is_absent_and_refused_and_recorded_if_called_anyway(env: Env) -> None:
    script = Script(("vault_open", {}))
    result = await agent(env, script).run("open the vault")
    assert "vault_open" not in script.offered[0]
    assert env.book.vault_opened == 0
    assert "vault_open" in str(result.output)  # pydantic-ai tells the model the tool does not exist
    # Called directly (a stale tool list, a hand-written call): the chokepoint refuses and records it.
    toolset = AlephToolset(env.service())
    with pytest.raises(Exception) as info:
        await toolset.call_tool("vault_open", {}, _ctx(), None)  # type: ignore[arg-type]
    assert "permission denied" in str(info.value)
    assert env.book.vault_opened == 0
    assert await env.rows() == [("tool_denied", "vault_open", "denied")]


def _ctx(**fields: Any) -> Any:
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage(), **fields)


async def test_an_ask_stops_the_run_and_resumes_on_approve(env: Env) -> None:
    env.book.notes.extend(["a", "b"])
    script = Script(("note_delete", {"index": 1}))
    ag = agent(env, script)
    first = await ag.run("delete the first note")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    assert (call.tool_name, call.args_as_dict()) == ("note_delete", {"index": 1})
    request = first.output.metadata[call.tool_call_id]["aleph"]
    assert request["tool"] == "note_delete" and request["rule_id"] and len(request["fingerprint"]) == 32
    assert env.book.notes == ["a", "b"]  # nothing ran yet

    answers = approvals(first.output, {call.tool_call_id: True})
    second = await ag.run(message_history=first.all_messages(), deferred_tool_results=answers)
    assert second.output == "deleted 'a'"
    assert env.book.notes == ["b"]
    assert await env.rows() == [("approval_granted", "note_delete", "ok"), ("tool_call", "note_delete", "ok")]


async def test_an_ask_resumes_on_deny_through_the_chokepoint_which_records_the_no(env: Env) -> None:
    env.book.notes.extend(["a"])
    script = Script(("note_delete", {"index": 1}))
    ag = agent(env, script)
    first = await ag.run("delete it")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    no = aleph.ApprovalResponse(aleph.ApprovalOutcome.DENIED, "keep it")
    second = await ag.run(
        message_history=first.all_messages(), deferred_tool_results=approvals(first.output, {call.tool_call_id: no})
    )
    assert env.book.notes == ["a"]
    assert "did not approve" in str(second.output) and "keep it" in str(second.output)
    assert await env.rows() == [("approval_denied", "note_delete", "denied")]


async def test_a_plain_tool_denied_answer_never_runs_the_tool(env: Env) -> None:
    env.book.notes.extend(["a"])
    script = Script(("note_delete", {"index": 1}))
    ag = agent(env, script)
    first = await ag.run("delete it")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    results = first.output.build_results(approvals={call.tool_call_id: ToolDenied("no")})
    await ag.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert env.book.notes == ["a"]
    assert await env.rows() == []


async def test_an_approval_covers_only_the_call_it_was_given_for(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    script = Script(("note_delete", {"index": 1}), ("note_delete", {"index": 2}))
    ag = agent(env, script)
    first = await ag.run("delete two")
    assert isinstance(first.output, DeferredToolRequests)
    one, two = first.output.approvals
    answers = approvals(first.output, {one.tool_call_id: True, two.tool_call_id: False})
    await ag.run(message_history=first.all_messages(), deferred_tool_results=answers)
    assert env.book.notes == ["b", "c"]
    assert sorted(await env.rows()) == sorted(
        [
            ("approval_granted", "note_delete", "ok"),
            ("tool_call", "note_delete", "ok"),
            ("approval_denied", "note_delete", "denied"),
        ]
    )


async def test_approve_for_session_covers_the_same_call_in_the_same_conversation(env: Env) -> None:
    env.book.notes.extend(["a", "a"])
    script = Script(("note_delete", {"index": 1}))
    ag = agent(env, script)
    first = await ag.run("delete", conversation_id="conv-1")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    session = aleph.ApprovalResponse(aleph.ApprovalOutcome.APPROVED_FOR_SESSION)
    await ag.run(
        message_history=first.all_messages(),
        deferred_tool_results=approvals(first.output, {call.tool_call_id: session}),
    )
    again = await agent(env, Script(("note_delete", {"index": 1}))).run("delete", conversation_id="conv-1")
    assert again.output == "deleted 'a'" and env.book.notes == []
    other = await agent(env, Script(("note_delete", {"index": 1}))).run("delete", conversation_id="conv-2")
    assert isinstance(other.output, DeferredToolRequests)


async def test_the_turn_carries_the_runs_conversation_id_run_id_and_call_id(env: Env) -> None:
    seen: list[aleph.TurnContext | None] = []

    @aleph.tool(idempotent=True, inline=True)
    def whoami() -> str:
        """Report the turn."""
        seen.append(aleph.current_turn())
        return "me"

    env.rt.register(whoami)
    script = Script(("whoami", {}))
    result = await agent(env, script, turn=aleph.TurnContext(principal="ana")).run("who", conversation_id="c-9")
    [turn] = seen
    assert turn is not None
    assert (turn.session_key, turn.call_id, turn.principal) == ("c-9", "call-0", "ana")
    assert turn.run_id == result.run_id


async def test_input_the_model_can_fix_becomes_a_retry(env: Env) -> None:
    attempts: list[dict[str, Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if not returns:
            attempts.append({"txt": 1})
            return ModelResponse(parts=[ToolCallPart("note_add", {"txt": 1}, tool_call_id="c1")])
        if len(attempts) == 1:
            attempts.append({"text": "ok"})
            assert returns[-1].outcome == "retried" and "text: Field required" in str(returns[-1].content)
            return ModelResponse(parts=[ToolCallPart("note_add", {"text": "ok"}, tool_call_id="c2")])
        return ModelResponse(parts=[TextPart(str(returns[-1].content))])

    ag = Agent(FunctionModel(model), toolsets=[AlephToolset(env.service())], output_type=str)
    result = await ag.run("add")
    assert result.output == "added note 1" and env.book.notes == ["ok"]
    assert len(attempts) == 2


async def test_a_failure_the_model_cannot_fix_is_reported_not_retried(env: Env) -> None:
    script = Script(("note_delete", {"index": 5}))
    env.book.notes.append("a")
    toolset = AlephToolset(env.service(requester=None))
    with pytest.raises(Exception) as info:
        await toolset.call_tool("note_add", {"text": 1}, _ctx(), None)  # type: ignore[arg-type]
    assert type(info.value).__name__ == "ModelRetry"
    ag = Agent(FunctionModel(script), toolsets=[AlephToolset(env.service())], output_type=[str, DeferredToolRequests])
    first = await ag.run("x")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    second = await ag.run(
        message_history=first.all_messages(), deferred_tool_results=approvals(first.output, {call.tool_call_id: True})
    )
    assert "no note 5" in str(second.output)
    outcomes = [p.outcome for m in second.new_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert outcomes == ["failed"]  # reported to the model as a failure, not a retry prompt
    assert await env.rows() == [  # the invalid input was refused at the boundary, before it could run
        ("approval_granted", "note_delete", "ok"),
        ("tool_call", "note_delete", "error"),
    ]


def test_answers_for_calls_that_are_not_pending_are_an_error() -> None:
    with pytest.raises(ValueError, match="not awaiting approval"):
        approvals(DeferredToolRequests(), {"nope": True})
    with pytest.raises(ValueError, match="not an approval answer"):
        from aleph.integrations._common import response_from

        response_from("maybe")


async def test_deferred_results_replayed_on_the_same_history_run_the_approved_call_once(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    ag = agent(env, Script(("note_delete", {"index": 1})))
    first = await ag.run("delete the first note")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    history = first.all_messages()
    answers = approvals(first.output, {call.tool_call_id: True})
    done = await ag.run(message_history=history, deferred_tool_results=answers)
    replay = await ag.run(message_history=history, deferred_tool_results=answers)
    assert done.output == "deleted 'a'"
    assert env.book.notes == ["b", "c"]
    assert "already used" in str(replay.output)


async def test_a_plain_tool_approved_replayed_runs_the_call_once(env: Env) -> None:
    env.book.notes.extend(["a", "b", "c"])
    ag = agent(env, Script(("note_delete", {"index": 1})))
    first = await ag.run("delete the first note")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    history = first.all_messages()
    results = first.output.build_results(approvals={call.tool_call_id: True})
    await ag.run(message_history=history, deferred_tool_results=results)
    await ag.run(message_history=history, deferred_tool_results=results)
    assert env.book.notes == ["b", "c"]
