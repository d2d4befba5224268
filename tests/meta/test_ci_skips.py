"""Under CI=true a skip because a real component is missing fails the run; locally it stays a skip.

Each test runs pytest in a child process on a scratch copy of tests/conftest.py (where the rule lives)
and a few tests that skip the ways this suite's tests do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SKIPPING = """
import shutil

import pytest

needs_tool = pytest.mark.skipif(shutil.which("no-such-tool-anywhere") is None, reason="no-such-tool is not installed")


@needs_tool
def test_marked_skip():
    pass


def test_inline_skip():
    pytest.skip("bubblewrap cannot create namespaces here")


def test_skip_in_a_fixture(missing):
    pass


@pytest.fixture
def missing():
    pytest.skip("@modelcontextprotocol/server-everything not installed: run scripts/setup-system")


def test_a_situation_not_a_missing_component():
    pytest.skip("needs root, to run the sandbox as another user")


@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    raise AssertionError("expected")


def test_runs():
    pass
"""

MODULE_SKIP = """
import pytest

pytest.skip("Xvfb is not installed", allow_module_level=True)


def test_never_collected():
    pass
"""


def run_suite(tmp_path: Path, ci: str | None, module: str = SKIPPING) -> tuple[int, dict[str, int], str]:
    shutil.copy2(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(module)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfs", "--rootdir", str(tmp_path), "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = done.stdout.strip().splitlines()[-1]
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", summary)}
    return done.returncode, counts, done.stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_in_ci_a_skip_for_a_missing_component_fails_naming_it(tmp_path: Path, ci: str) -> None:
    code, counts, out = run_suite(tmp_path, ci)
    assert 1 == code, out
    # A skip at set-up (a skipif mark, a fixture) fails as an error, one in the test as a failure;
    # the situation stays a skip.
    assert {"failed": 1, "passed": 1, "skipped": 1, "xfailed": 1, "errors": 2} == counts, out
    assert "skipped in CI: no-such-tool is not installed" in out
    assert "skipped in CI: bubblewrap cannot create namespaces here" in out
    assert "skipped in CI: @modelcontextprotocol/server-everything not installed" in out
    assert "scripts/setup-system installs them" in out


def test_in_ci_a_module_skipped_whole_fails_the_collection(tmp_path: Path) -> None:
    code, counts, out = run_suite(tmp_path, "true", MODULE_SKIP)
    assert 2 == code, out  # pytest's code for a collection error
    assert {"error": 1} == counts, out  # pytest says "1 error", "2 errors"
    assert "skipped in CI: Xvfb is not installed" in out
    assert {"skipped": 1} == run_suite(tmp_path, None, MODULE_SKIP)[1]  # locally: a skip


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_outside_ci_a_missing_component_is_still_a_skip(tmp_path: Path, ci: str | None) -> None:
    code, counts, out = run_suite(tmp_path, ci)
    assert 0 == code, out
    assert {"passed": 1, "skipped": 4, "xfailed": 1} == counts, out
