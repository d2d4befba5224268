from __future__ import annotations

import json
from pathlib import Path

import pytest

from aleph._cli import main


def test_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["--help"],
        ["tools", "--help"],
        ["tools", "list", "--help"],
        ["tools", "call", "--help"],
        ["tools", "describe", "--help"],
        ["plugins", "--help"],
        ["config", "check", "--help"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        assert "usage: aleph" in capsys.readouterr().out


def test_config_check_reports_errors_with_exit_2(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions]\ndefault = "maybe"\n')
    assert main(["config", "check"]) == 2
    err = capsys.readouterr().err
    assert "aleph.toml" in err and "policies.tool_permissions.default" in err


FIVE_PROBLEMS = """
[policies]
exec_tier = "bogus"

[policies.tool_permissions.overrides]
"bash(" = "allow"
file_read = "maybe"

[tools]
defer_mcp_toolz = true

[ledgr]
enabled = false
"""


def test_config_check_reports_every_problem_in_one_run_its_count_matching_its_list(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "aleph.toml").write_text(FIVE_PROBLEMS)
    assert main(["config", "check"]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("aleph: error: ")]
    assert len(errors) == 5, captured.err
    assert "configuration has 5 error(s)" in captured.out
    for needle in ("policies.exec_tier", "overrides.file_read", "rule 'bash('", "tools.defer_mcp_toolz", "[ledgr]"):
        assert sum(needle in line for line in errors) == 1, (needle, errors)
    # Fixing them all at once leaves nothing: no second run finds what the first one hid.
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "ask"\n')
    assert main(["config", "check"]) == 0


def test_config_check_ok(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check"]) == 0
    assert "configuration OK" in capsys.readouterr().out


def test_call_rejects_non_object_input(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "call", "x", "--input", "[1]"]) == 2
    with pytest.raises(SystemExit):
        main(["tools", "call", "x", "--input", "{bad"])
    assert "not valid JSON" in capsys.readouterr().err


def test_plugins_json_is_machine_readable(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"loaded", "failed", "blocked", "held"}


def test_an_input_nested_past_any_limit_is_a_clear_error_not_a_traceback(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aleph._cli import main

    deep = '{"a":' * 20_000 + "1" + "}" * 20_000
    with pytest.raises(SystemExit) as info:
        main(["tools", "call", "text_stats", "--input", deep])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "nests too deeply" in err and "Traceback" not in err
