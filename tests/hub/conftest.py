"""Fixtures for the hub family: wheels built from plugins/_template, a PEP 503/691 index on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import aleph
from aleph.testing import isolated_runtime

from .localindex import LocalIndex, build_plugin_wheel, build_test_wheels, provenance_for, serve_index

__all__ = ["LocalIndex", "build_plugin_wheel", "hub_runtime", "provenance_for"]


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Wheels the tests serve: aleph-greet 1.0.0 and 1.1.0, aleph-shout 1.0.0, and a non-plugin."""
    return build_test_wheels(tmp_path_factory.mktemp("wheels"))


@pytest.fixture
def local_index() -> Iterator[LocalIndex]:
    """An empty index on a free loopback port; tests add wheels to it."""
    with serve_index() as index:
        yield index


@pytest.fixture(autouse=True)
def _forget_installed_plugins() -> Iterator[None]:
    """A plugin folder joins sys.path and its module is imported in-process: undo that after each test."""
    saved = list(sys.path)
    before = set(sys.modules)
    yield
    sys.path[:] = saved
    for name in set(sys.modules) - before:
        if name.startswith(("aleph_greet", "aleph_shout", "aleph_plain")):
            del sys.modules[name]


def hub_runtime(
    workspace: Path, index_url: str = "https://pypi.org/simple/", extra: str = "", *plugins: object
) -> aleph.Aleph:
    """A strict runtime with the hub (and ``plugins``), user skills under the workspace, and ``index_url``."""
    import aleph_hub.plugin

    user = (workspace / ".user-skills").as_posix()
    # ``extra`` goes first: lines before any header belong to [hub], and it may open sections of its own.
    hub = f'index_url = "{index_url}"\nuser_skills_dirs = ["{user}"]\n'
    config = f"{extra}\n[hub]\n{hub}" if extra.lstrip().startswith("[") else f"[hub]\n{hub}{extra}"
    return isolated_runtime(workspace, aleph_hub.plugin, *plugins, config_toml=config)
