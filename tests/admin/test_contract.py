"""The contract kit and the ownership contract for what the family stores (secrets, agents)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aleph_admin.plugin
import pytest

from aleph import Aleph, ScopedToolService, ToolResult, load
from aleph.testing import OwnershipContractTests, ToolContractTests

_NEEDS_PRINCIPAL = "runs as a bound principal; the kit's unscoped service has none (tests/admin covers it)"


class TestAdminContract(ToolContractTests):
    plugin = aleph_admin.plugin
    families = ("agent", "vault", "self", "config", "read_config", "doctor", "hooks", "list", "select", "gateway")
    no_example = {
        "agent_create": _NEEDS_PRINCIPAL,
        "agent_list": _NEEDS_PRINCIPAL,
        "agent_info": _NEEDS_PRINCIPAL,
        "agent_switch": _NEEDS_PRINCIPAL,
        "agent_delete": _NEEDS_PRINCIPAL,
        "vault_store": _NEEDS_PRINCIPAL,
        "self_config": _NEEDS_PRINCIPAL,
        "select_model": _NEEDS_PRINCIPAL,
        "doctor": "starts `aleph doctor` in a subprocess; tests/admin/test_runtime_tools.py runs it",
    }

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("read_config_guide", {"section": "policies"}),
            ("config_audit", {"changes": 5}),
            ("list_models", {}),
            ("gateway_route", {"action": "list"}),
            ("hooks_manage", {"action": "list"}),
            ("self_manage", {"action": "status"}),
            ("agent_identity", {"action": "verify_card", "card": '{"type": "other"}'}),
        ]


class TestSecretOwnership(OwnershipContractTests):
    plugin = aleph_admin.plugin

    async def create_object(self, service: ScopedToolService) -> str:
        result = await service.call(
            "vault_store", {"action": "store", "name": "tokena", "secret": "v-1", "allow": ["web_fetch"]}
        )
        assert result.success, result.error
        return "tokena"

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("vault_store", {"action": "info", "name": object_id})

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        listed = json.loads((await service.call("vault_store", {"action": "list"})).output)
        return {s["name"] for s in listed["secrets"]}

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        rule = {"action": "rule", "name": object_id, "allow": ["web_fetch(domain:example.org)"]}
        return await service.call("vault_store", rule)

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("vault_store", {"action": "delete", "name": object_id})


class TestAgentOwnership(OwnershipContractTests):
    """An agent's metadata and identity belong to its creator (the managed file needs a data directory
    the project file does not name, so this runtime takes it from $XDG_DATA_HOME)."""

    plugin = aleph_admin.plugin

    @pytest.fixture(autouse=True)
    def _data_home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))

    def make_runtime(self, workspace: Path) -> Aleph:
        (workspace / "aleph.toml").write_text("")
        return load(
            workspace / "aleph.toml", workspace=workspace, plugins=[self.plugin], entry_points=False, strict=True
        )

    async def create_object(self, service: ScopedToolService) -> str:
        result = await service.call("agent_create", {"name": "sidekicka"})
        assert result.success, result.error
        return "sidekicka"

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("agent_info", {"name": object_id})

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        listed = json.loads((await service.call("agent_list", {})).output)
        return {a["name"] for a in listed["agents"]}

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("agent_identity", {"action": "rotate", "agent": object_id})

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("agent_delete", {"name": object_id})
