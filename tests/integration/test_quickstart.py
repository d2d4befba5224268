"""The README's quick start, run as a new user would: the installed `aleph` command and plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def aleph(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}  # like a user's shell
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "aleph", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=60
    )


def test_lists_the_example_tools(workspace: Path) -> None:
    out = aleph("tools", "list", cwd=workspace)
    assert out.returncode == 0, out.stderr
    names = [line.split()[0] for line in out.stdout.splitlines()]
    assert {"text_stats", "clock_now"} <= set(names)


def test_calls_a_tool_and_prints_json(workspace: Path) -> None:
    out = aleph("tools", "call", "text_stats", "--input", '{"text": "Hello world. Hello again!"}', cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["words"] == 4


def test_bad_input_is_a_clear_error_with_exit_code_1(workspace: Path) -> None:
    out = aleph("tools", "call", "text_stats", "--input", '{"txt": "x"}', cwd=workspace)
    assert out.returncode == 1
    assert out.stderr.strip() == "error: invalid input for tool text_stats: text: Field required; txt: unexpected field"


def test_unknown_tool_suggests_the_right_one(workspace: Path) -> None:
    out = aleph("tools", "call", "txt_stats", cwd=workspace)
    assert out.returncode == 1
    assert "tool not found: txt_stats. Did you mean: text_stats?" in out.stderr


def test_describe_prints_the_schema(workspace: Path) -> None:
    out = aleph("tools", "describe", "clock_now", cwd=workspace)
    assert out.returncode == 0
    definition = json.loads(out.stdout)
    assert definition["input_schema"]["additionalProperties"] is False
    assert definition["source"] == {"type": "plugin", "plugin_id": "example"}


@pytest.fixture
def broken_plugin_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "aleph_broken_plugin.py").write_text("import not_a_real_module_xyz\n")
    info = site / "aleph_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aleph-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[aleph]\nbroken = aleph_broken_plugin\n")
    return site


def test_a_broken_plugin_shows_as_failed_while_everything_else_works(workspace: Path, broken_plugin_site: Path) -> None:
    env = {"PYTHONPATH": str(broken_plugin_site)}
    plugins = aleph("plugins", cwd=workspace, env=env)
    assert plugins.returncode == 1  # a plugin failed to load
    lines = plugins.stdout.splitlines()
    assert any(line.startswith("loaded") and "example" in line and "aleph-example" in line for line in lines)
    failed = [line for line in lines if line.startswith("FAILED")]
    assert len(failed) == 1
    assert "broken" in failed[0] and "aleph-broken 1.0" in failed[0] and "not_a_real_module_xyz" in failed[0]
    call = aleph("tools", "call", "clock_now", cwd=workspace, env=env)
    assert call.returncode == 0, call.stderr


def test_strict_mode_fails_on_a_broken_plugin(workspace: Path, broken_plugin_site: Path) -> None:
    out = aleph(
        "tools", "list", cwd=workspace, env={"PYTHONPATH": str(broken_plugin_site), "ALEPH_STRICT_PLUGINS": "1"}
    )
    assert out.returncode == 1
    assert "plugin 'broken' failed to import" in out.stderr
