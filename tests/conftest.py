"""Shared test set-up: every test runs with its own config and data directories, never the user's."""

from __future__ import annotations

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
