"""A principal a host passes whole has one role at every gate: the weakest of it, its chain and the turn.

Tiers and plugin votes read the turn's ``caller_role``; role facts read the principal's. A member passed as
``rt.tool_service(principal=Principal(..., role="member"))`` with no turn (the documented form) was a member
to one gate and an operator (no role) to the others: the ``auto`` tier ran what a member is asked about, and
a plugin's operator-only vote let the member through.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import Principal

pytestmark = pytest.mark.anyio

VOTES: list[str | None] = []


class Plugin:
    ALEPH_PLUGIN_NAME = "bound_role_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def rotate(name: str) -> str:
            """Rotate a credential (fixture: mutating, declares nothing)."""
            return f"rotated {name}"

        @aleph.tool(requires_role="operator")
        def reboot() -> str:
            """Reboot the host (fixture, operator only)."""
            return "rebooted"

        register(rotate)
        register(reboot)

    @aleph.hookimpl
    def aleph_tool_policy(self, tool: str, input: Mapping[str, Any], turn: aleph.TurnContext | None) -> Any:
        """Like a family's operator-only change: refuse ``rotate`` unless the turn's caller is an operator."""
        if tool != "rotate":
            return None
        VOTES.append(turn.caller_role if turn is not None else None)
        if turn is not None and not turn.caller_is_operator():
            return aleph.PolicyVote("deny", f"only an operator rotates; this caller is a {turn.caller_role}")
        return None


def runtime(workspace: Path) -> aleph.Aleph:
    (workspace / "aleph.toml").write_text("")
    return aleph.load(plugins=[Plugin()], entry_points=False, strict=True)


@pytest.mark.parametrize(
    ("principal", "turn"),
    [
        (Principal("mallory", role="member"), None),
        (Principal("mallory", role="guest"), aleph.TurnContext(session_key="m-s")),
        (Principal("mallory", role="operator"), aleph.TurnContext(caller_role="member")),
        (Principal("helper", role="operator", chain=(Principal("mallory", role="member"),)), None),
    ],
)
async def test_a_principal_below_operator_is_below_operator_at_every_gate(
    workspace: Path, principal: Principal, turn: aleph.TurnContext | None
) -> None:
    VOTES.clear()
    async with runtime(workspace) as rt:
        service = rt.tool_service(principal=principal, turn=turn)
        assert service.principal.role != "operator"
        refused = await service.call("rotate", {"name": "db"})
        assert not refused.success and "only an operator rotates" in (refused.error or "")
        assert VOTES and VOTES[-1] in ("member", "guest")
        assert not (await service.call("reboot", {})).success
        assert "reboot" not in {d.name for d in await service.list()}


async def test_a_member_principal_gets_the_members_tier(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        by_principal = rt.tool_service(principal=Principal("mallory", role="member"))
        by_turn = rt.tool_service(agent="mallory", turn=aleph.TurnContext(caller_role="member"))
        assert by_principal.tier == by_turn.tier


async def test_an_operator_principal_is_unchanged(workspace: Path) -> None:
    VOTES.clear()
    async with runtime(workspace) as rt:
        service = rt.tool_service(principal=Principal("root"))
        assert service.principal.role == "operator" and service.turn is None
        assert (await service.call("rotate", {"name": "db"})).success
        assert (await service.call("reboot", {})).success


async def test_a_derived_turn_never_lifts_the_callers_role(workspace: Path) -> None:
    VOTES.clear()
    async with runtime(workspace) as rt:
        member = rt.tool_service(principal=Principal("mallory", role="member"))
        for turn in (aleph.TurnContext(session_key="m-1"), aleph.TurnContext(caller_role="operator"), None):
            derived = member.derive(turn=turn)
            assert derived.principal.role == "member"
            refused = await derived.call("rotate", {"name": "db"})
            assert not refused.success and "only an operator rotates" in (refused.error or "")
        guest_turn = rt.tool_service(principal=Principal("root")).derive(turn=aleph.TurnContext(caller_role="guest"))
        assert guest_turn.principal.role == "guest"
        assert not (await guest_turn.call("reboot", {})).success
