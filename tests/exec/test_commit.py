"""Commit: what lands is exactly what the command did on its view; a crash mid-commit is finished or rolled back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aleph_exec.plugin
import pytest
from aleph_exec._changeset import read_changeset
from aleph_exec._commit import CommitError, commit, recover

from aleph.testing import isolated_runtime

from .txn_helpers import canary, needs_overlay, overlay_run, snapshot

pytestmark = needs_overlay

COMMAND = (
    "echo new > src/new.txt && echo more >> README.md && rm -rf docs && mkdir -p build/a/b && echo o > build/a/b/o "
    "&& ln -sf ../README.md src/readme && chmod 600 src/f1.txt && rm -rf src/pkg && echo now-a-file > src/pkg "
    "&& mkdir src/f4.txt.d && printf 'x%.0s' $(seq 5000) > big.bin"
)


def _expected(workspace: Path, tmp_path: Path, command: str) -> dict[str, bytes]:
    """What the command does when run directly on a copy of the workspace."""
    copy = tmp_path / "direct"
    shutil.copytree(workspace, copy, symlinks=True)
    subprocess.run(["bash", "-c", command], cwd=copy, check=True)
    return snapshot(copy)


def _modes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): os.lstat(p).st_mode for p in root.rglob("*")}


def _layer(tmp_path: Path, where: Path | None = None) -> Path:
    return Path(tempfile.mkdtemp(dir=where or tmp_path))


def test_a_commit_lands_exactly_what_the_command_did(workspace: Path, tmp_path: Path) -> None:
    canary(workspace, files=9)
    expected = _expected(workspace, tmp_path, COMMAND)
    layer = _layer(tmp_path)
    overlay_run(workspace, layer, COMMAND)
    cs = read_changeset(layer / "upper", workspace)
    manifest = commit(cs, journal_dir=tmp_path / "journal", undo_dir=tmp_path / "undo" / "c1", meta={"call_id": "c1"})
    assert expected == snapshot(workspace)
    assert 0o600 == os.lstat(workspace / "src" / "f1.txt").st_mode & 0o777
    assert [] == list((tmp_path / "journal").iterdir())
    assert "c1" == manifest["call_id"] and (tmp_path / "undo" / "c1" / "manifest.json").is_file()
    kept = snapshot(tmp_path / "undo" / "c1" / "files")
    assert {"README.md", "docs/f2.txt", "src/pkg/f0.txt"} <= set(kept)
    assert b"# canary\n" == kept["README.md"]


def test_a_commit_across_filesystems_copies_and_keeps_modes(workspace: Path, tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem (/dev/shm) here")
    canary(workspace, files=9)
    expected = _expected(workspace, tmp_path, COMMAND)
    layer = _layer(tmp_path, shm)
    try:
        overlay_run(workspace, layer, COMMAND)
        cs = read_changeset(layer / "upper", workspace)
        undo = Path(tempfile.mkdtemp(dir=shm)) / "c1"
        commit(cs, journal_dir=tmp_path / "journal", undo_dir=undo, meta={"call_id": "c1"})
        assert expected == snapshot(workspace)
        assert 0o600 == os.lstat(workspace / "src" / "f1.txt").st_mode & 0o777
        assert b"# canary\n" == (undo / "files" / "README.md").read_bytes()
        shutil.rmtree(undo.parent)
    finally:
        shutil.rmtree(layer, ignore_errors=True)


CRASHER = """
import os, signal, sys
from pathlib import Path
from aleph_exec._changeset import read_changeset
from aleph_exec._commit import commit

upper, ws, journal, undo, at = sys.argv[1:]
cs = read_changeset(Path(upper), Path(ws))

def on_step(i):
    if i == int(at):
        os.kill(os.getpid(), signal.SIGKILL)

commit(cs, journal_dir=Path(journal), undo_dir=Path(undo), meta={"call_id": "c1"}, on_step=on_step)
print(len(cs.changes))
"""


def _crash(
    workspace: Path, layer: Path, tmp_path: Path, at: int, store: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Commit the layer in a subprocess that SIGKILLs itself before step ``at``."""
    store = store or tmp_path
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    argv = [sys.executable, str(script), str(layer / "upper"), str(workspace), str(store / "journal")]
    return subprocess.run([*argv, str(store / "undo" / "c1"), str(at)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("at", [0, 1, 4, 7, 10])
def test_a_commit_killed_mid_way_is_finished_at_the_next_start(workspace: Path, tmp_path: Path, at: int) -> None:
    canary(workspace, files=9)
    expected = _expected(workspace, tmp_path, COMMAND)
    layer = _layer(tmp_path)
    overlay_run(workspace, layer, COMMAND)
    killed = _crash(workspace, layer, tmp_path, at)
    assert -9 == killed.returncode, killed.stderr
    (journal,) = (tmp_path / "journal").glob("*.json")
    assert at < len(json.loads(journal.read_text())["steps"])
    assert ["c1: finished"] == recover(tmp_path / "journal")
    assert expected == snapshot(workspace)
    assert (tmp_path / "undo" / "c1" / "manifest.json").is_file()
    assert [] == recover(tmp_path / "journal")  # nothing left to do


@pytest.mark.parametrize("at", [1, 9])
def test_a_commit_killed_without_its_layer_is_rolled_back(workspace: Path, tmp_path: Path, at: int) -> None:
    canary(workspace, files=9)
    before = snapshot(workspace)
    layer = _layer(tmp_path)
    overlay_run(workspace, layer, COMMAND)
    assert -9 == _crash(workspace, layer, tmp_path, at).returncode
    assert before != snapshot(workspace)  # it got part of the way
    shutil.rmtree(layer)
    assert ["c1: rolled back (its layer is gone)"] == recover(tmp_path / "journal")
    assert before == snapshot(workspace)


def test_the_journal_is_on_disk_before_the_first_change(workspace: Path, tmp_path: Path) -> None:
    canary(workspace, files=3)
    before = snapshot(workspace)
    layer = _layer(tmp_path)
    overlay_run(workspace, layer, "rm -rf src && echo x > README.md")
    cs = read_changeset(layer / "upper", workspace)
    seen = []

    def first(i: int) -> None:
        if i == 0:
            seen.append((len(list((tmp_path / "journal").glob("*.json"))), snapshot(workspace) == before))

    commit(cs, journal_dir=tmp_path / "journal", undo_dir=tmp_path / "undo" / "c1", meta={}, on_step=first)
    assert [(1, True)] == seen


@pytest.mark.anyio
async def test_the_plugin_finishes_a_crashed_commit_when_the_runtime_starts(workspace: Path, tmp_path: Path) -> None:
    canary(workspace, files=9)
    expected = _expected(workspace, tmp_path, COMMAND)
    layer = _layer(tmp_path)
    overlay_run(workspace, layer, COMMAND)
    store = workspace / ".aleph-data" / "exec"
    store.mkdir(parents=True)
    assert -9 == _crash(workspace, layer, tmp_path, 4, store).returncode
    async with isolated_runtime(workspace, aleph_exec.plugin):
        pass
    runtime = (".aleph-data", "aleph.toml")
    assert expected == {k: v for k, v in snapshot(workspace).items() if not k.startswith(runtime)}
    assert [] == list((store / "journal").iterdir())
    assert (store / "undo" / "c1" / "manifest.json").is_file()


def test_a_directory_swapped_for_a_symlink_before_the_commit_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "old").write_text("old")
    outside = tmp_path / "outside"
    outside.mkdir()
    layer = _layer(tmp_path)
    overlay_run(workspace, layer, "echo new > d/new && rm d/old")
    cs = read_changeset(layer / "upper", workspace)
    shutil.rmtree(workspace / "d")
    (workspace / "d").symlink_to(outside)  # swapped in after the judgement, before the commit
    with pytest.raises(CommitError, match="leads outside the workspace"):
        commit(cs, journal_dir=tmp_path / "journal", undo_dir=tmp_path / "undo" / "c1", meta={})
    assert [] == list(outside.iterdir())
    assert [] == list((tmp_path / "journal").iterdir())
