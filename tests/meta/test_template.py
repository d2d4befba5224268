"""The copy-me template must stay a working plugin: run its own contract test from its folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_template_plugin_passes_its_contract_tests(tmp_path: Path) -> None:
    template = ROOT / "plugins" / "_template"
    # Installed as its users get it (a wheel with its entry point), so the kit checks that entry point too.
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--target"]
    subprocess.run([*pip, str(site), str(template)], check=True, capture_output=True, timeout=300)
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
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "9 passed" in out.stdout
