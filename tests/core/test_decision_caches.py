"""The chokepoint's caches never answer for another policy, turn, principal or layer (issue 34).

Every decision below is first made (so each cache is warm: the name-level verdicts, the listing, the
request-layer LRU, the compiled argument rules), then the thing it depends on changes and the same call
is made again through the real runtime: the new answer must be the changed one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aleph

pytestmark = pytest.mark.anyio


@aleph.tool(idempotent=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def config(workspace: Path, body: str) -> Path:
    path = workspace / "aleph.toml"
    path.write_text("[workspace]\ndata_dir = '.d'\n" + body)
    return path


async def decided(service: aleph.ScopedToolService, a: int = 1, b: int = 2) -> str:
    """What the call was answered with: its value, or the refusal's kind."""
    try:
        return str((await service.execute("add", {"a": a, "b": b})).value)
    except aleph.ApprovalUnavailable:  # would have asked a human; none is connected here
        return "asked"
    except aleph.PermissionDenied:
        return "denied"
    except aleph.ToolNotFound:
        return "not found"


async def runtime(path: Path) -> aleph.Aleph:
    rt = aleph.load(path, entry_points=False)
    rt.register(add)
    return rt


async def test_reload_config_puts_a_changed_rule_in_force_for_the_next_service(workspace: Path) -> None:
    path = config(workspace, "[policies.tool_permissions.overrides]\nadd = 'allow'\n")
    async with await runtime(path) as rt:
        assert await decided(rt.tool_service(agent="ana")) == "3"
        assert [d.name for d in await rt.tool_service(agent="ana").list()].count("add") == 1
        config(workspace, "[policies.tool_permissions.overrides]\nadd = 'deny'\n")
        rt.reload_config()
        assert await decided(rt.tool_service(agent="ana")) == "denied"
        assert "add" not in [d.name for d in await rt.tool_service(agent="ana").list()]


async def test_reload_config_changes_an_argument_rule_the_old_policy_had_compiled(workspace: Path) -> None:
    path = config(workspace, "[policies.tool_permissions.overrides]\n'add(b=2)' = 'deny'\n")
    async with await runtime(path) as rt:
        assert await decided(rt.tool_service(agent="ana"), b=2) == "denied"
        assert await decided(rt.tool_service(agent="ana"), b=3) == "4"
        config(workspace, "[policies.tool_permissions.overrides]\n'add(b=3)' = 'deny'\n")
        rt.reload_config()
        assert await decided(rt.tool_service(agent="ana"), b=2) == "3"
        assert await decided(rt.tool_service(agent="ana"), b=3) == "denied"


async def test_a_changed_request_layer_is_judged_afresh_every_time(workspace: Path) -> None:
    async with await runtime(config(workspace, "")) as rt:

        def with_rules(rules: dict[str, str]) -> aleph.ScopedToolService:
            return rt.tool_service(agent="gw", channel_permissions={"default": "allow", "overrides": rules})

        for _ in range(2):  # the second round is served from the request-layer cache
            assert await decided(with_rules({"add(b=2)": "deny"})) == "denied"
            assert await decided(with_rules({"add(b=9)": "deny"})) == "3"
            assert await decided(with_rules({"add(b=2)": "ask"})) == "asked"
            assert await decided(with_rules({"add": "deny"})) == "denied"
            assert await decided(with_rules({})) == "3"


async def test_another_agent_or_channel_never_gets_a_cached_decision(workspace: Path) -> None:
    body = (
        "[agents.ana.tool_permissions.overrides]\n'add(b=2)' = 'deny'\n"
        "[channels.ops.tool_permissions.overrides]\nadd = 'deny'\n"
    )
    async with await runtime(config(workspace, body)) as rt:
        for _ in range(2):
            assert await decided(rt.tool_service(agent="ana")) == "denied"
            assert await decided(rt.tool_service(agent="bob")) == "3"
            assert await decided(rt.tool_service(agent="bob", channel="ops")) == "denied"
            assert await decided(rt.tool_service(agent="bob", channel="lobby")) == "3"


async def test_acting_for_another_agent_is_judged_by_the_whole_chain_not_a_cached_single_policy(
    workspace: Path,
) -> None:
    body = "[agents.boss.tool_permissions.overrides]\n'add(b=2)' = 'deny'\n"
    async with await runtime(config(workspace, body)) as rt:
        alone = aleph.Principal("helper", None, "s1")
        chained = aleph.Principal("boss", None, "s2").acting_as("helper", session="s3")
        for _ in range(2):
            assert await decided(rt.tool_service(principal=alone)) == "3"
            assert await decided(rt.tool_service(principal=chained)) == "denied"
            assert await decided(rt.tool_service(principal=chained), b=5) == "6"


async def test_a_plan_mode_turn_is_not_answered_from_the_normal_turns_verdicts(workspace: Path) -> None:
    mutating = aleph.tool(name="poke", description="Change something.")(lambda: "poked")
    async with await runtime(config(workspace, "")) as rt:
        rt.register(mutating)
        normal = aleph.TurnContext(session_key="s")
        planning = aleph.TurnContext(session_key="s", plan_mode=True)
        for _ in range(2):
            assert (await rt.tool_service(agent="ana", turn=normal).execute("poke", {})).value == "poked"
            with pytest.raises(aleph.PermissionDenied):
                await rt.tool_service(agent="ana", turn=planning).execute("poke", {})


async def test_a_tool_registered_after_a_listing_is_listed_and_judged(workspace: Path) -> None:
    body = "[policies.tool_permissions.overrides]\nlate = 'deny'\n"
    async with await runtime(config(workspace, body)) as rt:
        service = rt.tool_service(agent="ana")
        before = {d.name for d in await service.list()}
        rt.register(aleph.tool(name="late", description="Registered late.", idempotent=True)(lambda: 1))
        rt.register(aleph.tool(name="later", description="Registered later.", idempotent=True)(lambda: 2))
        after = {d.name for d in await service.list()}
        assert after - before == {"later"}
        with pytest.raises(aleph.PermissionDenied):
            await service.execute("late", {})


# -- the per-service resolution memo (issue 34): one service, reused, derived, changed in place -----------


async def test_a_derived_services_plan_mode_turn_is_not_answered_from_its_parents_memo(workspace: Path) -> None:
    mutating = aleph.tool(name="poke", description="Change something.")(lambda: "poked")
    async with await runtime(config(workspace, "")) as rt:
        rt.register(mutating)
        parent = rt.tool_service(agent="ana", turn=aleph.TurnContext(session_key="s"))
        for _ in range(2):  # the memo shared by every service derived from this one is warm after the first
            assert (await parent.derive(turn=aleph.TurnContext(session_key="s")).execute("poke", {})).value == "poked"
            planning = parent.derive(turn=aleph.TurnContext(session_key="s", plan_mode=True))
            with pytest.raises(aleph.PermissionDenied):
                await planning.execute("poke", {})
            with pytest.raises(aleph.PermissionDenied):
                planning.call_sync("poke", {})
            side = parent.derive(turn=aleph.TurnContext(session_key="s", side_question=True))
            with pytest.raises(aleph.PermissionDenied, match="side"):
                await side.execute("poke", {})


async def test_a_service_whose_policy_tier_or_allow_set_is_replaced_is_judged_afresh(workspace: Path) -> None:
    async with await runtime(config(workspace, "")) as rt:
        service = rt.tool_service(agent="ana")
        assert await decided(service) == "3"
        strict = rt.tool_service(agent="ana", channel_permissions={"overrides": {"add": "deny"}})
        service.policy = strict.policy  # replaced in place: the memo made for the old one must not answer
        assert await decided(service) == "denied"
        service.policy = rt.tool_service(agent="ana").policy
        assert await decided(service) == "3"
        service.allowed = frozenset({"list_tools"})
        assert await decided(service) == "not found"
        with pytest.raises(aleph.ToolNotFound):
            service.call_sync("add", {"a": 1, "b": 2})
        service.allowed = None
        assert await decided(service) == "3"


async def test_a_role_refusal_is_never_served_from_another_principals_memo(workspace: Path) -> None:
    guarded = aleph.tool(name="reset", description="Operators only.", idempotent=True, requires_role="operator")(
        lambda: "reset"
    )
    async with await runtime(config(workspace, "")) as rt:
        rt.register(guarded)
        operator = rt.tool_service(principal=aleph.Principal("ana", None, "s1"))
        guest = rt.tool_service(principal=aleph.Principal("ana", None, "s2", role="guest"))
        for _ in range(2):
            assert (await operator.execute("reset", {})).value == "reset"
            with pytest.raises(aleph.PermissionDenied):
                await guest.execute("reset", {})
            with pytest.raises(aleph.PermissionDenied):
                guest.call_sync("reset", {})


async def test_a_tool_replaced_under_the_same_name_runs_the_new_one_on_a_warm_service(workspace: Path) -> None:
    async with await runtime(config(workspace, "")) as rt:
        service = rt.tool_service(agent="ana")
        assert await decided(service) == "3"
        rt.registry.unregister("add")

        def multiply(a: int, b: int) -> int:
            return a * b

        rt.register(aleph.tool(name="add", description="Multiply, in fact.", idempotent=True)(multiply))
        assert await decided(service, 4, 5) == "20"
        assert service.call_sync("add", {"a": 4, "b": 6}).value == 24
