"""aleph.ConfinedRoot: the one workspace walker families open files through (aleph-files, aleph-media)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aleph


@pytest.fixture
def root(tmp_path: Path) -> aleph.ConfinedRoot:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs" / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink("docs/a.txt", ws / "alias")
    os.symlink(tmp_path / "secret.txt", ws / "out")
    os.symlink("..", ws / "up")
    os.mkfifo(ws / "pipe")
    confined = aleph.ConfinedRoot(ws)
    yield confined  # type: ignore[misc]
    confined.close()


def read(root: aleph.ConfinedRoot, path: str) -> tuple[str, str]:
    with root.open_regular(path) as (fd, target):
        return os.read(fd, 100).decode(), target.rel


def test_a_link_inside_is_followed_to_its_canonical_path(root: aleph.ConfinedRoot) -> None:
    assert read(root, "alias") == ("inside", "docs/a.txt")
    assert read(root, str(root.root / "docs" / "./a.txt")) == ("inside", "docs/a.txt")


@pytest.mark.parametrize("path", ["out", "up/secret.txt", "../secret.txt", "docs/../../secret.txt"])
def test_every_way_out_is_denied(root: aleph.ConfinedRoot, path: str) -> None:
    with pytest.raises(aleph.PathRefused) as refused:
        read(root, path)
    assert refused.value.kind == "denied"


@pytest.mark.parametrize(
    ("path", "kind", "message"),
    [
        ("pipe", "type", "a FIFO"),
        ("docs", "type", "a directory"),
        ("missing.txt", "missing", "does not exist"),
        ("a\x00b", "invalid", "NUL"),
        ("x" * 300, "invalid", "longer than 255 bytes"),
        ("/elsewhere/a.txt", "denied", "outside the workspace"),
    ],
)
def test_bad_paths_are_refused_with_their_kind(root: aleph.ConfinedRoot, path: str, kind: str, message: str) -> None:
    with pytest.raises(aleph.PathRefused, match=message) as refused:
        read(root, path)
    assert refused.value.kind == kind


def test_a_missing_tail_is_canonical_as_written(root: aleph.ConfinedRoot) -> None:
    assert root.canonical("alias") == "alias"
    assert root.canonical("docs/new/deeper.txt") == "docs/new/deeper.txt"
    with root.open_dir("docs") as (_fd, rel):
        assert rel == "docs"
