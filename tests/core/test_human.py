"""The door for asking the person from inside a tool: questions, checked answers, the host-bound channel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import HumanAnswer, HumanField, HumanOutcome, HumanQuestion
from aleph.testing import isolated_runtime

pytestmark = pytest.mark.anyio


class Scripted:
    """A human channel answering from a script (a program's own channel, as a host would bind it)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[HumanQuestion] = []

    async def ask(self, question: HumanQuestion) -> HumanAnswer:
        self.asked.append(question)
        return self.answers.pop(0)  # type: ignore[no-any-return]


class Asker:
    """A plugin with a tool that asks whatever the test sets, as many times as it says."""

    def __init__(self) -> None:
        self.question = HumanQuestion.text("Your name?")
        self.times = 1

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        asker = self

        @aleph.tool(idempotent=True)
        async def asks() -> list[dict[str, Any]]:
            """Ask the configured question."""
            call = aleph.current_call()
            assert call is not None
            out = []
            for _ in range(asker.times):
                answer = await call.ask_human(asker.question)
                out.append({"outcome": answer.outcome.value, "content": dict(answer.content)})
            return out

        register(asks)


async def test_without_a_bound_channel_asking_is_a_clear_error(workspace: Path) -> None:
    async with isolated_runtime(workspace, Asker()) as rt:
        result = await rt.tool_service().call("asks", {})
    assert not result.success
    assert "nobody can be asked from here" in (result.error or "")


async def test_the_hosts_channel_is_asked_and_the_answer_recorded(workspace: Path) -> None:
    human = Scripted(HumanAnswer(HumanOutcome.ACCEPTED, {"answer": "Ada"}, "console"))
    async with isolated_runtime(workspace, Asker()) as rt:
        result = await rt.tool_service(human=human).call("asks", {})
        assert result.success and json.loads(result.output) == [{"outcome": "accepted", "content": {"answer": "Ada"}}]
        assert rt.chokepoint.ledger is not None
        (row,) = [r for r in rt.chokepoint.ledger.rows("default") if r.target == "asks"]
    assert row.refs == {"human_outcome": "accepted", "human_answer": '{"answer":"Ada"}'}


async def test_a_secret_named_field_is_masked_on_the_ledger_too(workspace: Path) -> None:
    plugin = Asker()
    plugin.question = HumanQuestion.form("Log in", [HumanField("user"), HumanField("password")])
    human = Scripted(HumanAnswer(HumanOutcome.ACCEPTED, {"user": "ada", "password": "hunter2"}))
    async with isolated_runtime(workspace, plugin) as rt:
        assert (await rt.tool_service(human=human).call("asks", {})).success
        assert rt.chokepoint.ledger is not None
        (row,) = [r for r in rt.chokepoint.ledger.rows("default") if r.target == "asks"]
    assert row.refs is not None and "hunter2" not in json.dumps(row.refs)


@pytest.mark.parametrize("outcome", [HumanOutcome.DECLINED, HumanOutcome.CANCELLED, HumanOutcome.TIMEOUT])
async def test_not_answering_is_an_outcome_and_carries_no_content(workspace: Path, outcome: HumanOutcome) -> None:
    human = Scripted(HumanAnswer(outcome, {"answer": "ignored"}))
    async with isolated_runtime(workspace, Asker()) as rt:
        result = await rt.tool_service(human=human).call("asks", {})
    assert result.success and json.loads(result.output) == [{"outcome": outcome.value, "content": {}}]


async def test_a_channel_answering_in_another_shape_is_an_error_never_an_answer(workspace: Path) -> None:
    async with isolated_runtime(workspace, Asker()) as rt:
        result = await rt.tool_service(human=Scripted({"answer": "yes"})).call("asks", {})
    assert not result.success and "not a HumanAnswer" in (result.error or "")


async def test_a_call_asks_at_most_four_questions(workspace: Path) -> None:
    plugin = Asker()
    plugin.times = 5
    human = Scripted(*[HumanAnswer(HumanOutcome.ACCEPTED, {"answer": str(i)}) for i in range(5)])
    async with isolated_runtime(workspace, plugin) as rt:
        result = await rt.tool_service(human=human).call("asks", {})
    assert not result.success and "at most 4 questions" in (result.error or "")
    assert len(human.asked) == 4


async def test_a_delegated_service_asks_the_same_person(workspace: Path) -> None:
    config = '[agents.helper]\naccepts_delegation_from = ["default"]\n'
    human = Scripted(HumanAnswer(HumanOutcome.ACCEPTED, {"answer": "ok"}))
    seen: list[Any] = []

    class Delegating:
        @aleph.hookimpl
        def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
            @aleph.tool(idempotent=True)
            async def hand_over() -> str:
                """Delegate, and note whether the delegate could ask."""
                call = aleph.current_call()
                assert call is not None
                service = await call.delegate("helper", purpose="ask on my behalf")
                seen.append(service.human)
                return "done"

            register(hand_over)

    async with isolated_runtime(workspace, Delegating(), config_toml=config) as rt:
        assert (await rt.tool_service(human=human).call("hand_over", {})).success
    assert seen == [human]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HumanField("Bad Name"), "must match"),
        (lambda: HumanField("n", kind="date"), "is not string, number, integer or boolean"),  # type: ignore[arg-type]
        (lambda: HumanField("n", kind="number", choices=("1",)), "only a string field may list choices"),
        (lambda: HumanField("n", choices=("a", "a")), "distinct"),
        (lambda: HumanQuestion("", (HumanField("a"),)), "needs a message"),
        (lambda: HumanQuestion("q", ()), "1 to 10 fields"),
        (lambda: HumanQuestion("q", (HumanField("a"), HumanField("a"))), "distinct names"),
        (lambda: HumanQuestion.text("q", timeout_s=0), "timeout_s"),
        (lambda: HumanQuestion.text("q", timeout_s=7200), "timeout_s"),
        (lambda: HumanQuestion.from_schema("q", {"type": "array"}), "type"),
        (
            lambda: HumanQuestion.from_schema("q", {"type": "object", "properties": {"x": {"type": "object"}}}),
            "property 'x'",
        ),
    ],
)
def test_a_malformed_question_is_refused_naming_what_is_wrong(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_a_question_from_an_elicitation_schema_keeps_secrecy_to_itself() -> None:
    schema = {
        "type": "object",
        "properties": {
            "user": {"type": "string", "title": "User"},
            "pin": {"type": "integer", "secret": True},
            "ok": {"type": "boolean"},
        },
        "required": ["user", "pin"],
    }
    question = HumanQuestion.from_schema("Log in", schema)
    assert question.secret_fields == {"pin"}
    sent = question.requested_schema()
    assert "secret" not in json.dumps(sent) and sent["required"] == ["user", "pin"]
    assert question.check({"user": "ada", "pin": 1234.0}) == {"user": "ada", "pin": 1234}
    assert question.recordable({"user": "ada", "pin": 1234}) == {"user": "ada"}
    with pytest.raises(aleph.HumanAnswerInvalid, match="field 'ok' must be true or false"):
        question.check({"user": "ada", "pin": 1, "ok": "yes"})
    with pytest.raises(aleph.HumanAnswerInvalid, match="field 'pin' must be a number"):
        question.check({"user": "ada", "pin": True})
    assert question.digest() != HumanQuestion.from_schema("Log in again", schema).digest()
