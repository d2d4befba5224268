"""A2A delegation is a data-flow sink, and what a remote agent answers is untrusted.

A real remote agent (the SDK's server under uvicorn on loopback) echoes its task into an artifact, so
whatever it answers is third-party text: an address it mentions must not be handed on to an agent
(another sink) unless the person's own request named it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, ScriptedRequester

from .conftest import runtime
from .remote import PAYEE, RemoteAgent

pytestmark = pytest.mark.anyio


@pytest.fixture
def remote():
    agent = RemoteAgent()
    yield agent
    agent.stop()


def svc(rt: aleph.Aleph, answers: Any = (), session: str = "s-flow") -> aleph.ScopedToolService:
    return rt.tool_service(
        agent="alice",
        turn=aleph.TurnContext(session_key=session),
        tier="auto",
        requester=ScriptedRequester(list(answers)),
    )


async def delegate(service: aleph.ScopedToolService, task: str) -> aleph.ToolResult:
    return await service.call("a2a_delegate", {"agent": "helper", "task": task})


async def test_an_address_a_remote_agent_answered_cannot_be_delegated_onward_unasked(
    workspace: Path, remote: RemoteAgent
) -> None:
    async with runtime(workspace) as rt:
        first = svc(rt)
        assert (await first.call("a2a_agents", {"action": "add", "name": "helper", "url": remote.url})).success
        # The task names no address; the remote agent's answer is what brings one in.
        answered = await delegate(first, "where to pay the invoice?")
        assert answered.success, answered.error
        out = json.loads(answered.output)
        assert PAYEE in out["reply"] and out["untrusted"] is True

        # Handing that address to an agent (a sink) now needs a person, and the question names the flow.
        onward = svc(rt, answers=[ApprovalOutcome.DENIED])
        refused = await delegate(onward, f"pay the invoice at {PAYEE}")
        assert not refused.success
        [reason] = [r.reason for r in onward.requester.requests]  # type: ignore[attr-defined]
        assert "a2a_delegate.task" in reason and "`a2a_delegate` (call" in reason and "untrusted" in reason

        # Approved by the person, a call carrying the address runs.
        approved = svc(rt, answers=[ApprovalOutcome.APPROVED])
        assert (await delegate(approved, f"settle the invoice at {PAYEE} today")).success
        assert len(approved.requester.requests) == 1  # type: ignore[attr-defined]


async def test_an_address_the_users_request_named_is_delegated_unasked(workspace: Path, remote: RemoteAgent) -> None:
    async with runtime(workspace) as rt:
        service = svc(rt)
        service.trust(f"Please settle the invoice at {PAYEE} through the helper agent.")
        assert (await service.call("a2a_agents", {"action": "add", "name": "helper", "url": remote.url})).success
        assert (await delegate(service, "where to pay the invoice?")).success
        # The remote agent answers the same address, but it was the user's before it was the agent's.
        assert (await delegate(service, f"pay the invoice at {PAYEE}")).success
        assert service.requester.requests == []  # type: ignore[attr-defined]


async def test_another_session_is_not_tainted_by_this_ones_reading(workspace: Path, remote: RemoteAgent) -> None:
    async with runtime(workspace) as rt:
        first = svc(rt)
        assert (await first.call("a2a_agents", {"action": "add", "name": "helper", "url": remote.url})).success
        assert (await delegate(first, "where to pay the invoice?")).success
        other = svc(rt, session="s-other")
        assert (await delegate(other, f"pay the invoice at {PAYEE}")).success
        assert other.requester.requests == []  # type: ignore[attr-defined]
