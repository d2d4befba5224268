"""Runtimes for the admin family: a real workspace, data directory, ledger, keystore and config files.

The data directory is the per-test ``$XDG_DATA_HOME/aleph`` (tests/conftest.py), not one the project
file names, so the managed configuration ``agent_create`` and ``self_config`` write is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import aleph_admin.plugin
import aleph_files.plugin
import pytest

import aleph


@pytest.fixture
def make_runtime(workspace: Path) -> Callable[..., aleph.Aleph]:
    """Build a runtime over ``aleph.toml`` text with the admin (and files) plugins."""

    def make(toml: str = "", *, files: bool = False) -> aleph.Aleph:
        (workspace / "aleph.toml").write_text(toml)
        plugins: list[object] = [aleph_admin.plugin]
        if files:
            plugins.append(aleph_files.plugin)
        return aleph.load(
            workspace / "aleph.toml", workspace=workspace, plugins=plugins, entry_points=False, strict=True
        )

    return make
