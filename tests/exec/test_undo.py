"""Undo: a committed exec call is put back, through the API and ``aleph undo``; refusals and bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aleph_exec import UndoError, undo_call

from aleph._cli import main as aleph_main

from .txn_helpers import canary, needs_overlay, overlay_call, overlay_runtime, snapshot

pytestmark = needs_overlay


def _mine(files: dict[str, bytes]) -> dict[str, bytes]:
    runtime = (".aleph-data", "aleph.toml")
    return {k: v for k, v in files.items() if k not in runtime and not k.startswith(".aleph-data/")}


async def _commit_calls(workspace: Path, commands: list[str], toml: str = "") -> list[dict[str, object]]:
    rt, _ = overlay_runtime(workspace, toml)
    out = []
    async with rt:
        for command in commands:
            changes = (await overlay_call(rt, command))["changes"]
            assert "committed" == changes["status"], changes
            out.append(changes)
    return out


@pytest.mark.anyio
async def test_a_normal_edit_is_committed_and_undone(workspace: Path) -> None:
    canary(workspace, files=6)
    before = _mine(snapshot(workspace))
    command = "echo edit >> README.md && rm src/f1.txt && mkdir -p new/d && echo n > new/d/n && ln -s README.md r"
    (changes,) = await _commit_calls(workspace, [command])
    assert before != _mine(snapshot(workspace))
    done = undo_call(config_path=workspace / "aleph.toml", workspace=workspace)
    assert (changes["undo"], 4) == (done["call_id"], done["restored"])
    assert before == _mine(snapshot(workspace))
    with pytest.raises(UndoError, match="nothing to undo"):
        undo_call(config_path=workspace / "aleph.toml", workspace=workspace)


@pytest.mark.anyio
async def test_aleph_undo_restores_a_named_call_and_refuses_over_a_later_one(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    canary(workspace, files=3)
    original = (workspace / "README.md").read_bytes()
    first, second = await _commit_calls(workspace, ["echo one >> README.md", "echo two >> README.md"])
    argv = ["--config", str(workspace / "aleph.toml"), "--workspace", str(workspace), "undo"]
    assert 1 == aleph_main([*argv, str(first["undo"])])
    assert "a later call" in capsys.readouterr().err
    assert 0 == aleph_main([*argv, "--list", "--json"])
    assert [second["undo"], first["undo"]] == [row["call_id"] for row in json.loads(capsys.readouterr().out)]
    assert 0 == aleph_main([*argv, str(second["undo"])])
    assert 0 == aleph_main([*argv, str(first["undo"]), "--json"])
    assert first["undo"] == json.loads(capsys.readouterr().out.splitlines()[-1])["call_id"]
    assert original == (workspace / "README.md").read_bytes()


@pytest.mark.anyio
async def test_undo_refuses_a_path_edited_since_unless_forced(workspace: Path) -> None:
    canary(workspace, files=3)
    original = (workspace / "README.md").read_bytes()
    await _commit_calls(workspace, ["echo one >> README.md"])
    (workspace / "README.md").write_text("edited by hand\n")
    with pytest.raises(UndoError, match="changed since the call"):
        undo_call(config_path=workspace / "aleph.toml", workspace=workspace)
    done = undo_call(config_path=workspace / "aleph.toml", workspace=workspace, force=True)
    assert original == (workspace / "README.md").read_bytes()
    # forced, the hand edit is not overwritten: it is renamed beside
    assert (["README.md.aleph-undo-1"], "edited by hand\n") == (
        done["set_aside"],
        (workspace / "README.md.aleph-undo-1").read_text(),
    )


@pytest.mark.anyio
async def test_undo_keeps_a_file_someone_added_to_a_folder_the_call_created(workspace: Path) -> None:
    canary(workspace, files=3)
    await _commit_calls(workspace, ["mkdir -p nd/deep && echo made > nd/made.txt && echo d > nd/deep/d.txt"])
    (workspace / "nd" / "human.txt").write_text("mine\n")
    (workspace / "nd" / "deep" / "also.txt").write_text("mine too\n")
    done = undo_call(config_path=workspace / "aleph.toml", workspace=workspace)
    assert ("mine\n", "mine too\n") == (
        (workspace / "nd" / "human.txt").read_text(),
        (workspace / "nd" / "deep" / "also.txt").read_text(),
    )
    assert (False, False) == ((workspace / "nd" / "made.txt").exists(), (workspace / "nd" / "deep" / "d.txt").exists())
    assert ["nd/deep"] == done["kept"]


@pytest.mark.anyio
async def test_forced_undo_keeps_a_file_edited_inside_a_created_folder_and_a_file_at_a_deleted_path(
    workspace: Path,
) -> None:
    canary(workspace, files=3)
    (workspace / "old.txt").write_text("old\n")
    await _commit_calls(workspace, ["mkdir out && echo gen > out/gen.txt && rm old.txt"])
    (workspace / "out" / "gen.txt").write_text("hand-tuned\n")
    (workspace / "old.txt").write_text("a new file a person wrote\n")
    with pytest.raises(UndoError, match="changed since the call"):
        undo_call(config_path=workspace / "aleph.toml", workspace=workspace)
    done = undo_call(config_path=workspace / "aleph.toml", workspace=workspace, force=True)
    assert "hand-tuned\n" == (workspace / "out" / "gen.txt").read_text()
    assert ("old\n", "a new file a person wrote\n") == (
        (workspace / "old.txt").read_text(),
        (workspace / "old.txt.aleph-undo-1").read_text(),
    )
    assert (["out"], ["old.txt.aleph-undo-1"]) == (done["kept"], done["set_aside"])


@pytest.mark.anyio
async def test_undo_of_an_untouched_created_folder_removes_it_whole(workspace: Path) -> None:
    canary(workspace, files=3)
    await _commit_calls(workspace, ["mkdir -p a/b/c && echo x > a/b/c/x && ln -s x a/b/c/l"])
    done = undo_call(config_path=workspace / "aleph.toml", workspace=workspace)
    assert (False, None) == ((workspace / "a").exists(), done.get("kept"))


@pytest.mark.anyio
async def test_undo_is_bounded_by_calls_and_bytes(workspace: Path) -> None:
    canary(workspace, files=3)
    calls = await _commit_calls(workspace, [f"echo {i} > n{i}.txt" for i in range(4)], "[exec]\nundo_max_calls = 2\n")
    undo_dir = workspace / ".aleph-data" / "exec" / "undo"
    assert sorted(str(c["undo"]) for c in calls[2:]) == sorted(p.name for p in undo_dir.iterdir())
    with pytest.raises(UndoError, match="no kept exec call"):
        undo_call(str(calls[0]["undo"]), config_path=workspace / "aleph.toml", workspace=workspace)

    (workspace / "big.bin").write_bytes(b"x" * 3 * 1024 * 1024)
    toml = "[exec]\nundo_max_mb = 2\n"
    (big,) = await _commit_calls(workspace, ["rm big.bin"], toml)
    assert (None, "not kept: larger than [exec] undo_max_mb") == (big["undo"], big["undo_note"])
    assert not (workspace / "big.bin").exists()
