"""Approval that holds: grants belong to one agent on one channel in one session, denials are remembered even
without a session, a silent channel times out, and a malformed answer is never an approval."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalDenied, ApprovalExpired, ApprovalOutcome, ApprovalRequest, ScriptedRequester

RAN: list[str] = []


class Plugin:
    ALEPH_PLUGIN_NAME = "approval_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def deploy(target: str) -> str:
            """Deploy (fixture)."""
            RAN.append(target)
            return "deployed"

        register(deploy)


def runtime(workspace: Path, extra: str = "") -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(f'[policies.tool_permissions.overrides]\ndeploy = "ask"\n{extra}')
    return aleph.load(plugins=[Plugin()], entry_points=False, strict=True)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def turn(session: str = "S") -> aleph.TurnContext:
    return aleph.TurnContext(session_key=session)


@pytest.mark.anyio
async def test_a_session_grant_covers_only_the_agent_and_channel_it_was_given_to(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        alice = rt.tool_service(
            agent="alice",
            channel="ops",
            turn=turn(),
            requester=ScriptedRequester([ApprovalOutcome.APPROVED_FOR_SESSION]),
        )
        await alice.execute("deploy", {"target": "prod"})
        await alice.execute("deploy", {"target": "prod"})  # the grant holds for alice on ops
        other = rt.tool_service(agent="alice", channel="guest", turn=turn(), requester=ScriptedRequester([]))
        with pytest.raises(aleph.ApprovalUnavailable):
            await other.execute("deploy", {"target": "prod"})
        for channel in ("guest", "ops"):  # the session is alice's: bob cannot even open it
            with pytest.raises(aleph.PermissionDenied, match="belongs to another agent"):
                rt.tool_service(agent="bob", channel=channel, turn=turn(), requester=ScriptedRequester([]))
        assert RAN == ["prod", "prod"]


@pytest.mark.anyio
@pytest.mark.parametrize("no_session", [None, aleph.TurnContext(session_key="")])
async def test_without_a_session_a_refused_call_is_not_asked_again_and_the_breaker_trips(
    workspace: Path, no_session: aleph.TurnContext | None
) -> None:
    async with runtime(workspace) as rt:
        req = ScriptedRequester([ApprovalOutcome.DENIED] * 6)
        svc = rt.tool_service(turn=no_session, requester=req)
        with pytest.raises(ApprovalDenied):
            await svc.execute("deploy", {"target": "a"})
        with pytest.raises(ApprovalDenied):
            await svc.execute("deploy", {"target": "a"})  # the same call: refused without asking
        assert len(req.requests) == 1
        for target in ("b", "c"):
            with pytest.raises(ApprovalDenied):
                await svc.execute("deploy", {"target": target})
        with pytest.raises(ApprovalDenied, match="paused"):
            await svc.execute("deploy", {"target": "d"})
        assert len(req.requests) == 3 and RAN == []


class Silent:
    async def request_approval(self, request: ApprovalRequest) -> aleph.ApprovalResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class Sloppy:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def request_approval(self, request: ApprovalRequest) -> Any:
        return self.answer


@pytest.mark.anyio
async def test_a_channel_that_never_answers_times_out_as_nobody_answered(workspace: Path) -> None:
    async with runtime(workspace, "[approval]\ntimeout = 0.2\n") as rt:
        with pytest.raises(ApprovalExpired, match="nobody answered") as info:
            await rt.tool_service(turn=turn(), requester=Silent()).execute("deploy", {"target": "x"})
        assert info.value.is_retryable and RAN == []


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["approved", ApprovalOutcome.APPROVED, None, {"outcome": "approved"}, True])
async def test_a_malformed_answer_is_a_refusal_with_a_clear_error(workspace: Path, answer: Any) -> None:
    async with runtime(workspace) as rt:
        with pytest.raises(ApprovalDenied, match="malformed answer"):
            await rt.tool_service(turn=turn(), requester=Sloppy(answer)).execute("deploy", {"target": "x"})
        assert RAN == []


def test_an_approval_timeout_that_is_not_a_positive_number_is_a_config_error(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[approval]\ntimeout = "soon"\n')
    with pytest.raises(aleph.ConfigError, match=r"approval\.timeout"):
        aleph.load(entry_points=False)


@pytest.mark.anyio
async def test_a_swapped_signing_key_stops_the_chain_loudly_and_verify_reports_it(workspace: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    async with runtime(workspace) as rt:
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        svc = rt.tool_service(requester=ScriptedRequester([ApprovalOutcome.APPROVED] * 4))
        await svc.execute("deploy", {"target": "one"})
        await ledger.flush()
        before = len(ledger.rows("default"))
        assert ledger.verify("default").ok
        fp = ledger.keystore.active_fingerprint("default")
        assert fp is not None
        forged = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        (ledger.keystore.directory / f"{fp}.key").write_bytes(forged)
        ledger.keystore._signers.clear()  # a fresh process would read the file again ...
        ledger._chains["default"].refresh = True  # ... and have no signer cached for the chain either
        # The approval of "two" is written before it runs, on the caller's thread: the key is found out then,
        # and "two" is refused before it runs.
        with pytest.raises(aleph.ExecutionFailed, match=r"not run: the audit ledger cannot record it.*stopped taking"):
            await svc.execute("deploy", {"target": "two"})
        result = await svc.call("deploy", {"target": "three"})  # now refused before it runs (fail closed)
        assert not result.success and "not run: the audit ledger cannot record it" in (result.error or "")
        assert len(ledger.rows("default")) == before  # nothing signed with the forged key
        report = ledger.verify("default")
        assert not report.ok and report.first_bad_seq == before + 1
        assert "no longer matches" in (report.reason or "")
        assert RAN == ["one"]
        ledger.on_failure = "continue"  # availability chosen over audit: it runs, and the result says so
        result = await svc.call("deploy", {"target": "four"})
        assert result.success and any("stopped taking rows" in w for w in result.warnings)
        assert RAN == ["one", "four"]


@pytest.mark.anyio
async def test_a_one_time_answer_approves_one_call_even_when_handed_back_again(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        with pytest.raises(aleph.ApprovalRequired) as info:
            await rt.tool_service(requester=aleph.DeferredApprovals()).execute("deploy", {"target": "prod"})
        fingerprint = info.value.request.fingerprint
        once = aleph.ApprovalResponse(ApprovalOutcome.APPROVED, once_id="answer-1")
        await rt.tool_service(requester=aleph.DeferredApprovals({fingerprint: once})).execute(
            "deploy", {"target": "prod"}
        )
        with pytest.raises(aleph.ApprovalUnavailable, match="already used"):
            await rt.tool_service(requester=aleph.DeferredApprovals({fingerprint: once})).execute(
                "deploy", {"target": "prod"}
            )
        # A one-time answer never sticks as a grant, and another id is another human answer.
        other = aleph.ApprovalResponse(ApprovalOutcome.APPROVED, once_id="answer-2")
        await rt.tool_service(requester=aleph.DeferredApprovals({fingerprint: other})).execute(
            "deploy", {"target": "prod"}
        )
    assert RAN == ["prod", "prod"]
    assert (rt.config.data_dir / "approvals" / "used.sqlite").is_file()


@pytest.mark.anyio
async def test_a_carried_session_answer_makes_its_grant_once_and_a_replay_elsewhere_is_refused(
    workspace: Path,
) -> None:
    turn = aleph.TurnContext(session_key="chat-9")
    answer = aleph.ApprovalResponse(ApprovalOutcome.APPROVED_FOR_SESSION, once_id="session-answer-1")
    async with runtime(workspace) as rt:
        with pytest.raises(aleph.ApprovalRequired) as info:
            await rt.tool_service(turn=turn, requester=aleph.DeferredApprovals()).execute("deploy", {"target": "a"})
        fingerprint = info.value.request.fingerprint
        for _ in range(2):  # the grant it made covers the same call in the same session
            answers = aleph.DeferredApprovals({fingerprint: answer})
            await rt.tool_service(turn=turn, requester=answers).execute("deploy", {"target": "a"})
    async with runtime(workspace) as again:  # a new process: the session grant is gone, the answer is spent
        with pytest.raises(aleph.ApprovalUnavailable, match="already used"):
            answers = aleph.DeferredApprovals({fingerprint: answer})
            await again.tool_service(turn=turn, requester=answers).execute("deploy", {"target": "a"})
    assert RAN == ["a", "a"]
