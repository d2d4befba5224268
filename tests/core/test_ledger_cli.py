from __future__ import annotations

import json
from pathlib import Path

import pytest

from aleph import AlephConfig, Ledger, LedgerRecord, load_config
from aleph._cli import main
from aleph._ledger import ledger_directory


async def write_rows(directory: Path, agents: tuple[str, ...] = ("main",), n: int = 3) -> Ledger:
    ledger = Ledger(directory)
    for agent in agents:
        for i in range(n):
            await ledger.append(
                LedgerRecord(agent, "tool_call", "file_write", "ok", f"file_write: path=f{i}", "a" * 32)
            )
    await ledger.aclose()
    return ledger


def default_dir() -> Path:
    return ledger_directory(load_config())


def test_the_ledger_lives_under_the_data_dir_by_default(workspace: Path) -> None:
    config: AlephConfig = load_config()
    assert config.data_dir / "ledger" == ledger_directory(config)


def test_a_relative_ledger_directory_is_resolved_against_the_project(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[ledger]\ndirectory = "audit"\n')
    assert workspace / "audit" == ledger_directory(load_config())


@pytest.mark.anyio
async def test_verify_reports_every_agent_ok(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await write_rows(default_dir(), ("main", "helper"))
    assert 0 == main(["ledger", "verify"])
    out = capsys.readouterr().out
    assert "OK        helper: 4 rows" in out and "OK        main: 4 rows" in out


@pytest.mark.anyio
async def test_verify_exits_1_and_names_the_first_bad_row(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = await write_rows(default_dir(), ("main", "helper"))
    path = ledger._chain_paths("main")[0]
    lines = path.read_text().splitlines()
    row = json.loads(lines[2])
    row["detail"] = "something else"
    lines[2] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    assert 1 == main(["ledger", "verify"])
    out = capsys.readouterr().out
    assert "TAMPERED  main: row seq 3 (line 3): hash mismatch" in out
    assert "OK        helper" in out

    assert 1 == main(["ledger", "verify", "--agent", "main", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert (False, 3) == (data["ok"], data["agents"][0]["first_bad_seq"])


@pytest.mark.anyio
async def test_verify_with_an_exported_checkpoint_detects_a_removed_tail(
    workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ledger = await write_rows(default_dir())
    out = tmp_path / "offsite" / "main.json"
    out.parent.mkdir()
    assert 0 == main(["ledger", "checkpoint", "--agent", "main", "--out", str(out)])
    assert "at seq 4 written to" in capsys.readouterr().out
    path, side = ledger._chain_paths("main")
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    side.unlink()
    assert 0 == main(["ledger", "verify"])
    capsys.readouterr()
    assert 1 == main(["ledger", "verify", "--checkpoint", str(out)])  # the agent comes from the file
    assert "rows 4..4 were removed" in capsys.readouterr().out


def test_checkpoint_of_an_unknown_agent_fails_with_a_message(
    workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert 1 == main(["ledger", "checkpoint", "--agent", "ghost", "--out", str(tmp_path / "x.json")])
    assert "no ledger rows for agent 'ghost'" in capsys.readouterr().err


@pytest.mark.anyio
async def test_show_prints_the_newest_rows(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await write_rows(default_dir())
    assert 0 == main(["ledger", "show", "--agent", "main", "--limit", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert 2 == len(lines)
    assert lines[0].startswith("main #3") and "tool_call" in lines[0] and "file_write: path=f1" in lines[0]
    assert 0 == main(["ledger", "show", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert [1, 2, 3, 4] == [r["seq"] for r in rows]


def test_show_and_verify_on_an_empty_ledger(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["ledger", "show"])
    assert 0 == main(["ledger", "verify"])
    assert 2 == capsys.readouterr().out.count("no ledger")


def test_bad_arguments_exit_2(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["ledger", "show", "--limit", "0"])
    assert 2 == info.value.code
    assert "must be between 1 and" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["ledger", "show", "--agent", ""])
    assert 2 == info.value.code


def test_help_on_every_ledger_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["ledger", "--help"], ["ledger", "verify", "--help"], ["ledger", "show", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert 0 == info.value.code
        assert "usage: aleph ledger" in capsys.readouterr().out
