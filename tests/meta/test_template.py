"""The copy-me template must stay a working plugin: run its own contract test from its folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_template_plugin_passes_its_contract_tests() -> None:
    template = ROOT / "plugins" / "_template"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            str(template / "tests"),
        ],
        cwd=template,
        env={"PYTHONPATH": str(template / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "8 passed" in out.stdout
