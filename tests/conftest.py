"""Shared test set-up: every test runs with its own config and data directories, never the user's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_aleph_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("ALEPH_DATA_DIR", raising=False)
    monkeypatch.delenv("ALEPH_CONFIG", raising=False)
    monkeypatch.delenv("ALEPH_DISABLE_PLUGINS", raising=False)
    for name in [n for n in __import__("os").environ if n.startswith("ALEPH__")]:
        monkeypatch.delenv(name)
    # The tests write the workspace's aleph.toml as its operator would; the tests of workspace trust
    # (tests/core/test_workspace_config.py) unset this to see a workspace file that only tightens.
    monkeypatch.setenv("ALEPH_TRUST_WORKSPACE_CONFIG", "1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty workspace directory that is also the current directory."""
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    return ws


# -- in CI, a missing real component fails the run ------------------------------------------------------

CI_SKIP_SITUATIONS = (
    # Skips that say where a test runs, not that a component is missing; each matched on the skip reason.
    "needs root, to run the sandbox as another user",  # exec hardening: the check is for root only
    "as a user, the workspace is the user's own",  # exec hardening: the check is for a non-root user
    "does not resolve",  # browser policy: the machine's own host name, which a container may not resolve
)


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, what ``.ci/run`` and every CI service set)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _ci_failure(reason: str) -> str:
    return (
        f"skipped in CI: {reason}\n"
        "Under CI=true a skip because a real component is missing (bwrap, cgroups, overlayfs, node, the npm "
        "servers, Xvfb, chromium, postgres...) is a failure: scripts/setup-system installs them. A skip that "
        "describes where a test runs rather than what is missing belongs in CI_SKIP_SITUATIONS (tests/conftest.py)."
    )


def _skip_reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_skip_in_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or not in_ci() or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report.longrepr)
    if any(situation in reason for situation in CI_SKIP_SITUATIONS):
        return
    report.outcome = "failed"
    report.longrepr = _ci_failure(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    _fail_skip_in_ci(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport:
    report: pytest.CollectReport = yield
    _fail_skip_in_ci(report)
    return report
