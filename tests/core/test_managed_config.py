"""The managed configuration file, reload_config, and agents bounded by another agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aleph

pytestmark = pytest.mark.anyio


def _managed(data: Path, text: str, mode: int = 0o600) -> Path:
    path = data / "managed" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_the_managed_file_is_read_over_the_project_file(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALEPH_DATA_DIR", str(workspace.parent / "data"))
    (workspace / "aleph.toml").write_text("[policies]\nexec_tier = 'full'\n")
    path = _managed(workspace.parent / "data", "[policies]\nexec_tier = 'ask'\n")
    config = aleph.load_config(workspace / "aleph.toml")
    assert config.policies.exec_tier == "ask" and config.origin("policies.exec_tier") == str(path)
    assert config.managed_file == path


def test_a_project_that_names_the_data_directory_cannot_plant_a_managed_file(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text("[workspace]\ndata_dir = 'planted'\n")
    _managed(workspace / "planted", "[policies]\nexec_tier = 'full'\n")
    assert aleph.load_config(workspace / "aleph.toml").policies.exec_tier == "auto"


def test_a_managed_file_others_may_write_is_refused(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALEPH_DATA_DIR", str(workspace.parent / "data"))
    (workspace / "aleph.toml").write_text("")
    _managed(workspace.parent / "data", "", mode=0o666)
    with pytest.raises(aleph.ConfigError, match="writable by you alone"):
        aleph.load_config(workspace / "aleph.toml")


async def test_reload_puts_a_new_layer_in_force_and_a_bad_file_changes_nothing(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text("[workspace]\ndata_dir = '.d'\n")
    async with aleph.load(workspace / "aleph.toml", entry_points=False) as rt:
        assert "late" not in rt.config.agents
        (workspace / "aleph.toml").write_text("[workspace]\ndata_dir = '.d'\n[agents.late]\nexec_tier = 'plan'\n")
        rt.reload_config()
        assert rt.config.agents["late"].exec_tier == "plan"
        (workspace / "aleph.toml").write_text("[agents.late]\nexec_tier = 'sideways'\n")
        with pytest.raises(aleph.ConfigError):
            rt.reload_config()
        assert rt.config.agents["late"].exec_tier == "plan"


@aleph.tool
def poke() -> str:
    """Do nothing, mutably."""
    return "poked"


async def test_an_agent_bounded_by_another_is_judged_by_both_directly_and_when_delegated_to(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(
        "[workspace]\ndata_dir = '.d'\n"
        "[agents.boss.tool_permissions.overrides]\npoke = 'deny'\n"
        "[agents.kid]\nbounded_by = ['boss']\naccepts_delegation_from = ['*']\n"
        "[agents.kid.tool_permissions.overrides]\npoke = 'allow'\n"
    )
    async with aleph.load(workspace / "aleph.toml", entry_points=False) as rt:
        rt.register(poke)
        assert rt.tool_service(agent="kid").decision_for("poke", {}) == "deny"
        assert rt.tool_service(agent="other").decision_for("poke", {}) == "allow"
        delegated = await rt.tool_service(agent="other").delegate("kid", purpose="poke")
        assert delegated.decision_for("poke", {}) == "deny"
