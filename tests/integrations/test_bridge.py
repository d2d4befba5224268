"""The per-call service every integration builds (aleph.integrations._common.CallBridge), on a real runtime.

Each call's turn is the service's turn with the framework's session key, run id and call id; the turns are
derived once per run and reused, so these tests check that reuse never carries one call's identity, or
one call's approval, into another.
"""

from __future__ import annotations

import dataclasses

import pytest

import aleph
from aleph.integrations import _common
from aleph.integrations._common import CallBridge

from .conftest import Env

pytestmark = pytest.mark.anyio

BASE = aleph.TurnContext(session_key="base", run_id="r0", channel_id="chat", principal="ana", refs=(("team", "t1"),))


def whoami(env: Env) -> list[aleph.TurnContext]:
    seen: list[aleph.TurnContext] = []

    @aleph.tool(idempotent=True, inline=True)
    def who() -> str:
        """Report the turn."""
        turn = aleph.current_turn()
        assert turn is not None
        seen.append(turn)
        return "me"

    env.rt.register(who)
    return seen


async def test_each_call_gets_its_own_session_run_and_call_id_and_keeps_the_rest_of_the_turn(env: Env) -> None:
    seen = whoami(env)
    bridge = CallBridge(env.service(turn=BASE, channel="chat"))
    calls = [
        ("k1", "run-a", "c1"),
        ("k2", None, "c2"),
        ("k1", "run-a", "c3"),
        (None, None, None),
        ("k1", "run-a", None),
    ]
    for key, run, call in calls:
        await bridge.execute("who", {}, session_key=key, run_id=run, call_id=call)
    expected = [
        dataclasses.replace(BASE, session_key=key or "base", run_id=run or "r0", call_id=call)
        for key, run, call in calls
    ]
    assert seen == expected
    assert [t.principal for t in seen] == ["ana"] * 5 and all(t.refs == (("team", "t1"),) for t in seen)


async def test_a_turn_given_to_the_service_later_is_the_one_calls_use(env: Env) -> None:
    seen = whoami(env)
    service = env.service(turn=BASE)
    bridge = CallBridge(service)
    await bridge.execute("who", {}, call_id="c1")
    service.turn = aleph.TurnContext(session_key="later", principal="bo")
    await bridge.execute("who", {}, call_id="c2")
    assert [(t.session_key, t.principal, t.call_id) for t in seen] == [("base", "ana", "c1"), ("later", "bo", "c2")]


async def test_the_turns_kept_are_bounded_however_many_conversations_call(env: Env) -> None:
    bridge = CallBridge(env.service(turn=BASE))
    for n in range(3 * _common._MAX_TURNS):
        bridge.turn(session_key=f"conversation-{n}", run_id=f"run-{n}", call_id="c")
    assert 0 < len(bridge._turns) <= _common._MAX_TURNS


async def test_an_answer_covers_its_one_call_and_never_a_later_call_without_one(env: Env) -> None:
    env.book.notes[:] = ["a", "b", "c"]
    bridge = CallBridge(env.service())
    approved = aleph.ApprovalResponse(aleph.ApprovalOutcome.APPROVED)
    await bridge.execute("note_delete", {"index": 1}, session_key="k", call_id="c1", answer=approved)
    assert env.book.notes == ["b", "c"]
    for call in ("c2", "c3"):  # the same arguments again, without an answer: asked each time, never run
        with pytest.raises(aleph.ApprovalRequired):
            await bridge.execute("note_delete", {"index": 1}, session_key="k", call_id=call)
    assert env.book.notes == ["b", "c"]


class TestPrincipalFromTheRun:
    async def test_the_runs_session_becomes_the_principals_and_a_foreign_one_is_refused(self, env: Env) -> None:
        seen: list[aleph.Principal | None] = []

        @aleph.tool(idempotent=True, inline=True)
        def me() -> str:
            """Report the principal."""
            seen.append(aleph.current_principal())
            return "me"

        env.rt.register(me)
        env.rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-thread"))  # alice's now
        bridge = CallBridge(env.service(turn=BASE, channel="chat"))
        await bridge.execute("me", {}, session_key="thread-7", call_id="c1")
        with pytest.raises(aleph.PermissionDenied, match="belongs to another agent"):
            await bridge.execute("me", {}, session_key="alice-thread", call_id="c2")
        assert [(p.session, p.channel, p.user) for p in seen if p] == [("thread-7", "chat", "ana")]
