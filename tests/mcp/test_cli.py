"""``aleph mcp list/add/remove/trust``."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from aleph._cli import main

from .conftest import SERVERS

ALEPH = str(Path(sys.executable).parent / "aleph")


def test_add_and_remove_edit_aleph_toml_and_keep_the_rest(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = '# my settings\n[policies]\nexec_tier = "ask"  # keep me\n'
    (workspace / "aleph.toml").write_text(original)
    assert 0 == main(["mcp", "add", "gh", "--url", "https://example.com/mcp", "--header", "Authorization=Bearer ${GH}"])
    assert 0 == main(["mcp", "add", "local", "--command", "npx", "--arg=-y", "--arg", "pkg", "--env", "A=1"])
    text = (workspace / "aleph.toml").read_text()
    assert text.startswith(original)
    data = tomllib.loads(text)
    assert {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${GH}"}} == data["mcp"]["servers"][
        "gh"
    ]
    assert {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "1"}} == data["mcp"]["servers"]["local"]

    assert 1 == main(["mcp", "add", "gh", "--url", "https://example.com/other"])
    assert "already exists" in capsys.readouterr().err

    assert 0 == main(["mcp", "remove", "gh"])
    text = (workspace / "aleph.toml").read_text()
    assert text.startswith(original)
    assert ["local"] == list(tomllib.loads(text)["mcp"]["servers"])
    assert 1 == main(["mcp", "remove", "gh"])


def test_add_refuses_bad_ids_and_bad_pairs(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 2 == main(["mcp", "add", "a__b", "--command", "x"])
    assert "without '__'" in capsys.readouterr().err
    assert 2 == main(["mcp", "add", "ok", "--command", "x", "--env", "NOEQUALS"])
    assert not (workspace / "aleph.toml").exists()


def test_list_json_shows_state_counts_and_redacts_secrets(
    workspace: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    (workspace / "aleph.toml").write_text(
        f"""
[mcp.servers.dyn]
command = {sys.executable!r}
args = [{str(SERVERS / "dynamic.py")!r}]
env = {{ SECRET_TOKEN = "hunter2-very-secret" }}

[mcp.servers.broken]
command = "/nonexistent/program"
timeout_seconds = 2
"""
    )
    assert 1 == main(["mcp", "list", "--json"])  # exit 1: a server is not connected
    out = capsys.readouterr()
    assert "hunter2" not in out.out + out.err + caplog.text
    rows = {row["id"]: row for row in json.loads(out.out)}
    assert "connected" == rows["dyn"]["state"]
    assert rows["dyn"]["tools"] >= 5
    assert "tools" in rows["dyn"]["capabilities"]
    assert rows["broken"]["state"] in ("restarting", "dead")
    assert rows["broken"]["reason"]
    assert 1 == main(["mcp", "list"])
    human = capsys.readouterr()
    assert "dyn  [stdio] connected" in human.out
    assert "hunter2" not in human.out + human.err + caplog.text


def test_trust_with_nothing_changed_says_so(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workspace / "aleph.toml").write_text(
        f"[mcp.servers.dyn]\ncommand = {sys.executable!r}\nargs = [{str(SERVERS / 'dynamic.py')!r}]\n"
    )
    assert 0 == main(["mcp", "trust", "dyn"])
    assert "nothing to trust" in capsys.readouterr().out
    assert 1 == main(["mcp", "trust", "nope"])
    assert "MCP server not found: nope" in capsys.readouterr().err
