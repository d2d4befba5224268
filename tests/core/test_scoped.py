"""The chokepoint: ScopedToolService gates, approvals, tiers, recording (reference §2.3-2.11, §5, §6.1-6.2)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import (
    ApprovalDenied,
    ApprovalExpired,
    ApprovalUnavailable,
    Cancelled,
    PermissionDenied,
    ToolFacts,
    ToolNotFound,
    ToolRegistry,
    ToolSource,
    ToolTimeout,
    TransportError,
    ValidationFailed,
)
from aleph._chokepoint._approval import ApprovalDecision, ApprovalOutcome, ApprovalResponse
from aleph._chokepoint._gate import grant_fingerprint, summarize_call
from aleph._chokepoint._permissions import PermissionLayer, PermissionPolicy
from aleph._chokepoint._requesters import ScriptedRequester
from aleph._chokepoint._scoped import Chokepoint, ScopedToolService
from aleph._chokepoint._tiers import ExecTier
from aleph._chokepoint._verdict import PolicyVote
from aleph._ledger import Ledger
from aleph._turn import TurnContext

A = ApprovalOutcome
calls: list[tuple[str, dict[str, Any]]] = []


def make_tool(name: str, **facts: Any) -> aleph.LoopTool:
    async def handler(data: dict[str, Any]) -> dict[str, Any]:
        calls.append((name, data))
        turn = aleph._turn.current_turn()
        return {"tool": name, "args": data, "session": turn.session_key if turn else None}

    schema = {"type": "object", "properties": {}, "additionalProperties": True}
    return aleph.LoopTool(name, f"The {name} tool.", schema, handler, facts=ToolFacts(**facts))


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls.clear()


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(make_tool("alpha"))
    reg.register(make_tool("beta"))
    reg.register(make_tool("search", idempotent=True, concurrent_safe=True))
    reg.register(make_tool("file_delete"))
    reg.register(make_tool("agent_delete", requires_approval=True))
    reg.register(make_tool("file_ops"))
    reg.register(make_tool("self_config"))
    reg.register(make_tool("ask_user"))
    reg.register(make_tool("shell"))
    return reg


def policy(rules: dict[str, str] | None = None, default: str = "allow", *extra: PermissionLayer) -> PermissionPolicy:
    return PermissionPolicy(
        [PermissionLayer.from_config("global", {"default": default, "overrides": rules or {}}), *extra]
    )


def service(
    registry: ToolRegistry,
    *,
    rules: dict[str, str] | None = None,
    default: str = "allow",
    tier: ExecTier = ExecTier.AUTO,
    requester: Any = None,
    turn: TurnContext | None = None,
    cp: Chokepoint | None = None,
    **kwargs: Any,
) -> ScopedToolService:
    return ScopedToolService(
        cp or Chokepoint(registry), policy=policy(rules, default), tier=tier, requester=requester, turn=turn, **kwargs
    )


TURN = TurnContext(session_key="s1", run_id="r1")


# -- listing -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_filters_by_the_allow_set_and_an_empty_allow_set_allows_nothing(registry: ToolRegistry) -> None:
    assert [d.name for d in await service(registry, allowed=frozenset({"alpha", "search"})).list()] == [
        "alpha",
        "search",
    ]
    empty = service(registry, allowed=frozenset())
    assert await empty.list() == []
    with pytest.raises(ToolNotFound):
        await empty.execute("alpha", {})


@pytest.mark.anyio
async def test_deny_hides_the_tool_everywhere_and_refuses_it_quoting_rule_and_layer(registry: ToolRegistry) -> None:
    svc = service(registry, rules={"*_delete": "deny"})
    names = [d.name for d in await svc.list()]
    assert "file_delete" not in names and "agent_delete" not in names and "alpha" in names
    assert await svc.describe("file_delete") is None
    assert "file_delete" not in [d["name"] for d in await svc.dispatcher_schema()]
    assert "file_delete" not in [d.name for d in await svc.dispatchable_list()]
    with pytest.raises(PermissionDenied) as info:
        await svc.execute("file_delete", {})
    assert "`file_delete` is denied by `*_delete` in the global layer" in str(info.value)
    assert str(info.value).endswith(
        "Do not retry; ask the user to adjust `[policies.tool_permissions]` if this tool is needed."
    )
    assert (await svc.execute("alpha", {})).value["tool"] == "alpha"  # a sibling still runs


@pytest.mark.anyio
async def test_alias_spellings_hit_the_same_gates(registry: ToolRegistry) -> None:
    svc = service(registry, rules={"file_delete": "deny"})
    for spelling in ("file.delete", "File_Delete", "FILE.DELETE"):
        with pytest.raises(PermissionDenied, match="`file_delete` is denied"):
            await svc.execute(spelling, {})


@pytest.mark.anyio
async def test_default_deny_quotes_default(registry: ToolRegistry) -> None:
    with pytest.raises(PermissionDenied, match="denied by `default`"):
        await service(registry, default="deny").execute("alpha", {})


@pytest.mark.anyio
async def test_dispatcher_schema_is_the_same_object_until_the_registry_changes(registry: ToolRegistry) -> None:
    cp = Chokepoint(registry)
    pol = policy()
    first = await ScopedToolService(cp, policy=pol).dispatcher_schema()
    assert await ScopedToolService(cp, policy=pol).dispatcher_schema() is first
    registry.register(make_tool("gamma"))
    second = await ScopedToolService(cp, policy=pol).dispatcher_schema()
    assert second is not first and "gamma" in [d["name"] for d in second]


@pytest.mark.anyio
async def test_rewriters_apply_to_list_describe_and_schema_after_gating(registry: ToolRegistry) -> None:
    seen: list[str] = []

    def shout(d: aleph.ToolDefinition) -> aleph.ToolDefinition:
        seen.append(d.name)
        return aleph.ToolDefinition(d.name, d.description.upper(), d.input_schema, d.source, d.facts)

    svc = service(registry, rules={"beta": "deny"}, rewriters=[shout])
    assert (await svc.describe("alpha")).description == "THE ALPHA TOOL."  # type: ignore[union-attr]
    assert all(d["description"].isupper() for d in await svc.dispatcher_schema())
    assert "beta" not in seen


@pytest.mark.anyio
async def test_deferred_tools_are_hidden_from_list_but_describable_callable_and_dispatchable(
    registry: ToolRegistry,
) -> None:
    svc = service(registry, deferred=frozenset({"beta"}))
    assert "beta" not in [d.name for d in await svc.list()]
    assert "beta" in [d.name for d in await svc.dispatchable_list()]
    assert await svc.describe("beta") is not None
    assert (await svc.execute("beta", {})).value["tool"] == "beta"


@pytest.mark.anyio
async def test_unknown_tool_is_not_found_with_suggestions(registry: ToolRegistry) -> None:
    with pytest.raises(ToolNotFound, match="Did you mean: alpha"):
        await service(registry).execute("alpah", {})


# -- asking ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ask_rule_prompts_once_and_runs(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.APPROVED])
    out = await service(registry, rules={"alpha": "ask"}, requester=req).execute("alpha", {"x": 1})
    assert out.value["tool"] == "alpha"
    assert len(req.requests) == 1
    r = req.requests[0]
    assert (r.rule_id, r.summary) == ("policy_ask", "alpha: x=1")
    assert "`[policies.tool_permissions]` sets `alpha` = ask" in r.reason


@pytest.mark.anyio
async def test_ask_without_a_requester_fails_closed(registry: ToolRegistry) -> None:
    with pytest.raises(ApprovalUnavailable, match="No approval channel is available"):
        await service(registry, rules={"alpha": "ask"}).execute("alpha", {})
    assert calls == []


@pytest.mark.anyio
async def test_declared_confirmation_asks_under_full_even_with_an_allow_and_never_offers_always(
    registry: ToolRegistry,
) -> None:
    req = ScriptedRequester([A.APPROVED])
    await service(registry, rules={"agent_delete": "allow"}, tier=ExecTier.FULL, requester=req).execute(
        "agent_delete", {}
    )
    (r,) = req.requests
    assert r.rule_id == "tool_declared"
    assert "declares its own confirmation gate" in r.reason and "`full`" in r.reason
    assert ApprovalDecision.ALLOW_ALWAYS not in r.allowed_decisions
    with pytest.raises(ApprovalUnavailable) as info:
        await service(registry, tier=ExecTier.FULL).execute("agent_delete", {})
    assert "approval channel is available" in str(info.value)
    assert "declares its own confirmation gate" in str(info.value)


@pytest.mark.anyio
async def test_timeout_is_approval_expired_and_retryable_not_a_refusal(registry: ToolRegistry) -> None:
    with pytest.raises(ApprovalExpired) as info:
        await service(registry, rules={"alpha": "ask"}, requester=ScriptedRequester([A.TIMEOUT])).execute("alpha", {})
    assert info.value.is_retryable
    assert "did not approve" not in str(info.value)


@pytest.mark.anyio
async def test_denial_relays_the_users_reason_and_tells_the_model_not_to_work_around_it(
    registry: ToolRegistry,
) -> None:
    req = ScriptedRequester([ApprovalResponse(A.DENIED, "not on friday")])
    with pytest.raises(ApprovalDenied) as info:
        await service(registry, rules={"alpha": "ask"}, requester=req, turn=TURN).execute("alpha", {})
    message = str(info.value)
    assert info.value.kind == "approval_denied"
    assert "the user did not approve running `alpha` (denied)." in message
    assert 'The user said: "not on friday".' in message
    assert "do not attempt to achieve the same result by other means" in message
    assert calls == []


@pytest.mark.anyio
async def test_unavailable_says_nobody_was_asked_and_is_not_sticky(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.UNAVAILABLE, A.UNAVAILABLE])
    svc = service(registry, rules={"alpha": "ask"}, requester=req, turn=TURN)
    for _ in range(2):
        with pytest.raises(ApprovalUnavailable, match="nobody was asked"):
            await svc.execute("alpha", {})
    assert len(req.requests) == 2


@pytest.mark.anyio
async def test_session_grant_covers_exactly_the_same_arguments(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.APPROVED_FOR_SESSION, A.APPROVED_FOR_SESSION, A.APPROVED_FOR_SESSION])
    cp = Chokepoint(registry)
    svc = service(registry, rules={"file_ops": "ask"}, requester=req, turn=TURN, cp=cp)
    await svc.execute("file_ops", {"operation": "delete", "path": "a.txt"})
    await svc.execute("file_ops", {"path": "a.txt", "operation": "delete"})  # reordered
    assert len(req.requests) == 1
    await svc.execute("file_ops", {"operation": "delete", "path": "b.txt"})
    assert len(req.requests) == 2
    other = service(registry, rules={"file_ops": "ask"}, requester=req, turn=TurnContext(session_key="s2"), cp=cp)
    await other.execute("file_ops", {"operation": "delete", "path": "a.txt"})
    assert len(req.requests) == 3
    # This untyped tool gets its arguments as sent: an explicit null is another call (tests/mcp/test_approval_nulls.py).
    with pytest.raises(aleph.ApprovalUnavailable):
        await svc.execute("file_ops", {"path": "a.txt", "operation": "delete", "extra": None})
    assert len(req.requests) == 4


@pytest.mark.anyio
async def test_one_shot_approval_is_never_remembered(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.APPROVED, A.APPROVED])
    svc = service(registry, rules={"alpha": "ask"}, requester=req, turn=TURN)
    await svc.execute("alpha", {})
    await svc.execute("alpha", {})
    assert len(req.requests) == 2


@pytest.mark.anyio
async def test_always_on_a_card_that_did_not_offer_it_becomes_a_session_grant(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.APPROVED_ALWAYS, A.APPROVED])
    cp = Chokepoint(registry)
    await service(registry, tier=ExecTier.FULL, requester=req, turn=TURN, cp=cp).execute("agent_delete", {})
    await service(registry, tier=ExecTier.FULL, requester=req, turn=TURN, cp=cp).execute("agent_delete", {})
    assert len(req.requests) == 1
    await service(registry, tier=ExecTier.FULL, requester=req, turn=TurnContext(session_key="new"), cp=cp).execute(
        "agent_delete", {}
    )
    assert len(req.requests) == 2


@pytest.mark.anyio
async def test_member_cards_never_offer_always(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.APPROVED])
    member = TurnContext(session_key="m", caller_role="member")
    await service(registry, rules={"alpha": "ask"}, requester=req, turn=member).execute("alpha", {})
    assert ApprovalDecision.ALLOW_ALWAYS not in req.requests[0].allowed_decisions
    req2 = ScriptedRequester([A.APPROVED])
    await service(registry, rules={"alpha": "ask"}, requester=req2, turn=TURN).execute("alpha", {})
    assert ApprovalDecision.ALLOW_ALWAYS in req2.requests[0].allowed_decisions


@pytest.mark.anyio
async def test_unattended_never_asks_ignores_grants_and_ungated_tools_still_run(registry: ToolRegistry) -> None:
    cp = Chokepoint(registry)
    req = ScriptedRequester([A.APPROVED_FOR_SESSION])
    await service(registry, rules={"alpha": "ask"}, requester=req, turn=TURN, cp=cp).execute("alpha", {})
    unattended = TurnContext(session_key="s1", unattended=True)
    svc = service(registry, rules={"alpha": "ask"}, requester=req, turn=unattended, cp=cp)
    with pytest.raises(ApprovalUnavailable, match="nobody was asked") as info:
        await svc.execute("alpha", {})
    assert "unattended" in str(info.value)
    assert len(req.requests) == 1
    assert (await svc.execute("search", {})).value["tool"] == "search"


@pytest.mark.anyio
async def test_three_denials_pause_the_session(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.DENIED, A.DENIED, A.DENIED, A.APPROVED])
    svc = service(registry, rules={"alpha": "ask", "beta": "ask"}, requester=req, turn=TURN)
    for i in range(3):
        with pytest.raises(ApprovalDenied):
            await svc.execute("alpha", {"i": i})
    with pytest.raises(ApprovalDenied, match="autonomous escalation is paused"):
        await svc.execute("beta", {})
    assert len(req.requests) == 3


@pytest.mark.anyio
async def test_a_denied_exact_call_is_auto_refused_later_in_the_session(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.DENIED, A.APPROVED])
    svc = service(registry, rules={"alpha": "ask"}, requester=req, turn=TURN)
    with pytest.raises(ApprovalDenied):
        await svc.execute("alpha", {"x": 1})
    with pytest.raises(ApprovalDenied, match="denied earlier this session"):
        await svc.execute("alpha", {"x": 1})
    assert len(req.requests) == 1


@pytest.mark.anyio
async def test_prompts_redact_secrets_and_show_control_characters(registry: ToolRegistry) -> None:
    req = ScriptedRequester([A.APPROVED])
    await service(registry, rules={"alpha": "ask"}, requester=req).execute(
        "alpha",
        {"api_key": "sk-abcdefghijklmnopqrstuvwxyz", "note": "ok\u202egnp.exe", "url": "https://x?token=abc123"},
    )
    r = req.requests[0]
    assert "sk-abcdef" not in r.summary and "abc123" not in r.summary
    assert "\u202e" not in r.summary and "\\u202e" in r.summary
    assert r.arguments["api_key"] == "***"


# -- tiers ---------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tier", "tool", "expected"),
    [
        (ExecTier.ASK, "alpha", "ask"),
        (ExecTier.ASK, "search", "allow"),
        (ExecTier.ASK, "ask_user", "allow"),
        (ExecTier.AUTO, "alpha", "allow"),
        (ExecTier.AUTO, "file_delete", "ask"),
        (ExecTier.AUTO, "agent_delete", "ask"),
        (ExecTier.FULL, "file_delete", "allow"),
        (ExecTier.FULL, "agent_delete", "ask"),
        (ExecTier.PLAN, "alpha", "deny"),
        (ExecTier.PLAN, "search", "allow"),
        (ExecTier.PLAN, "ask_user", "allow"),
    ],
)
async def test_tier_matrix(registry: ToolRegistry, tier: ExecTier, tool: str, expected: str) -> None:
    assert service(registry, tier=tier).explain(tool, {}).decision == expected


@pytest.mark.anyio
async def test_unknown_tool_facts_fail_closed_under_ask_and_plan(registry: ToolRegistry) -> None:
    registry.register(make_tool("mystery"))
    assert service(registry, tier=ExecTier.ASK).explain("mystery").rule_id == "tier_raised"
    assert service(registry, tier=ExecTier.PLAN).explain("mystery").decision == "deny"


@pytest.mark.anyio
async def test_mcp_destructive_tag_asks_under_auto(registry: ToolRegistry) -> None:
    registry.register(make_tool("srv__drop", tags=("mcp", "destructive")), source=ToolSource.mcp("srv"))
    assert service(registry).explain("srv__drop").decision == "ask"


@pytest.mark.anyio
async def test_explicit_allow_beats_the_tier_but_not_plan(registry: ToolRegistry) -> None:
    assert service(registry, rules={"alpha": "allow"}, tier=ExecTier.ASK).explain("alpha").decision == "allow"
    assert service(registry, rules={"alpha": "allow"}, tier=ExecTier.PLAN).explain("alpha").decision == "deny"


@pytest.mark.anyio
async def test_no_tier_widens_a_deny_or_ask_default(registry: ToolRegistry) -> None:
    for tier in ExecTier:
        assert service(registry, default="deny", tier=tier).explain("search").decision == "deny"
    assert service(registry, default="ask", tier=ExecTier.FULL).explain("search").decision == "ask"


@pytest.mark.anyio
async def test_plan_mode_refusal_advises_to_request_approval(registry: ToolRegistry) -> None:
    with pytest.raises(PermissionDenied) as info:
        await service(registry, turn=TurnContext(session_key="p", plan_mode=True)).execute("alpha", {})
    assert "Do not retry this call before the plan is approved" in str(info.value)


@pytest.mark.anyio
async def test_file_ops_destructive_operations_ask_under_auto_only(registry: ToolRegistry) -> None:
    auto = service(registry)
    assert auto.explain("file_ops", {"operation": "list"}).decision == "allow"
    assert auto.explain("file_ops", {}).decision == "allow"
    for op in ("delete", "move", "batch_move", "organize"):
        assert auto.explain("file_ops", {"operation": op}).rule_id == "destructive_arguments"
    assert service(registry, tier=ExecTier.FULL).explain("file_ops", {"operation": "delete"}).decision == "allow"
    assert (
        service(registry, rules={"file_ops": "allow"}).explain("file_ops", {"operation": "delete"}).decision == "allow"
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "asks"),
    [
        ({"action": "update_config", "config_path": "policies.terminal.enabled"}, True),
        ({"action": "update_config", "config_path": "policies"}, True),
        ({"action": "update_config", "config_path": ""}, True),
        ({"action": "rollback_config"}, True),
        ({"action": "update_config", "config_path": "behavior.greeting"}, False),
        ({"action": "update_config", "config_path": "policies.terminal_legacy.x"}, False),
    ],
)
async def test_self_config_floor_applies_even_under_full(
    registry: ToolRegistry, args: dict[str, str], asks: bool
) -> None:
    verdict = service(registry, tier=ExecTier.FULL).explain("self_config", args)
    assert (verdict.rule_id == "gate_removal") is asks
    assert (
        service(registry, rules={"self_config": "allow"}, tier=ExecTier.FULL).explain("self_config", args).decision
        == "allow"
    )


# -- running ---------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_turn_context_is_visible_to_the_tool_only_during_the_call(registry: ToolRegistry) -> None:
    out = await service(registry, turn=TURN).execute("alpha", {})
    assert out.value["session"] == "s1"
    assert aleph._turn.current_turn() is None


@pytest.mark.anyio
async def test_budget_overrun_is_a_timeout(registry: ToolRegistry) -> None:
    async def slow(data: dict[str, Any]) -> str:
        await asyncio.sleep(5)
        return "late"

    registry.register(
        aleph.LoopTool("slowpoke", "Sleeps.", {"type": "object"}, slow, facts=ToolFacts(max_duration_ms=50))
    )
    with pytest.raises(ToolTimeout, match="timed out after 50ms"):
        await service(registry).execute("slowpoke", {})


@pytest.mark.anyio
async def test_each_call_keeps_its_own_budget_whatever_ran_before_or_beside_it(registry: ToolRegistry) -> None:
    async def nap(data: dict[str, Any]) -> str:
        await asyncio.sleep(data["seconds"])
        return "rested"

    for name, budget_ms in (("long_nap", 60_000), ("short_nap", 100)):
        registry.register(
            aleph.LoopTool(name, "Sleeps.", {"type": "object"}, nap, facts=ToolFacts(max_duration_ms=budget_ms))
        )
    svc = service(registry)
    loop = asyncio.get_running_loop()
    # A long budget first: a later, shorter one must still be enforced on time, alone or beside it.
    assert (await svc.execute("long_nap", {"seconds": 0.01})).value == "rested"
    for _ in range(2):
        start = loop.time()
        with pytest.raises(ToolTimeout, match="timed out after 100ms"):
            await svc.execute("short_nap", {"seconds": 5})
        assert loop.time() - start < 2
    beside = asyncio.ensure_future(svc.execute("long_nap", {"seconds": 0.4}))
    with pytest.raises(ToolTimeout):
        await svc.execute("short_nap", {"seconds": 5})
    assert not beside.done()  # the other call's budget is its own
    assert (await beside).value == "rested"
    assert (await svc.execute("short_nap", {"seconds": 0.01})).value == "rested"


@pytest.mark.anyio
async def test_idempotent_tools_are_retried_once_on_a_retryable_error_and_others_never(registry: ToolRegistry) -> None:
    attempts = {"flaky_read": 0, "flaky_write": 0}

    def flaky(name: str) -> Any:
        async def run(data: dict[str, Any]) -> str:
            attempts[name] += 1
            if attempts[name] == 1:
                raise TransportError(name, "connection reset")
            return "ok"

        return run

    registry.register(
        aleph.LoopTool(
            "flaky_read", "Reads.", {"type": "object"}, flaky("flaky_read"), facts=ToolFacts(idempotent=True)
        )
    )
    registry.register(
        aleph.LoopTool("flaky_write", "Writes.", {"type": "object"}, flaky("flaky_write"), facts=ToolFacts())
    )
    svc = service(registry)
    assert (await svc.execute("flaky_read", {})).value == "ok"
    with pytest.raises(TransportError):
        await svc.execute("flaky_write", {})
    assert attempts == {"flaky_read": 2, "flaky_write": 1}


@pytest.mark.anyio
async def test_cancel_aborts_a_running_tool_as_cancelled(registry: ToolRegistry) -> None:
    async def long(data: dict[str, Any]) -> str:
        await asyncio.sleep(5)
        return "done"

    registry.register(aleph.LoopTool("long_job", "Runs long.", {"type": "object"}, long, facts=ToolFacts()))
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, cancel.set)
    with pytest.raises(Cancelled) as info:
        await service(registry).execute("long_job", {}, cancel=cancel)
    assert info.value.is_retryable


@pytest.mark.anyio
async def test_a_panicking_tool_is_a_non_retryable_execution_failure(registry: ToolRegistry) -> None:
    async def boom(data: dict[str, Any]) -> str:
        raise KeyError("missing")

    registry.register(aleph.LoopTool("boom", "Fails.", {"type": "object"}, boom, facts=ToolFacts()))
    result = await service(registry).call("boom", {})
    assert result.success is False and "tool panicked: KeyError" in (result.error or "")
    assert result.retryable is False


@pytest.mark.anyio
async def test_input_bounds_are_enforced_before_anything_runs(registry: ToolRegistry) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ValidationFailed, match="nests deeper"):
        await service(registry).execute("alpha", deep)
    with pytest.raises(ValidationFailed, match="larger than"):
        await service(registry).execute("alpha", {"blob": "x" * 2_000_000})
    assert calls == []


@pytest.mark.anyio
async def test_large_outputs_are_persisted_with_a_marker(registry: ToolRegistry, tmp_path: Path) -> None:
    async def big(data: dict[str, Any]) -> str:
        return "y" * 5000

    registry.register(aleph.LoopTool("big_out", "Big.", {"type": "object"}, big, facts=ToolFacts(idempotent=True)))
    cp = Chokepoint(registry, data_dir=tmp_path, max_output_chars=1000)
    out = await service(registry, cp=cp, turn=TurnContext(session_key="s", call_id="c1")).execute("big_out", {})
    assert out.text.startswith("[Full output persisted: ")
    assert (tmp_path / "tool_results" / "s" / "c1.txt").read_text() == "y" * 5000


# -- plugin votes ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plugin_votes_can_only_tighten(registry: ToolRegistry) -> None:
    def voter(*, tool: str, **_: Any) -> PolicyVote | None:
        return {"alpha": PolicyVote("deny", "alpha is off today"), "beta": PolicyVote("ask", "beta is risky")}.get(tool)

    def broken(**_: Any) -> None:
        raise RuntimeError("bug")

    cp = Chokepoint(registry, voters=[("guard", voter)])
    with pytest.raises(PermissionDenied, match="refused by the plugin `guard`: alpha is off today"):
        await service(registry, cp=cp).execute("alpha", {})
    req = ScriptedRequester([A.APPROVED])
    await service(registry, cp=cp, requester=req).execute("beta", {})
    assert req.requests[0].rule_id == "plugin_requested"
    cp2 = Chokepoint(registry, voters=[("broken", broken)])
    assert service(registry, cp=cp2).explain("search", {}).decision == "ask"


# -- recording ----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_refusals_approvals_and_mutating_calls_are_recorded_reads_are_not(
    registry: ToolRegistry,
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger")
    cp = Chokepoint(registry, ledger=ledger)
    req = ScriptedRequester([A.APPROVED])
    svc = ScopedToolService(cp, policy=policy({"beta": "deny", "alpha": "ask"}), agent="ana", turn=TURN, requester=req)
    await svc.execute("alpha", {"n": 1})
    await svc.execute("search", {"q": "x"})
    with pytest.raises(PermissionDenied):
        await svc.execute("beta", {})
    with pytest.raises(ToolNotFound):
        await svc.execute("nope", {})
    await ledger.flush()
    rows = [(r.action, r.target, r.outcome) for r in ledger.rows("ana")]
    assert rows[0][0] == "identity_created"
    assert rows[1:] == [
        ("approval_granted", "alpha", "ok"),
        ("tool_call", "alpha", "ok"),
        ("tool_denied", "beta", "denied"),
    ]
    assert ledger.verify("ana").ok
    await ledger.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("args", [{"n": 1, "note": "x"}, {"n": 1, "items": ["a"]}], ids=["scalars", "nested"])
async def test_a_mutating_call_is_recorded_with_the_arguments_it_ran_with(
    registry: ToolRegistry, tmp_path: Path, args: dict[str, Any]
) -> None:
    # Plain scalar arguments are copied and the row is built by the writer thread; others are built at
    # once. Either way a caller that reuses its dict afterwards does not change what was recorded.
    ledger = Ledger(tmp_path / "ledger")
    svc = ScopedToolService(Chokepoint(registry, ledger=ledger), policy=policy(), agent="ana", turn=TURN)
    expected = (summarize_call("alpha", args), grant_fingerprint("alpha", args))
    await svc.execute("alpha", args)
    args["n"] = 2
    args.setdefault("items", []).append("b")
    await ledger.flush()
    row = ledger.rows("ana")[-1]
    assert ("tool_call", *expected) == (row.action, row.detail, row.args_fp)
    assert ledger.verify("ana").ok
    await ledger.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("secret", "other"),
    [
        ({"user": "ana", "password": "hunter2"}, {"user": "ana", "password": "letmein"}),
        ({"headers": {"X-Api-Key": "1234"}}, {"headers": {"X-Api-Key": "9999"}}),
        ({"steps": [{"passphrase": "blue"}]}, {"steps": [{"passphrase": "red"}]}),
    ],
    ids=["top-level", "nested", "in-a-list"],
)
async def test_a_recorded_fingerprint_cannot_be_used_to_guess_a_secret_argument(
    registry: ToolRegistry, tmp_path: Path, secret: dict[str, Any], other: dict[str, Any]
) -> None:
    # The row's args_fp is a plain SHA-256 kept in the ledger: with a low-entropy password inside it,
    # anyone holding an export could try guesses offline. Secret-named string values are masked in it
    # (the human approving the call saw *** there too); everything else still tells calls apart.
    ledger = Ledger(tmp_path / "ledger")
    svc = ScopedToolService(Chokepoint(registry, ledger=ledger), policy=policy(), agent="ana", turn=TURN)
    await svc.execute("alpha", secret)
    await ledger.flush()
    row = ledger.rows("ana")[-1]
    plain = json.dumps(secret, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    guessed = hashlib.sha256(b"alpha\x1f" + plain.encode()).hexdigest()[:32]
    assert row.args_fp == grant_fingerprint("alpha", other) != guessed
    assert grant_fingerprint("alpha", {**secret, "n": 1}) != row.args_fp
    await ledger.aclose()


@pytest.mark.anyio
async def test_a_call_whose_row_cannot_be_stored_is_never_answered_as_a_success(registry: ToolRegistry) -> None:
    class Broken:
        on_failure = "refuse"

        async def append(self, record: Any, *, durable: bool = False) -> None:
            raise OSError("disk full")

    cp = Chokepoint(registry, ledger=Broken())  # type: ignore[arg-type]
    with pytest.raises(aleph.ExecutionFailed, match="it ran and its effect is real, but the audit ledger could not"):
        await service(registry, cp=cp).execute("alpha", {})
    Broken.on_failure = "continue"  # availability chosen: the result stands, with a warning
    result = await service(registry, cp=cp).call("alpha", {})
    assert result.success and "alpha" in result.output
    assert ["this call ran but is not in the audit ledger: the ledger failed: OSError"] == list(result.warnings)


@pytest.mark.anyio
async def test_explain_names_decision_rule_and_layer(registry: ToolRegistry) -> None:
    agent_layer = PermissionLayer.from_config("agent:ana", {"overrides": {"alpha": "deny"}})
    svc = ScopedToolService(Chokepoint(registry), policy=policy({"alpha": "allow"}, "allow", agent_layer))
    e = svc.explain("alpha", {})
    assert (e.decision, e.rule, e.layer) == ("deny", "alpha", "agent:ana")
    assert json.loads(json.dumps(e.to_json()))["decision"] == "deny"


@pytest.mark.anyio
async def test_path_rules_see_the_paths_a_tool_names_itself(registry: ToolRegistry) -> None:
    class Patcher(aleph.LoopTool):
        def subject_paths(self, input: dict[str, Any]) -> list[str]:
            return [line.split(": ", 1)[1] for line in str(input.get("patch", "")).splitlines() if ": " in line]

    async def apply(data: dict[str, Any]) -> str:
        return "applied"

    registry.register(Patcher("apply_patch", "Apply a patch.", {"type": "object"}, apply, facts=ToolFacts()))
    svc = service(registry, rules={"apply_patch(secrets/**)": "deny", "apply_patch(src/**)": "allow"})
    assert svc.explain("apply_patch", {"patch": "*** Update File: src/a.py"}).decision == "allow"
    assert svc.explain("apply_patch", {"patch": "*** Update File: src/a.py\n*** Add File: secrets/k"}).decision == (
        "deny"
    )


@pytest.mark.anyio
async def test_a_copy_that_overwrites_asks_under_auto(registry: ToolRegistry) -> None:
    svc = service(registry)
    assert svc.explain("file_ops", {"operation": "copy", "overwrite": True}).rule_id == "destructive_arguments"
    assert svc.explain("file_ops", {"operation": "copy"}).decision == "allow"


def test_a_command_block_reason_is_quoted_unchanged() -> None:
    from aleph._chokepoint._permissions import PolicyDecision
    from aleph._chokepoint._verdict import decide_call

    verdict = decide_call(
        tool="bash",
        facts=ToolFacts(),
        decision=PolicyDecision("allow", None, "default", False),
        tier=ExecTier.FULL,
        turn=None,
        input={},
        names_exactly=False,
        command=("block", "blocked by command policy [write_protected]: writes ../.git/hooks/x.", ("write_protected",)),
    )
    assert verdict.reason == "`bash`: blocked by command policy [write_protected]: writes ../.git/hooks/x."
    assert verdict.rule_id == "command_blocked"


def test_decision_by_name_is_given_only_where_no_argument_can_change_it(registry: ToolRegistry) -> None:
    svc = service(
        registry,
        rules={"alpha": "ask", "beta": "deny", "search": "allow", "file_ops(secrets/**)": "deny"},
        allowed=frozenset({"alpha", "beta", "search", "file_ops", "agent_delete"}),
    )
    assert svc.decision_by_name("search") == "allow" == svc.decision_for("search", {})
    assert svc.decision_by_name("alpha") == "ask" and svc.decision_by_name("beta") == "deny"
    assert svc.decision_by_name("file_ops") is None  # an argument rule may deny some calls: ask per call
    assert svc.decision_by_name("agent_delete") == "ask"  # the tool declares it needs approval
    assert svc.decision_by_name("shell") == "deny"  # outside the allow-set
    assert svc.decision_by_name("no_such_tool") == "deny"
    planning = svc.derive(turn=TurnContext(session_key="s1", plan_mode=True))
    assert planning.decision_by_name("search") == "allow" and planning.decision_by_name("alpha") == "deny"
