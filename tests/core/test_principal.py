"""Who is calling: the principal the host binds, sessions owned by an agent, and roles enforced as facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, PermissionDenied, Principal, ScriptedRequester
from aleph._principal import MAX_DELEGATION_DEPTH

SEEN: list[Principal | None] = []


class Plugin:
    ALEPH_PLUGIN_NAME = "principal_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool(idempotent=True)
        def whoami(agent: str = "", session: str = "") -> str:
            """Report the principal (fixture); its arguments pretend to name another one."""
            SEEN.append(aleph.current_principal())
            call = aleph.current_call()
            assert call is not None and call.principal is aleph.current_principal()
            return "ok"

        @aleph.tool(requires_role="operator")
        def reboot() -> str:
            """Reboot the host (fixture, operator only)."""
            return "rebooted"

        @aleph.tool(requires_role="member", idempotent=True)
        def team_board() -> str:
            """Read the team board (fixture, members and operators)."""
            return "board"

        @aleph.tool
        def open_session(key: str) -> str:
            """Open a session by key (fixture of a family's session_new)."""
            call = aleph.current_call()
            assert call is not None
            if not call.claim_session(key):
                return "no such session"
            return f"opened {key}"

        register(whoami)
        register(reboot)
        register(team_board)
        register(open_session)


def runtime(workspace: Path, extra: str = "") -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(extra)
    return aleph.load(plugins=[Plugin()], entry_points=False, strict=True)


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


class TestPrincipalValue:
    def test_chain_is_nearest_first_and_origin_is_who_started_it(self) -> None:
        alice = Principal("alice", "chat", "s1")
        bob = alice.acting_as("bob")
        carol = bob.acting_as("carol")
        assert carol.agents == ("carol", "bob", "alice")
        assert carol.origin.agent == "alice" and carol.chain[0].agent == "bob"
        assert (carol.depth, carol.owner, carol.channel) == (2, "carol", "chat")
        assert all(not p.chain for p in carol.chain)  # each link is stored flat

    def test_the_same_agent_acting_for_someone_else_is_another_principal(self) -> None:
        plain = Principal("admin", "chat")
        delegated = Principal("mallory", "chat").acting_as("admin")
        assert plain != delegated and plain.key() != delegated.key()
        assert hash(plain) != hash(delegated) or plain != delegated

    @pytest.mark.parametrize("role", ["root", "", "Operator"])
    def test_an_unknown_role_is_refused(self, role: str) -> None:
        with pytest.raises(ValueError, match="role"):
            Principal("a", role=role)  # type: ignore[arg-type]

    def test_a_chain_deeper_than_the_limit_cannot_be_built(self) -> None:
        p = Principal("a0")
        for i in range(MAX_DELEGATION_DEPTH):
            p = p.acting_as(f"a{i + 1}")
        with pytest.raises(ValueError, match="at most"):
            p.acting_as("one-too-many")

    def test_role_order_is_operator_member_guest(self) -> None:
        assert Principal("a", role="operator").has_role("member")
        assert Principal("a", role="member").has_role("member")
        assert not Principal("a", role="guest").has_role("member")
        assert not Principal("a", role="member").has_role("operator")


class TestBinding:
    @pytest.mark.anyio
    async def test_the_host_binds_agent_channel_session_role_and_user(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            turn = aleph.TurnContext(session_key="s-ana", caller_role="member", principal="ana")
            await rt.tool_service(agent="alice", channel="chat", turn=turn).execute("whoami", {})
        assert SEEN == [Principal("alice", "chat", "s-ana", "member", (), "ana")]

    @pytest.mark.anyio
    async def test_no_argument_names_or_changes_the_principal(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="mallory", turn=aleph.TurnContext(session_key="m1"))
            await svc.execute("whoami", {"agent": "admin", "session": "admin-chat"})
        assert [(p.agent, p.session) for p in SEEN if p] == [("mallory", "m1")]

    @pytest.mark.anyio
    async def test_a_channel_role_applies_when_the_turn_names_none(self, workspace: Path) -> None:
        async with runtime(workspace, '[channels.public]\nrole = "guest"\n') as rt:
            await rt.tool_service(agent="a", channel="public").execute("whoami", {})
        assert SEEN[0] is not None and SEEN[0].role == "guest"

    @pytest.mark.anyio
    async def test_outside_a_call_there_is_no_principal(self) -> None:
        assert aleph.current_principal() is None

    @pytest.mark.anyio
    async def test_a_given_principal_must_agree_with_agent_and_channel(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            with pytest.raises(ValueError, match="agree"):
                rt.tool_service(agent="admin", principal=Principal("mallory"))
            svc = rt.tool_service(principal=Principal("mallory", "chat", "m-s", "guest"))
            await svc.execute("whoami", {})
        assert SEEN == [Principal("mallory", "chat", "m-s", "guest")]


class TestSessions:
    @pytest.mark.anyio
    async def test_a_session_belongs_to_the_first_agent_that_uses_it(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-chat"))
            with pytest.raises(PermissionDenied, match="belongs to another agent"):
                rt.tool_service(agent="mallory", turn=aleph.TurnContext(session_key="alice-chat"))
            rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-chat"))  # still alice's

    @pytest.mark.anyio
    async def test_ownership_survives_a_restart(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-chat"))
        async with runtime(workspace) as rt:
            with pytest.raises(PermissionDenied):
                rt.tool_service(agent="mallory", turn=aleph.TurnContext(session_key="alice-chat"))

    @pytest.mark.anyio
    async def test_a_tool_naming_a_foreign_session_answers_like_a_missing_one(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-chat"))
            mallory = rt.tool_service(agent="mallory", turn=aleph.TurnContext(session_key="m1"))
            foreign = await mallory.call("open_session", {"key": "alice-chat"})
            fresh = await mallory.call("open_session", {"key": "m2"})
            again = await mallory.call("open_session", {"key": "m2"})
        assert foreign.output == "no such session"
        assert fresh.output == again.output == "opened m2"

    @pytest.mark.anyio
    async def test_deriving_a_turn_cannot_move_into_a_foreign_session(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-chat"))
            mallory = rt.tool_service(agent="mallory", turn=aleph.TurnContext(session_key="m1"))
            with pytest.raises(PermissionDenied):
                mallory.derive(turn=aleph.TurnContext(session_key="alice-chat"))
            moved = mallory.derive(turn=aleph.TurnContext(session_key="m-other"))
            await moved.execute("whoami", {})
        assert SEEN[0] is not None and (SEEN[0].agent, SEEN[0].session) == ("mallory", "m-other")


class TestRoles:
    @pytest.mark.anyio
    @pytest.mark.parametrize(
        ("role", "visible"),
        [(None, {"reboot", "team_board"}), ("member", {"team_board"}), ("guest", set())],
    )
    async def test_a_role_tool_is_hidden_from_weaker_callers(
        self, workspace: Path, role: str | None, visible: set[str]
    ) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="a", turn=aleph.TurnContext(caller_role=role))
            listed = {d.name for d in await svc.list()} & {"reboot", "team_board"}
            described = {n for n in ("reboot", "team_board") if await svc.describe(n) is not None}
        assert listed == described == visible

    @pytest.mark.anyio
    async def test_a_weaker_caller_is_refused_like_a_deny_and_it_is_recorded(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            svc = rt.tool_service(agent="g", turn=aleph.TurnContext(caller_role="guest"))
            with pytest.raises(PermissionDenied, match="needs the operator role"):
                await svc.execute("reboot", {})
            assert svc.decision_for("reboot", {}) == "deny"
            assert svc.decision_by_name("team_board") == "deny"
            ledger = rt.chokepoint.ledger
            assert ledger is not None
            await ledger.flush()
            row = ledger.rows("g")[-1]
        assert (row.action, row.target, row.rule) == ("tool_denied", "reboot", "requires_role")
        assert json.loads(row.principal or "{}")["role"] == "guest"

    @pytest.mark.anyio
    async def test_an_operator_runs_an_operator_tool(self, workspace: Path) -> None:
        async with runtime(workspace) as rt:
            out = await rt.tool_service(agent="op").execute("reboot", {})
        assert out.text == "rebooted"


class TestRecording:
    @pytest.mark.anyio
    async def test_ledger_rows_and_events_carry_the_principal_and_its_chain(self, workspace: Path) -> None:
        extra = '[agents.admin]\naccepts_delegation_from = ["alice"]\n'
        async with runtime(workspace, extra) as rt:
            alice = rt.tool_service(agent="alice", channel="chat", turn=aleph.TurnContext(session_key="a-1"))
            admin = await alice.delegate("admin", purpose="reboot the box", turn=aleph.TurnContext(session_key="ad-1"))
            await admin.execute("reboot", {})
            ledger, events = rt.chokepoint.ledger, rt.chokepoint.events
            assert ledger is not None and events is not None
            await ledger.flush()
            row = ledger.rows("admin")[-1]
            event = events.events("ad-1")[-1]
        for recorded in (row.principal, event.principal):
            data: dict[str, Any] = json.loads(recorded or "{}")
            assert (data["agent"], data["session"]) == ("admin", "ad-1")
            assert [(p["agent"], p["session"]) for p in data["chain"]] == [("alice", "a-1")]


class TestGrants:
    @pytest.mark.anyio
    async def test_an_always_grant_for_one_agent_does_not_cover_another(self, workspace: Path) -> None:
        extra = '[policies.tool_permissions.overrides]\nwhoami = "ask"\n'
        async with runtime(workspace, extra) as rt:
            alice = rt.tool_service(
                agent="alice",
                turn=aleph.TurnContext(session_key="a"),
                requester=ScriptedRequester([ApprovalOutcome.APPROVED_ALWAYS]),
            )
            await alice.execute("whoami", {})
            again = rt.tool_service(
                agent="alice", turn=aleph.TurnContext(session_key="a2"), requester=ScriptedRequester()
            )
            await again.execute("whoami", {})  # alice's always grant holds in her next session
            asked = ScriptedRequester()
            bob = rt.tool_service(agent="bob", turn=aleph.TurnContext(session_key="b"), requester=asked)
            with pytest.raises(aleph.ApprovalUnavailable):
                await bob.execute("whoami", {})
        assert len(asked.requests) == 1


class TestStoredPrincipals:
    def test_a_principal_round_trips_through_json(self) -> None:
        p = Principal("alice", "chat", "s1", "member", (), "ana").acting_as("bob", session="b1")
        assert Principal.from_json(json.loads(json.dumps(p.to_json()))) == p

    @pytest.mark.parametrize(
        "data",
        [[], {"agent": ""}, {"agent": "a", "role": "root"}, {"agent": "a", "chain": "x"}, {"agent": 3}],
        ids=["not-object", "no-agent", "bad-role", "bad-chain", "agent-not-text"],
    )
    def test_a_malformed_stored_principal_is_refused(self, data: object) -> None:
        with pytest.raises(ValueError):
            Principal.from_json(data)
