"""Tools asking the person (``CallContext.ask_human``) under ``aleph serve``, with the SDK's own client, both eras.

The server runs in this process on a loopback socket (the real SDK app under uvicorn), so the test reads
the runtime's signed ledger directly. Legacy clients get ``elicitation/create`` while the call is open;
2026-07-28 clients get ``input_required`` with a sealed ``requestState`` and retry with the answer (the
tool then runs again from the start: the test counts its runs).
"""

from __future__ import annotations

import json
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
from aleph._mcp.serve import AlephMcpServer, bind_loopback

pytestmark = pytest.mark.anyio

DEPLOY = aleph.HumanQuestion.form(
    "Deploy the release?",
    [
        aleph.HumanField("target", "Where", choices=("canary", "stable")),
        aleph.HumanField("replicas", "How many replicas", kind="integer"),
        aleph.HumanField("token", "Release token", secret=True, required=False),
    ],
)


class Tools:
    """Tools that ask, counting how often each one started (a 2026-07-28 retry runs it again)."""

    def __init__(self, timeout_s: float = 60.0) -> None:
        self.runs: dict[str, int] = {}
        self.timeout_s = timeout_s

    def register(self, rt: aleph.Aleph) -> None:
        tools = self

        @aleph.tool(idempotent=True)
        async def deploy_ask(note: str = "") -> dict[str, Any]:
            """Ask whether to deploy, and where."""
            tools.runs["deploy_ask"] = tools.runs.get("deploy_ask", 0) + 1
            call = aleph.current_call()
            assert call is not None
            question = aleph.HumanQuestion.form(DEPLOY.message, DEPLOY.fields, timeout_s=tools.timeout_s)
            answer = await call.ask_human(question)
            return {"outcome": answer.outcome.value, "content": dict(answer.content), "via": answer.via}

        @aleph.tool(idempotent=True)
        async def two_questions() -> dict[str, Any]:
            """Ask two things in a row."""
            tools.runs["two_questions"] = tools.runs.get("two_questions", 0) + 1
            call = aleph.current_call()
            assert call is not None
            first = await call.ask_human(aleph.HumanQuestion.text("Your name?"))
            second = await call.ask_human(
                aleph.HumanQuestion.choice(f"Hello {first.get()}, tea or coffee?", ["tea", "coffee"])
            )
            return {"name": first.get(), "drink": second.get()}

        @aleph.tool(idempotent=True)
        async def restless() -> str:
            """Ask a question whose text changes every time the tool runs."""
            tools.runs["restless"] = tools.runs.get("restless", 0) + 1
            call = aleph.current_call()
            assert call is not None
            return str((await call.ask_human(aleph.HumanQuestion.text(f"Attempt {tools.runs['restless']}?"))).get())

        rt.register(deploy_ask)
        rt.register(two_questions)
        rt.register(restless)


class Human:
    """An elicitation handler that answers from a script and keeps what it was shown."""

    def __init__(self, *answers: dict[str, Any] | str, delay: float = 0.0) -> None:
        self.answers = list(answers)
        self.asked: list[types.ElicitRequestParams] = []
        self.delay = delay

    async def __call__(self, context: Any, request: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(request)
        if self.delay:
            await anyio.sleep(self.delay)  # the person takes longer than the question allows
        answer = self.answers.pop(0) if self.answers else "decline"
        if isinstance(answer, str):
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=answer)


@asynccontextmanager
async def serving(workspace: Path, tools: Tools, config: str = "") -> AsyncIterator[tuple[str, aleph.Aleph]]:
    (workspace / "aleph.toml").write_text(config)
    rt = aleph.load(workspace / "aleph.toml", workspace=workspace, entry_points=False)
    sock = bind_loopback("127.0.0.1", 0)
    port = sock.getsockname()[1]
    started = anyio.Event()
    async with rt, anyio.create_task_group() as tg:
        tools.register(rt)
        server = AlephMcpServer(rt)
        tg.start_soon(lambda: server.run_http(sock, ready=lambda _port: started.set()))
        with anyio.fail_after(30):
            await started.wait()
        try:
            yield f"http://127.0.0.1:{port}/mcp", rt
        finally:
            tg.cancel_scope.cancel()
    sock.close()


@asynccontextmanager
async def client(url: str, mode: str, human: Human | None = None) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=human) as c:
            yield c


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def value(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    return json.loads(text(result))  # type: ignore[no-any-return]


def rows(rt: aleph.Aleph, tool: str) -> list[aleph.LedgerRow]:
    assert rt.chokepoint.ledger is not None
    return [r for r in rt.chokepoint.ledger.rows("default") if r.target == tool]


ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])


@ERAS
async def test_an_accepted_answer_reaches_the_tool_checked_and_is_ledgered_without_secrets(
    workspace: Path, mode: str
) -> None:
    tools = Tools()
    human = Human({"target": "canary", "replicas": 3, "token": "s3cr3t-release-token"})
    async with serving(workspace, tools) as (url, rt), client(url, mode, human) as c:
        out = value(await c.call_tool("deploy_ask", {}))
        assert out == {
            "outcome": "accepted",
            "content": {"target": "canary", "replicas": 3, "token": "s3cr3t-release-token"},
            "via": "mcp",
        }
        (shown,) = human.asked
        assert isinstance(shown, types.ElicitRequestFormParams) and shown.message == "Deploy the release?"
        assert shown.requested_schema["properties"]["target"]["enum"] == ["canary", "stable"]
        assert shown.requested_schema["required"] == ["target", "replicas"]
        assert "secret" not in json.dumps(shown.requested_schema)  # secrecy stays with Aleph
        # The legacy era asks while the call waits; 2026-07-28 runs the tool again with the answer.
        assert tools.runs["deploy_ask"] == (2 if mode == "auto" else 1)
        row = rows(rt, "deploy_ask")[-1]
        assert row.refs is not None and row.refs["human_outcome"] == "accepted"
        assert json.loads(row.refs["human_answer"]) == {"target": "canary", "replicas": 3}
        assert "s3cr3t" not in json.dumps([r.refs for r in rows(rt, "deploy_ask")])


@ERAS
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_are_outcomes_of_their_own(workspace: Path, mode: str, action: str) -> None:
    tools = Tools()
    async with serving(workspace, tools) as (url, rt), client(url, mode, Human(action)) as c:
        out = value(await c.call_tool("deploy_ask", {}))
        assert out == {"outcome": f"{action}d" if action == "decline" else "cancelled", "content": {}, "via": "mcp"}
        assert rows(rt, "deploy_ask")[-1].refs == {"human_outcome": out["outcome"]}


@ERAS
async def test_an_answer_after_the_questions_timeout_is_a_timeout(workspace: Path, mode: str) -> None:
    tools = Tools(timeout_s=0.5)
    human = Human({"target": "stable", "replicas": 1}, delay=1.0)
    async with serving(workspace, tools) as (url, _rt), client(url, mode, human) as c:
        out = value(await c.call_tool("deploy_ask", {}))
    assert out == {"outcome": "timeout", "content": {}, "via": "mcp"}


@ERAS
@pytest.mark.parametrize(
    ("content", "named"),
    [
        ({"target": "canary", "replicas": "three"}, "field 'replicas' must be a number"),
        ({"target": "prod", "replicas": 1}, "field 'target' must be one of"),
        ({"target": "canary", "replicas": 1.5}, "field 'replicas' must be a whole number"),
        ({"replicas": 2}, "field 'target' is required"),
        ({"target": "canary", "replicas": 1, "admin": True}, "field 'admin' was not asked for"),
    ],
)
async def test_an_answer_that_does_not_fit_is_an_error_naming_the_field(
    workspace: Path, mode: str, content: dict[str, Any], named: str
) -> None:
    tools = Tools()
    async with serving(workspace, tools) as (url, _rt), client(url, mode, Human(content)) as c:
        result = await c.call_tool("deploy_ask", {})
    assert result.is_error and named in text(result), text(result)
    assert "the person's answer does not fit the question" in text(result)


@ERAS
async def test_a_client_without_elicitation_is_named_as_unable_to_ask(workspace: Path, mode: str) -> None:
    tools = Tools()
    async with serving(workspace, tools) as (url, _rt), client(url, mode) as c:
        result = await c.call_tool("deploy_ask", {})
    assert result.is_error
    assert "this MCP client cannot be asked: it did not declare the elicitation capability" in text(result)


@ERAS
async def test_two_questions_in_one_call_are_asked_in_turn(workspace: Path, mode: str) -> None:
    tools = Tools()
    human = Human({"answer": "Ada"}, {"answer": "tea"})
    async with serving(workspace, tools) as (url, rt), client(url, mode, human) as c:
        out = value(await c.call_tool("two_questions", {}))
        assert out == {"name": "Ada", "drink": "tea"}
        assert [a.message for a in human.asked] == ["Your name?", "Hello Ada, tea or coffee?"]
        # 2026-07-28: one round per question, the state carrying the first answer (never asked twice).
        assert tools.runs["two_questions"] == (3 if mode == "auto" else 1)
        refs = rows(rt, "two_questions")[-1].refs
        assert refs is not None and (refs["human_answer"], refs["human_answer_2"]) == (
            '{"answer":"Ada"}',
            '{"answer":"tea"}',
        )


async def test_a_question_that_changes_every_run_ends_after_four_rounds(workspace: Path) -> None:
    tools = Tools()
    human = Human(*[{"answer": str(i)} for i in range(10)])
    async with serving(workspace, tools) as (url, _rt), client(url, "auto", human) as c:
        result = await c.call_tool("restless", {})
    assert result.is_error and "asked more than 4 questions in one call" in text(result)
    assert len(human.asked) == 4 and tools.runs["restless"] == 5


async def test_an_approval_and_a_question_in_one_call_are_each_asked_once(workspace: Path) -> None:
    tools = Tools()
    config = '[policies.tool_permissions.overrides]\ndeploy_ask = "ask"\n'
    human = Human({"decision": "approve_once"}, {"target": "stable", "replicas": 2})
    async with serving(workspace, tools, config) as (url, _rt), client(url, "auto", human) as c:
        out = value(await c.call_tool("deploy_ask", {}))
    assert out["content"] == {"target": "stable", "replicas": 2}
    assert len(human.asked) == 2 and tools.runs["deploy_ask"] == 2  # the approval carried into the last round


async def _asked(c: Client, arguments: dict[str, Any] | None = None) -> types.InputRequiredResult:
    first = await c.session.call_tool("deploy_ask", arguments or {}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
    assert first.input_requests is not None and set(first.input_requests) == {"aleph_question"}
    return first


ANSWER = {"aleph_question": types.ElicitResult(action="accept", content={"target": "canary", "replicas": 1})}


async def test_the_question_state_is_sealed_bound_to_the_call_and_used_once(workspace: Path) -> None:
    tools = Tools()
    async with serving(workspace, tools) as (url, _rt), client(url, "auto", Human()) as c:
        state = (await _asked(c)).request_state
        assert state is not None and "Deploy" not in state and "canary" not in state
        forged = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await c.session.call_tool(
                "deploy_ask", {}, input_responses=ANSWER, request_state=forged, allow_input_required=True
            )
        with pytest.raises(MCPError, match="Invalid or expired requestState"):  # other arguments
            await c.session.call_tool(
                "deploy_ask", {"note": "x"}, input_responses=ANSWER, request_state=state, allow_input_required=True
            )
        wrong_key = {"aleph_approval": ANSWER["aleph_question"]}
        missing = await c.session.call_tool(
            "deploy_ask", {}, input_responses=wrong_key, request_state=state, allow_input_required=True
        )
        assert isinstance(missing, types.CallToolResult) and "carries no answer to the question" in text(missing)
        done = await c.session.call_tool(
            "deploy_ask", {}, input_responses=ANSWER, request_state=state, allow_input_required=True
        )
        assert isinstance(done, types.CallToolResult) and value(done)["content"] == {"target": "canary", "replicas": 1}
        replay = await c.session.call_tool(
            "deploy_ask", {}, input_responses=ANSWER, request_state=state, allow_input_required=True
        )
        assert isinstance(replay, types.CallToolResult) and replay.is_error and "already used" in text(replay)


async def test_a_question_state_from_another_server_is_refused(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with serving(workspace, Tools()) as (url, _rt), serving(other, Tools()) as (other_url, _other):
        async with client(url, "auto", Human()) as c:
            state = (await _asked(c)).request_state
        async with client(other_url, "auto", Human()) as c:
            result = await c.session.call_tool(
                "deploy_ask", {}, input_responses=ANSWER, request_state=state, allow_input_required=True
            )
    assert isinstance(result, types.CallToolResult) and result.is_error
    assert "asked by another server or session" in text(result)
