"""self_config: tightening applies at once, loosening waits for a human, every change rolls back; audit and guide."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aleph_admin._guide import config_guide

import aleph

from .helpers import approving, output, refusing

pytestmark = pytest.mark.anyio

BASE = """
[policies.tool_permissions.overrides]
doctor = "ask"
[agents.worker.tool_permissions]
default = "allow"
[agents.worker.tool_permissions.overrides]
list_models = "ask"
"""


async def test_a_tightening_applies_at_once_without_asking_anyone(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime(BASE) as rt:
        human = approving()
        ops = rt.tool_service(agent="ops", requester=human)
        path = "agents.worker.tool_permissions.overrides.list_models"
        changed = output(
            await ops.call("self_config", {"action": "update_config", "config_path": path, "value": "deny"})
        )
        assert human.requests == []
        assert changed["before"] == "ask" and rt.config.origin(path).endswith("managed/config.toml")
        assert rt.tool_service(agent="worker").decision_for("list_models", {}) == "deny"


async def test_a_loosening_is_held_for_a_human_who_sees_the_diff(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime(BASE) as rt:
        path = "agents.worker.tool_permissions.overrides.list_models"
        no = refusing()
        refused = await rt.tool_service(agent="ops", requester=no).call(
            "self_config", {"action": "update_config", "config_path": path, "value": "allow"}
        )
        assert not refused.success
        assert "list_models: 'ask' -> 'allow'" in no.requests[0].reason
        assert rt.tool_service(agent="worker").decision_for("list_models", {}) == "ask"
        unattended = rt.tool_service(agent="ops", turn=aleph.TurnContext(unattended=True))
        assert not (
            await unattended.call("self_config", {"action": "update_config", "config_path": path, "value": "allow"})
        ).success
        yes = approving()
        output(
            await rt.tool_service(agent="ops", requester=yes).call(
                "self_config", {"action": "update_config", "config_path": path, "value": "allow"}
            )
        )
        assert yes.requests and rt.tool_service(agent="worker").decision_for("list_models", {}) == "allow"


async def test_policies_always_ask_even_to_tighten_and_under_the_full_tier(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime('[policies]\nexec_tier = "full"\n' + BASE) as rt:
        human = refusing()
        result = await rt.tool_service(agent="ops", requester=human).call(
            "self_config",
            {"action": "update_config", "config_path": "policies.tool_permissions.overrides.doctor", "value": "deny"},
        )
        assert not result.success and human.requests


async def test_a_rollback_restores_the_earlier_configuration_after_approval(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime(BASE) as rt:
        ops = rt.tool_service(agent="ops", requester=approving())
        path = "agents.worker.tool_permissions.overrides.list_models"
        change = output(
            await ops.call("self_config", {"action": "update_config", "config_path": path, "value": "deny"})
        )
        assert rt.tool_service(agent="worker").decision_for("list_models", {}) == "deny"
        no = refusing()
        held = await rt.tool_service(agent="ops", requester=no).call(
            "self_config", {"action": "rollback_config", "change_id": change["config_change"]}
        )
        assert not held.success and no.requests  # a rollback is a gate removal: a human decides
        back = output(
            await ops.call("self_config", {"action": "rollback_config", "change_id": change["config_change"]})
        )
        assert back["rolled_back"] == change["config_change"]
        assert rt.tool_service(agent="worker").decision_for("list_models", {}) == "ask"
        audit = output(await ops.call("config_audit", {}))
        assert [c["kind"] for c in audit["changes"][:2]] == ["rollback", "update"]
        assert all(c["by"].startswith("ops") for c in audit["changes"][:2])


async def test_a_change_core_rejects_leaves_the_file_as_it_was(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime(BASE) as rt:
        ops = rt.tool_service(agent="ops", requester=approving())
        managed = rt.config.managed_file
        before = managed.read_bytes() if managed.exists() else None
        bad = await ops.call(
            "self_config", {"action": "update_config", "config_path": "agents.worker.exec_tier", "value": "sideways"}
        )
        assert not bad.success and "nothing was changed" in (bad.error or "")
        assert (managed.read_bytes() if managed.exists() else None) == before


async def test_config_audit_names_where_each_value_came_from_and_the_risky_ones(
    make_runtime: Callable[..., aleph.Aleph], workspace: Path
) -> None:
    async with make_runtime('[agents.open]\naccepts_delegation_from = ["*"]\n' + BASE) as rt:
        audit = output(await rt.tool_service(agent="ops").call("config_audit", {}))
        origins = {s["key"]: s["origin"] for s in audit["settings"]}
        assert origins["policies.tool_permissions.overrides.doctor"] == str(workspace / "aleph.toml")
        assert any("accepts_delegation_from" in r for r in audit["risky"])
        assert "aleph_admin.plugin" in audit["policy_plugins"]


async def test_config_audit_of_a_200_rule_configuration_is_quick(make_runtime: Callable[..., aleph.Aleph]) -> None:
    rules = "\n".join(f'"tool_{i}(src/**)" = "{("allow", "ask", "deny")[i % 3]}"' for i in range(200))
    async with make_runtime(f"[policies.tool_permissions.overrides]\n{rules}\n") as rt:
        ops = rt.tool_service(agent="ops")
        output(await ops.call("config_audit", {}))  # warm
        start = time.perf_counter()
        audit = output(await ops.call("config_audit", {}))
        assert len(audit["settings"]) >= 200
        # Not a timing assertion: bench/bench_admin.py measures; this only guards against a pathology.
        assert time.perf_counter() - start < 5


def test_the_configuration_reference_in_docs_is_the_one_the_tool_returns() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert docs.read_text() == config_guide(), "regenerate: python -m aleph_admin guide > docs/configuration.md"


async def test_read_config_guide_answers_one_section_and_names_the_sections_for_a_wrong_one(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime() as rt:
        service = rt.tool_service(agent="ops")
        text = (await service.call("read_config_guide", {"section": "agents"})).output
        assert "bounded_by" in text and "[policies]" not in text
        wrong = await service.call("read_config_guide", {"section": "nope"})
        assert not wrong.success and "policies" in (wrong.error or "")


async def test_a_guest_may_tighten_only_its_own_layer(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime(BASE) as rt:
        guest = rt.tool_service(agent="visitor", turn=aleph.TurnContext(caller_role="guest"), requester=approving())
        other = await guest.call(
            "self_config",
            {"action": "update_config", "config_path": "agents.worker.tool_permissions.default", "value": "deny"},
        )
        assert not other.success and other.error_kind == "permission_denied"
        assert rt.tool_service(agent="worker").decision_for("agent_list", {}) == "allow"
        own = await guest.call(
            "self_config",
            {"action": "update_config", "config_path": "agents.visitor.tool_permissions.default", "value": "deny"},
        )
        assert own.success, own.error
