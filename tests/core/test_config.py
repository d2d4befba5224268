from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from aleph import ConfigError, load_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_without_any_file(workspace: Path) -> None:
    config = load_config(env={})
    assert config.policies.exec_tier == "auto"
    assert config.policies.tool_permissions.default == "allow"
    assert config.sandbox.command_policy.enforcement == "block"
    assert "get_tool_schema" in config.tools.core
    assert config.files == []
    assert config.workspace_root == workspace.resolve()


def test_project_file_overrides_user_file_and_env_overrides_both(tmp_path: Path, workspace: Path) -> None:
    user = write(
        tmp_path / "xdg" / "aleph" / "config.toml",
        '[policies]\nexec_tier = "full"\n[policies.tool_permissions]\ndefault = "ask"\n',
    )
    write(workspace / "aleph.toml", '[policies]\nexec_tier = "ask"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "ALEPH__TOOLS__DEFER_MCP_TOOLS": "true"}
    config = load_config(env=env)
    assert config.policies.exec_tier == "ask"
    assert config.policies.tool_permissions.default == "ask"
    assert config.tools.defer_mcp_tools is True
    assert config.files == [str(user), str(workspace / "aleph.toml")]
    assert config.origin("policies.tool_permissions.default") == str(user)
    assert config.origin("tools.defer_mcp_tools") == "env ALEPH__TOOLS__DEFER_MCP_TOOLS"


def test_bad_value_names_file_key_and_reason(workspace: Path) -> None:
    path = write(workspace / "aleph.toml", '[policies]\nexec_tier = "plan"\n')
    with pytest.raises(ConfigError) as info:
        load_config(env={})
    message = str(info.value)
    assert str(path) in message and "policies.exec_tier" in message and "'plan'" in message


def test_unknown_key_in_a_core_section_is_an_error(workspace: Path) -> None:
    write(workspace / "aleph.toml", "[tools]\ncores = []\n")
    with pytest.raises(ConfigError, match=r"tools\.cores: unknown key"):
        load_config(env={})


def test_invalid_toml_names_the_file(workspace: Path) -> None:
    write(workspace / "aleph.toml", "[policies\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(env={})


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "nope.toml", env={})


def test_mcp_server_ids_are_validated(workspace: Path) -> None:
    write(workspace / "aleph.toml", '[mcp.servers.git__hub]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match="without '__'"):
        load_config(env={})
    write(workspace / "aleph.toml", '[mcp.servers.both]\ncommand = "x"\nurl = "http://127.0.0.1/mcp"\n')
    with pytest.raises(ConfigError, match="exactly one of command"):
        load_config(env={})


def test_plugin_sections_are_kept_and_validated_by_the_plugin(workspace: Path) -> None:
    class Browser(BaseModel):
        headless: bool = True

    write(workspace / "aleph.toml", "[browser]\nheadless = 3\n")
    config = load_config(env={"ALEPH_TRUST_WORKSPACE_CONFIG": "1"})
    assert "browser" in config.plugin_sections()
    with pytest.raises(ConfigError, match=r"browser\.headless"):
        config.section("browser", Browser)


def test_defer_auto_must_be_a_percentage(workspace: Path) -> None:
    write(workspace / "aleph.toml", '[tools]\ndefer = "auto:150"\n')
    with pytest.raises(ConfigError, match="auto:N"):
        load_config(env={})
