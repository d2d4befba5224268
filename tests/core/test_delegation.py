"""Delegation through one door: a chain never gains a permission, budgets nest, consent or an operator decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, Budget, PermissionDenied, ScriptedRequester
from aleph._principal import MAX_DELEGATION_DEPTH

WRITTEN: list[str] = []


class Plugin:
    ALEPH_PLUGIN_NAME = "delegation_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def file_write(path: str) -> str:
            """Write a file (fixture: records the path)."""
            WRITTEN.append(path)
            return "written"

        @aleph.tool(idempotent=True)
        def read_note() -> str:
            """Read a note (fixture)."""
            return "note"

        @aleph.tool
        async def team_delegate(agent_id: str, task: str) -> str:
            """Have another agent do a task (fixture of the teams family: it goes through the one door)."""
            call = aleph.current_call()
            assert call is not None
            member = await call.delegate(agent_id, purpose=task)
            await member.execute("file_write", {"path": task})
            return "done"

        register(file_write)
        register(read_note)
        register(team_delegate)


CONFIG = """
[agents.mallory.tool_permissions.overrides]
file_write = "deny"
[agents.admin]
accepts_delegation_from = ["alice"]
[agents.alice]
accepts_delegation_from = ["*"]
[agents.bob]
accepts_delegation_from = ["*"]
[agents.carol]
accepts_delegation_from = ["*"]
[agents.dave]
accepts_delegation_from = ["*"]
"""


def runtime(workspace: Path, extra: str = "") -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(CONFIG + extra)
    return aleph.load(plugins=[Plugin()], entry_points=False, strict=True)


@pytest.fixture(autouse=True)
def _clear() -> None:
    WRITTEN.clear()


def turn(session: str, **kw: Any) -> aleph.TurnContext:
    return aleph.TurnContext(session_key=session, **kw)


class TestNeverGains:
    @pytest.mark.anyio
    async def test_mallory_cannot_write_through_admin_even_when_an_operator_approves(self, workspace: Path) -> None:
        extra = '[agents.admin.tool_permissions.overrides]\nfile_write = "allow"\n'
        async with runtime(workspace, extra) as rt:
            mallory = rt.tool_service(
                agent="mallory", turn=turn("m"), requester=ScriptedRequester([ApprovalOutcome.APPROVED])
            )
            admin = await mallory.delegate("admin", purpose="write via_admin.txt")
            with pytest.raises(PermissionDenied):
                await admin.execute("file_write", {"path": "via_admin.txt"})
            assert await admin.describe("file_write") is None  # hidden like any deny
        assert WRITTEN == []

    @pytest.mark.anyio
    async def test_a_deny_anywhere_in_a_long_chain_holds_at_the_end(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="alice", turn=turn("a"))
            for agent in ("bob", "mallory", "carol", "dave"):
                svc = await svc.delegate(agent, purpose="pass it on") if agent != "mallory" else svc
                if agent == "mallory":
                    svc = await _delegate_with_consent(rt, svc, "mallory")
            assert svc.principal.agents == ("dave", "carol", "mallory", "bob", "alice")
            with pytest.raises(PermissionDenied):
                await svc.execute("file_write", {"path": "x"})

    @pytest.mark.anyio
    async def test_allow_sets_intersect_and_the_strictest_tier_wins(self, workspace: Path) -> None:
        extra = '[agents.eve]\nallowed_tools = ["read_note", "file_write"]\nexec_tier = "plan"\n'
        extra += 'accepts_delegation_from = ["*"]\n'
        extra += '[agents.frank]\nallowed_tools = ["read_note", "team_delegate"]\n'
        async with runtime(workspace, extra) as rt:
            frank = rt.tool_service(agent="frank", turn=turn("f"))
            eve = await frank.delegate("eve", purpose="read")
            assert {d.name for d in await eve.list()} == {"read_note"}
            assert eve.tier == aleph.ExecTier.PLAN
            assert (await eve.execute("read_note", {})).text == "note"

    @pytest.mark.anyio
    async def test_a_guest_chain_stays_guest(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            guest = rt.tool_service(agent="alice", turn=turn("g", caller_role="guest"))
            bob = await guest.delegate("bob", purpose="help")
            assert bob.principal.role == "guest" and bob.turn is not None and bob.turn.caller_role == "guest"

    @pytest.mark.anyio
    async def test_an_unattended_or_planning_parent_keeps_its_flags(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            parent = rt.tool_service(agent="alice", turn=turn("u", unattended=True, plan_mode=True))
            child = await parent.delegate("bob", purpose="x", turn=aleph.TurnContext(session_key="b-1"))
            assert child.turn is not None and child.turn.unattended and child.turn.plan_mode

    @pytest.mark.anyio
    async def test_a_rebuilt_delegated_principal_gets_the_chain_policy(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            rebuilt = aleph.Principal("mallory").acting_as("admin")
            svc = rt.tool_service(principal=rebuilt)
            with pytest.raises(PermissionDenied):
                await svc.execute("file_write", {"path": "x"})


class TestBudgets:
    @pytest.mark.anyio
    async def test_a_chain_of_depth_four_never_spends_more_than_the_top_budget(self, workspace: Path) -> None:
        top = Budget(calls=5, name="top")
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="alice", turn=turn("a", budget=top))
            await svc.execute("read_note", {})
            for agent in ("bob", "carol", "dave", "alice"):
                svc = await svc.delegate(agent, purpose="go deeper")
            assert svc.principal.depth == 4
            ran = 0
            with pytest.raises(PermissionDenied, match="cap of 5"):
                for _ in range(10):
                    await svc.execute("read_note", {})
                    ran += 1
        assert ran == 4 and top.usage().calls == 5

    @pytest.mark.anyio
    async def test_a_child_cannot_reserve_more_than_its_parent_has_left(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="alice", turn=turn("a", budget=Budget(calls=3, name="team")))
            with pytest.raises(PermissionDenied, match="asks for 8 calls"):
                await svc.delegate("bob", purpose="too much", budget={"calls": 8})
            child = await svc.delegate("bob", purpose="fits", budget={"calls": 2})
            with pytest.raises(PermissionDenied, match="only 1 calls left"):
                await svc.delegate("carol", purpose="sibling", budget={"calls": 2})
            grandchild = await child.delegate("carol", purpose="nested")  # shares bob's 2
            await grandchild.execute("read_note", {})
            await grandchild.execute("read_note", {})
            with pytest.raises(PermissionDenied):
                await grandchild.execute("read_note", {})

    @pytest.mark.anyio
    async def test_an_unbudgeted_member_cannot_escape_its_teams_cap(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            member = rt.tool_service(agent="bob", turn=turn("b", budget=Budget(calls=3, name="team")))
            own_team = await member.delegate("carol", purpose="my own team, no budget")
            runs = 0
            with pytest.raises(PermissionDenied):
                for _ in range(8):
                    await own_team.execute("read_note", {})
                    runs += 1
        assert runs == 3

    @pytest.mark.anyio
    async def test_an_unknown_budget_key_is_refused_by_name(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="alice", turn=turn("a"))
            with pytest.raises(PermissionDenied, match="dollars"):
                await svc.delegate("bob", purpose="x", budget={"dollars": 3})


class TestConsent:
    @pytest.mark.anyio
    async def test_without_consent_an_operator_is_asked_with_who_wants_what(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            asked = ScriptedRequester([ApprovalOutcome.APPROVED])
            mallory = rt.tool_service(agent="mallory", turn=turn("m"), requester=asked)
            result = await mallory.call("team_delegate", {"agent_id": "admin", "task": "write via_admin.txt"})
        assert not result.success and WRITTEN == []  # approved enrolment, but the write is still mallory's deny
        (request,) = asked.requests
        assert request.summary == "mallory wants admin to write via_admin.txt on its behalf"
        assert request.tool_name == "delegate"

    @pytest.mark.anyio
    async def test_an_operator_refusal_refuses_the_delegation(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            bob = rt.tool_service(agent="bob", turn=turn("b"), requester=ScriptedRequester([ApprovalOutcome.DENIED]))
            with pytest.raises(aleph.ApprovalDenied, match="bob wants admin"):
                await bob.delegate("admin", purpose="rotate keys")

    @pytest.mark.anyio
    @pytest.mark.parametrize(
        ("turn_kw", "requester", "why"),
        [
            ({"unattended": True}, True, "unattended"),
            ({"caller_role": "guest"}, True, "a guest cannot approve"),
            ({}, False, "no approval channel"),
        ],
        ids=["unattended", "guest", "no-requester"],
    )
    async def test_without_consent_nobody_who_cannot_approve_gets_through(
        self, workspace: Path, turn_kw: dict[str, Any], requester: bool, why: str
    ) -> None:
        async with runtime(workspace) as rt:
            req = ScriptedRequester([ApprovalOutcome.APPROVED]) if requester else None
            svc = rt.tool_service(agent="mallory", turn=turn("m", **turn_kw), requester=req)
            with pytest.raises(PermissionDenied, match=why):
                await svc.delegate("admin", purpose="run the scheduler job")
            assert req is None or req.requests == []
            ledger = rt.chokepoint.ledger
            assert ledger is not None
            await ledger.flush()
            row = ledger.rows("mallory")[-1]
        assert (row.action, row.target, row.refs) == ("tool_denied", "delegate", {"delegate_to": "admin"})

    @pytest.mark.anyio
    async def test_consent_must_cover_every_agent_of_the_chain(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            alice = rt.tool_service(agent="alice", turn=turn("a", unattended=True))
            admin = await alice.delegate("admin", purpose="ok: admin accepts alice")
            mallory = rt.tool_service(agent="mallory", turn=turn("m", unattended=True))
            via_bob = await mallory.delegate("bob", purpose="bob accepts anyone")
            with pytest.raises(PermissionDenied, match="has not accepted"):
                await via_bob.delegate("admin", purpose="admin does not accept mallory")
        assert admin.principal.agents == ("admin", "alice")

    @pytest.mark.anyio
    async def test_a_session_grant_for_one_chain_is_not_reused_by_another(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            first = ScriptedRequester([ApprovalOutcome.APPROVED_FOR_SESSION])
            mallory = rt.tool_service(agent="mallory", turn=turn("m"), requester=first)
            await mallory.delegate("admin", purpose="a")
            await mallory.delegate("admin", purpose="b")  # the session grant holds for mallory
            other = ScriptedRequester()
            bob = rt.tool_service(agent="bob", turn=turn("b"), requester=other)
            with pytest.raises(PermissionDenied):
                await bob.delegate("admin", purpose="a")
        assert len(first.requests) == 1 and len(other.requests) == 1

    @pytest.mark.anyio
    async def test_chains_stop_at_the_depth_limit(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="alice", turn=turn("a"))
            for i in range(MAX_DELEGATION_DEPTH):
                svc = await svc.delegate("bob" if i % 2 == 0 else "alice", purpose="ping-pong")
            with pytest.raises(PermissionDenied, match="at most"):
                await svc.delegate("carol", purpose="one more")

    @pytest.mark.anyio
    @pytest.mark.parametrize("agent", ["", "../admin", "a" * 65, "ad min", "ádmin"])
    async def test_a_malformed_agent_name_is_refused(self, workspace: Path, agent: str) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="alice", turn=turn("a"))
            with pytest.raises(PermissionDenied, match="not an agent name"):
                await svc.delegate(agent, purpose="x")

    @pytest.mark.anyio
    async def test_a_delegated_session_must_be_the_delegates_own(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            rt.tool_service(agent="alice", turn=turn("alice-chat"))
            bob = rt.tool_service(agent="bob", turn=turn("b"))
            with pytest.raises(PermissionDenied, match="belongs to another agent"):
                await bob.delegate("carol", purpose="x", turn=aleph.TurnContext(session_key="alice-chat"))


async def _delegate_with_consent(rt: aleph.Aleph, svc: aleph.ScopedToolService, agent: str) -> Any:
    """Delegate to an agent whose config does not list the chain: an operator approves once."""
    approving = svc.derive(requester=ScriptedRequester([ApprovalOutcome.APPROVED]))
    return await approving.delegate(agent, purpose="join")


class TestPrompts:
    @pytest.mark.anyio
    async def test_an_approval_asked_for_a_chain_names_on_whose_behalf(self, workspace: Path) -> None:
        extra = '[policies.tool_permissions.overrides]\nread_note = "ask"\n'
        async with runtime(workspace, extra) as rt:
            asked = ScriptedRequester([ApprovalOutcome.APPROVED])
            alice = rt.tool_service(agent="alice", turn=turn("a"), requester=asked)
            admin = await alice.delegate("admin", purpose="read the note")
            assert (await admin.execute("read_note", {})).text == "note"
        assert asked.requests[-1].summary.startswith("admin on behalf of alice: ")
