"""hooks_manage, gateway_route, self_manage, list_models / select_model and doctor."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from aleph_admin import session_model

import aleph

from .helpers import approving, output, refusing

pytestmark = pytest.mark.anyio


def guest(rt: aleph.Aleph, requester: aleph.ApprovalRequester | None = None) -> aleph.ScopedToolService:
    return rt.tool_service(agent="visitor", turn=aleph.TurnContext(caller_role="guest"), requester=requester)


async def test_hooks_manage_refuses_a_guest_disabling_a_policy_plugin(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime() as rt:
        human = approving()
        listed = output(await guest(rt).call("hooks_manage", {"action": "list"}))
        admin = next(p for p in listed["plugins"] if p["name"] == "aleph_admin.plugin")
        assert "aleph_tool_policy" in admin["hooks"]
        refused = await guest(rt, human).call("hooks_manage", {"action": "disable", "plugin": "aleph_admin.plugin"})
        assert not refused.success and refused.error_kind == "permission_denied"
        assert human.requests == []  # refused outright: no human is even asked on a guest's behalf
        assert rt.config.plugins.disable == []


async def test_an_operator_disabling_a_plugin_needs_a_human_and_takes_effect_at_the_next_start(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        no = refusing()
        held = await rt.tool_service(agent="ops", requester=no).call(
            "hooks_manage", {"action": "disable", "plugin": "aleph_admin.plugin"}
        )
        assert not held.success and "loosens policy" in no.requests[0].reason
        assert rt.config.plugins.disable == []
        done = output(
            await rt.tool_service(agent="ops", requester=approving()).call(
                "hooks_manage", {"action": "disable", "plugin": "aleph_admin.plugin"}
            )
        )
        assert done["disabled"] == ["aleph_admin.plugin"] and rt.config.plugins.disable == ["aleph_admin.plugin"]


async def test_routes_are_read_by_everyone_and_changed_by_an_operator_with_approval(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime("[agents.support]\n") as rt:
        assert output(await guest(rt).call("gateway_route", {"action": "list"})) == {"routes": {}}
        denied = await guest(rt, approving()).call(
            "gateway_route", {"action": "set", "key": "telegram", "agent": "support"}
        )
        assert not denied.success
        no = refusing()
        held = await rt.tool_service(agent="ops", requester=no).call(
            "gateway_route", {"action": "set", "key": "telegram", "agent": "support"}
        )
        assert not held.success and no.requests
        ops = rt.tool_service(agent="ops", requester=approving())
        routed = output(await ops.call("gateway_route", {"action": "set", "key": "telegram", "agent": "support"}))
        assert routed == {"routes": {"telegram": "support"}}
        unknown = await ops.call("gateway_route", {"action": "set", "key": "irc", "agent": "nobody"})
        assert not unknown.success and "not a configured agent" in (unknown.error or "")
        assert output(await guest(rt).call("gateway_route", {"action": "list"})) == {"routes": {"telegram": "support"}}


async def test_self_manage_is_for_operators_and_reload_puts_an_edited_file_in_force(
    make_runtime: Callable[..., aleph.Aleph], workspace: Path
) -> None:
    async with make_runtime() as rt:
        refused = await guest(rt).call("self_manage", {"action": "status"})
        assert not refused.success
        (workspace / "aleph.toml").write_text("[agents.late]\n")
        status = output(await rt.tool_service(agent="ops").call("self_manage", {"action": "reload"}))
        assert "late" in status["agents"] and "late" in rt.config.agents


async def test_a_session_selects_a_model_from_the_models_table_and_integrations_read_it(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime('[models]\navailable = ["small", "large"]\ndefault = "small"\n') as rt:
        service = rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="alice-1"))
        listed = output(await service.call("list_models", {}))
        assert listed["source"] == "[models]" and listed["selected"] == "small"
        assert output(await service.call("select_model", {"model": "large"})) == {
            "session": "alice-1",
            "model": "large",
        }
        assert output(await service.call("list_models", {}))["selected"] == "large"
        assert not (await service.call("select_model", {"model": "huge"})).success
        assert session_model(rt.config.data_dir, "alice-1") == "large"


async def test_doctor_runs_the_checks_and_fix_narrows_only_aleph_private_files(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        ops = rt.tool_service(agent="ops", requester=approving())
        output(await ops.call("vault_store", {"action": "store", "name": "k", "secret": "v", "allow": ["web_fetch"]}))
        key = rt.chokepoint.ledger.keystore.directory / "vault.key"  # type: ignore[union-attr]
        os.chmod(key, 0o644)
        report = output(await ops.call("doctor", {"fix": True}))
        assert {c["name"] for c in report["checks"]} >= {"core.workspace", "core.ledger", "core.plugins"}
        assert any(str(key) in line for line in report["fixed"])
        assert key.stat().st_mode & 0o077 == 0
        again = output(await ops.call("doctor", {"fix": True}))
        assert again["fixed"] == []
