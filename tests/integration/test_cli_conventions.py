"""The `aleph` command's conventions: version, pipes, exit codes, words for a person, checks that check."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest


def aleph(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdout: int | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "aleph", *args],
        cwd=cwd,
        env=full,
        stdin=subprocess.DEVNULL,
        capture_output=stdout is None,
        stdout=stdout,
        stderr=subprocess.PIPE if stdout is not None else None,
        text=True,
        timeout=120,
    )


def test_version(workspace: Path) -> None:
    out = aleph("--version", cwd=workspace)
    assert 0 == out.returncode
    assert f"aleph {version('aleph-core')}" == out.stdout.strip()


def test_output_into_a_closed_pipe_ends_quietly(workspace: Path) -> None:
    # `aleph tools list | head -1`: the reader is gone before aleph writes.
    read, write = os.pipe()
    os.close(read)
    try:
        out = aleph("tools", "list", cwd=workspace, stdout=write)
    finally:
        os.close(write)
    assert 141 == out.returncode
    assert "" == out.stderr


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[policies.tool_permissions.overrides]\n"bash(" = "allow"\n', "rule 'bash(': expected NAME"),
        ('[exec]\ntimeout = "x"\n', "exec.timeout"),
        ('[polices]\nexec_tier = "ask"\n', "[polices]: unknown table; did you mean [policies]?"),
        ('[policies]\nexec_tier = "plan"\n', "policies.exec_tier"),
    ],
    ids=["malformed-rule", "plugin-section", "typo-table", "bad-tier"],
)
def test_config_check_runs_the_validation_of_load_and_fails(workspace: Path, toml: str, expected: str) -> None:
    # Before, each of these said "configuration OK" (the exec one then lost every exec tool at load).
    (workspace / "aleph.toml").write_text(toml)
    out = aleph("config", "check", cwd=workspace)
    assert 2 == out.returncode, out.stdout + out.stderr
    assert "configuration OK" not in out.stdout
    assert expected in out.stderr


def test_config_check_reports_dead_rules_as_warnings_and_strict_fails_on_them(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\n"txt_stats" = "allow"\n')
    out = aleph("config", "check", cwd=workspace)
    assert 0 == out.returncode, out.stderr
    assert "configuration OK (1 warning(s))" in out.stdout
    assert "rule `txt_stats` in the global layer matches no installed tool" in out.stderr
    assert 1 == aleph("config", "check", "--strict", cwd=workspace).returncode


def test_config_check_of_a_good_file_is_ok(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "ask"\n')
    out = aleph("config", "check", "--strict", cwd=workspace)
    assert 0 == out.returncode, out.stderr
    assert out.stdout.startswith("configuration OK\n")


def test_policy_explain_of_a_tool_that_is_not_installed(workspace: Path) -> None:
    out = aleph("policy", "explain", "txt_stats", cwd=workspace)
    assert 0 == out.returncode
    assert "decision: deny (not installed)" in out.stdout
    assert "did you mean: text_stats?" in out.stdout
    assert "not_found" not in out.stdout


def test_policy_explain_names_the_plugin_that_failed_to_provide_tools(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[exec]\ntimeout = "x"\n')
    out = aleph("policy", "explain", "bash", cwd=workspace)
    assert "decision: deny (not installed)" in out.stdout
    assert "the plugin `exec` (aleph-exec) failed to load" in out.stdout


def test_ledger_verify_on_a_new_install_says_why_there_is_nothing(workspace: Path) -> None:
    out = aleph("ledger", "verify", cwd=workspace)
    assert 0 == out.returncode
    assert "nothing to verify yet" in out.stdout and "first recorded call" in out.stdout


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home" / "ana"
    home.mkdir(parents=True)
    return home


@pytest.mark.parametrize("where", ["home", "parent", "root"])
def test_home_root_or_above_home_is_refused_as_an_unnamed_workspace(home: Path, where: str) -> None:
    cwd = {"home": home, "parent": home.parent, "root": Path("/")}[where]
    out = aleph("tools", "list", cwd=cwd, env={"HOME": str(home)})
    assert 2 == out.returncode, out.stdout
    assert f"refusing the workspace {cwd}" in out.stderr
    assert "" == out.stdout


def test_a_named_broad_workspace_is_allowed(home: Path) -> None:
    named = aleph("--workspace", str(home), "tools", "list", cwd=home, env={"HOME": str(home)})
    assert 0 == named.returncode, named.stderr
    (home / "aleph.toml").write_text('[workspace]\nroot = "."\n')
    configured = aleph("tools", "list", cwd=home, env={"HOME": str(home)})
    assert 0 == configured.returncode, configured.stderr


def test_tools_list_says_how_many_tools_are_deferred_and_how_to_see_them(workspace: Path) -> None:
    # aleph-browser (installed here) keeps most of its tools deferred until a search promotes them.
    short = aleph("tools", "list", cwd=workspace)
    assert 0 == short.returncode, short.stderr
    listed = [line.split()[0] for line in short.stdout.splitlines()[:-1]]
    hint = short.stdout.splitlines()[-1]
    assert hint.endswith("`aleph tools list --all` lists them, `aleph tools search QUERY` finds one")
    deferred = int(hint.split()[0])
    assert deferred > 0
    full = aleph("tools", "list", "--all", cwd=workspace)
    rows = full.stdout.splitlines()
    assert len(rows) == len(listed) + deferred
    assert sum(row.endswith("(deferred)") for row in rows) == deferred
    assert "browser_click" in [row.split()[0] for row in rows if row.endswith("(deferred)")]
