"""The file tools cannot plant a repository without a ``.git`` that git would run code from.

A directory with ``HEAD``, ``objects/`` and ``refs/`` is a git directory to git: run in it or below it,
git reads its ``config`` (``alias.st = !cmd``, ``core.pager``) and runs its ``hooks``. Writing
``e/config`` there, or completing such a directory around a ``config`` already written, is refused like
``.git/config``, in whatever order the pieces come. Red-team round, area "redfloor".
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import aleph

STEPS = {
    "config": ("file_write", {"path": "e/config", "content": "[alias]\n\tst = !touch PWNED\n", "create_dirs": True}),
    "HEAD": ("file_write", {"path": "e/HEAD", "content": "ref: refs/heads/main\n", "create_dirs": True}),
    "objects": ("file_ops", {"operation": "mkdir", "path": "e/objects"}),
    "refs": ("file_write", {"path": "e/refs/heads/main", "content": "x\n", "create_dirs": True}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("order", [("config", "HEAD", "objects", "refs"), ("HEAD", "objects", "refs", "config")])
async def test_the_piece_that_completes_a_bare_repository_is_refused(call, workspace: Path, order) -> None:
    *first, last = order
    for name in first:
        tool, payload = STEPS[name]
        await call(tool, **payload)
    tool, payload = STEPS[last]
    with pytest.raises(aleph.PermissionDenied, match="protected path"):
        await call(tool, **payload)


@pytest.mark.anyio
async def test_no_order_of_the_pieces_leaves_a_bare_repository_with_a_config(call, workspace: Path) -> None:
    for n, order in enumerate(itertools.permutations(STEPS)):
        root = f"r{n}"
        for name in order:
            tool, payload = STEPS[name]
            payload = {**payload, "path": payload["path"].replace("e/", f"{root}/", 1)}
            try:
                await call(tool, **payload)
            except aleph.PermissionDenied:
                pass
        d = workspace / root
        complete = (d / "HEAD").exists() and (d / "objects").is_dir() and (d / "refs").is_dir()
        assert not (complete and (d / "config").exists()), order


@pytest.mark.anyio
async def test_patches_cannot_plant_one_either(call, workspace: Path) -> None:
    (workspace / "e" / "objects").mkdir(parents=True)
    (workspace / "e" / "refs").mkdir()
    (workspace / "e" / "HEAD").write_text("ref: refs/heads/main\n")
    patch = "*** Begin Patch\n*** Add File: e/hooks/post-checkout\n+#!/bin/sh\n+touch PWNED\n*** End Patch"
    with pytest.raises(aleph.PermissionDenied, match="protected path"):
        await call("apply_patch", patch=patch)
    assert not (workspace / "e" / "hooks").exists()


@pytest.mark.anyio
async def test_files_named_like_a_git_directorys_stay_writable(call, workspace: Path) -> None:
    await call("file_write", path="config/app.toml", content="x = 1\n", create_dirs=True)
    await call("file_write", path="src/hooks/use.ts", content="export {}\n", create_dirs=True)
    await call("file_write", path="refs/notes.md", content="notes\n", create_dirs=True)
    await call("file_ops", operation="mkdir", path="docs/info")
    assert (workspace / "config" / "app.toml").read_text() == "x = 1\n"


@pytest.mark.anyio
async def test_a_refused_write_makes_none_of_the_directories_it_asked_for(call, workspace: Path) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    with pytest.raises(aleph.PermissionDenied, match="protected path"):
        await call("file_write", path=".git/hooks/new/deeper/pre-commit", content="#!/bin/sh\n", create_dirs=True)
    with pytest.raises(aleph.PermissionDenied, match="protected path"):
        await call("file_write", path="sub/.git/hooks/pre-commit", content="#!/bin/sh\n", create_dirs=True)
    assert not (workspace / ".git" / "hooks" / "new").exists()
    assert not (workspace / "sub").exists()
