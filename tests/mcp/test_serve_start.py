"""`aleph serve` starts clean: nothing but MCP on stdout whatever a plugin prints, one line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aleph._plugins import _hookspec

ALEPH = str(Path(sys.executable).parent / "aleph")

NOISY = """
import os, sys
import aleph

print("noise at import")  # a plugin that prints on stdout

@aleph.hookimpl
def aleph_register_tools(register, context):
    print("noise at registration")
    sys.stdout.flush()
    os.system("echo noise from a child process")  # a child writing to its inherited stdout
"""

DOCTOR = """
import aleph

@aleph.hookimpl
def aleph_doctor_checks(register, config):
    register("fake.isolation", lambda: ("warn", "plain processes, no namespaces"))
    register("fake.other", lambda: ("ok", "not about isolation"))
"""


def site_with(tmp_path: Path, name: str, source: str) -> Path:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / f"aleph_{name}_plugin.py").write_text(source)
    info = site / f"aleph_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: aleph-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[aleph]\n{name} = aleph_{name}_plugin\n")
    return site


def serve(workspace: Path, site: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [ALEPH, "serve"], cwd=workspace, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
)


def test_nothing_but_mcp_reaches_stdout(workspace: Path, tmp_path: Path) -> None:
    done = serve(workspace, site_with(tmp_path, "noisy", NOISY), INITIALIZE + "\n")
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    for line in lines:
        assert "2.0" == json.loads(line)["jsonrpc"], line
    assert 1 == json.loads(lines[0])["id"]
    for noise in ("noise at import", "noise at registration", "noise from a child process"):
        assert noise in done.stderr


def test_one_start_line_on_stderr(workspace: Path, tmp_path: Path) -> None:
    done = serve(workspace, tmp_path / "empty-site", "")
    start = [line for line in done.stderr.splitlines() if line.startswith("aleph serve: workspace")]
    assert 1 == len(start), done.stderr
    assert start[0].startswith(f"aleph serve: workspace {workspace}, tier auto, isolation ")
    assert start[0].endswith("tools offered over stdio")


@pytest.mark.skipif(not hasattr(_hookspec, "aleph_doctor_checks"), reason="core has no aleph_doctor_checks hook yet")
def test_the_start_line_names_the_isolation_a_plugin_reports(workspace: Path, tmp_path: Path) -> None:
    done = serve(workspace, site_with(tmp_path, "doctor", DOCTOR), "")
    assert "isolation plain processes, no namespaces (fake.isolation: warn)," in done.stderr, done.stderr
    assert "not about isolation" not in done.stderr
