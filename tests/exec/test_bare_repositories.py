"""A repository without a ``.git``: a changeset may not plant one that the person's git would run code from.

Git takes any directory holding ``HEAD``, ``objects/`` and ``refs/`` for a git directory (a bare
repository) and, run in it or below it, reads its ``config`` (``alias.*``, ``core.pager``,
``core.fsmonitor``) and runs its ``hooks``: the patterns protect ``**/.git/config``, not ``x/config``.
A command that writes ``e/HEAD``, ``e/objects``, ``e/refs`` and ``e/config`` (or the same at the top of a
workspace that has no ``.git``) left code for the next ``git`` run there. Red-team round, area "redfloor".
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aleph_exec.plugin
import pytest
from aleph_exec._changeset import read_changeset
from aleph_exec._decision import DEFAULT_PROTECTED, decide

from aleph import ProtectedPaths
from aleph.testing import isolated_runtime

from .txn_helpers import needs_overlay, overlay_run, snapshot

PLANT = (
    "mkdir -p {d}objects {d}refs && echo 'ref: refs/heads/main' > {d}HEAD"
    " && printf '[alias]\\n\\tst = !touch PWNED\\n' > {d}config"
)

BARE_PLANTS = [
    PLANT.format(d="e/"),
    PLANT.format(d=""),  # the workspace root, in a project without .git
    PLANT.format(d="deep/er/"),
    "git init -q --bare repo.git",
    "mkdir -p e/objects e/refs e/hooks && echo 0000000000000000000000000000000000000000 > e/HEAD"
    " && printf '#!/bin/sh\\ntouch PWNED\\n' > e/hooks/post-checkout",
]


def test_git_runs_a_planted_bare_repositorys_alias(tmp_path: Path) -> None:
    """The attack is real: git run inside such a directory runs what its config says."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    subprocess.run(["bash", "-c", PLANT.format(d="e/")], cwd=tmp_path, check=True)
    subprocess.run(["git", "st"], cwd=tmp_path / "e" / "refs", capture_output=True, check=False)
    assert (tmp_path / "e" / "refs" / "PWNED").exists() or (tmp_path / "e" / "PWNED").exists()


def judged_in_a_project(tmp_path: Path, command: str) -> Any:
    """What the commit judge decides on ``command``'s changeset, run in the overlay over a one-file project."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# project\n")
    layer = tmp_path / "layer"
    run = overlay_run(workspace, layer, command)
    assert run.returncode == 0, run.stderr
    return decide(read_changeset(layer / "upper", workspace), ProtectedPaths(DEFAULT_PROTECTED))


@needs_overlay
@pytest.mark.parametrize("command", BARE_PLANTS)
def test_a_changeset_that_plants_a_bare_repository_is_refused(command: str, tmp_path: Path) -> None:
    decision = judged_in_a_project(tmp_path, command)
    assert decision.action == "refuse", decision
    assert "git repository" in decision.reason


@needs_overlay
def test_changing_the_config_of_a_bare_repository_already_there_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", "fixtures/remote.git"], cwd=workspace, check=True)
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, "git config -f fixtures/remote.git/config core.pager 'touch PWNED'")
    decision = decide(read_changeset(layer / "upper", workspace), ProtectedPaths(DEFAULT_PROTECTED))
    assert decision.action == "refuse", decision


@needs_overlay
@pytest.mark.parametrize(
    "command",
    [
        "mkdir -p config refs objects && echo x > config/app.toml && echo y > refs/notes.md && echo z > HEAD",
        "mkdir -p src/hooks && echo 'export const h = 1' > src/hooks/use.ts",
        "mkdir -p objects refs && echo 'not a ref' > HEAD && echo '[alias]' > config",
        "mkdir -p docs/info && echo x > docs/info/index.md",
    ],
)
def test_everyday_files_named_like_a_git_directorys_are_committed(command: str, tmp_path: Path) -> None:
    decision = judged_in_a_project(tmp_path, command)
    assert decision.action == "commit", decision


@pytest.mark.anyio
async def test_a_bare_repository_planted_through_the_bash_tool_never_lands(workspace: Path) -> None:
    (workspace / "README.md").write_text("# project\n")
    rt = isolated_runtime(workspace, aleph_exec.plugin)
    await rt.__aenter__()
    try:
        tool = rt.registry.get("bash")
        reason = tool.tool.uncontained({}) if tool is not None else "no bash"  # type: ignore[attr-defined]
        if reason is not None:
            pytest.skip(f"no transaction here: {reason}")
        before = snapshot(workspace)
        out = json.loads((await rt.tool_service(tier="full").execute("bash", {"command": PLANT.format(d="e/")})).text)
    finally:
        await rt.aclose()
    assert out["changes"]["status"] == "refused", out["changes"]
    assert not (workspace / "e").exists()
    assert {k for k in snapshot(workspace) if not k.startswith(".aleph-data")} == {
        k for k in before if not k.startswith(".aleph-data")
    }
