"""Files a program on the host runs code from: no sandboxed command gets them committed.

Real bash in the real sandbox under tier auto; after each refusal the host's own programs run in the
workspace (``git status``) and must not run what the command planted.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import aleph_exec.plugin
import pytest
from aleph_exec._tree import remove_tree

import aleph
from aleph.testing import isolated_runtime


async def _bash(workspace: Path, command: str, toml: str = "") -> dict[str, object]:
    async with isolated_runtime(workspace, aleph_exec.plugin, config_toml=toml) as rt:
        tool = rt.registry.get("bash")
        reason = tool.tool.uncontained({}) if tool is not None else "no bash"  # type: ignore[attr-defined]
        if reason is not None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"no transaction here: {reason}")
            pytest.skip(f"no transaction here: {reason}")
        out = await rt.tool_service(tier="auto").execute("bash", {"command": command})
    result: dict[str, object] = json.loads(out.text)
    return result


def _git_repo(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "README").write_text("hello\n")


def _archive(workspace: Path, members: dict[str, str]) -> None:
    """``drop.tar`` in the workspace with ``members``: what a command extracts, which no text analysis sees."""
    with tarfile.open(workspace / "drop.tar", "w") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.anyio
async def test_a_commondir_pointer_to_an_attacker_config_never_lands_and_git_status_runs_nothing(
    workspace: Path,
) -> None:
    _git_repo(workspace)
    pwned = workspace.parent / "PWNED"
    evil = (workspace / ".git" / "config").read_text() + f'[core]\n\tfsmonitor = "touch {pwned}"\n'
    _archive(workspace, {".git/commondir": "../evil\n", "evil/config": evil, "evil/HEAD": "ref: refs/heads/main\n"})
    out = await _bash(workspace, "tar -xf drop.tar && echo extracted")
    assert (False, 0, "extracted\n") == (out["ok"], out["exit_code"], out["stdout"]), out
    assert "refused" == out["changes"]["status"]  # type: ignore[index]
    assert ".git/commondir" in str(out["error"]) and "none of its file changes were applied" in str(out["error"])
    assert not (workspace / ".git" / "commondir").exists()
    subprocess.run(["git", "status"], cwd=workspace, capture_output=True, check=False, timeout=30)
    assert not pwned.exists()


@pytest.mark.anyio
async def test_the_text_layer_refuses_the_same_write_spelled_out(workspace: Path) -> None:
    _git_repo(workspace)
    with pytest.raises(aleph.PermissionDenied, match="write_protected_path"):
        await _bash(workspace, "printf '../evil\\n' > .git/commondir")
    assert not (workspace / ".git" / "commondir").exists()


HOST_EXECUTED = [
    ".git/worktrees/w/commondir",
    ".git/modules/m/hooks/post-checkout",
    ".git/modules/m/config",
    ".git/info/attributes",
    ".git/gitdir",
    "lib/.git",
    "lib/.git/commondir",
    ".envrc",
    "pkg/.npmrc",
    ".yarnrc.yml",
    ".vscode/tasks.json",
    ".vscode/settings.json",
    ".idea/runConfigurations/r.xml",
    ".pre-commit-config.yaml",
    "mise.toml",
    "vendor/.hg/hgrc",
    ".exrc",
]


@pytest.mark.anyio
@pytest.mark.parametrize("path", HOST_EXECUTED)
async def test_files_host_programs_run_code_from_are_refused(workspace: Path, path: str) -> None:
    _git_repo(workspace)
    _archive(workspace, {path: "[core]\n\tfsmonitor = id\n", "ordinary.txt": "x\n"})
    out = await _bash(workspace, "tar -xf drop.tar")
    assert (False, "refused") == (out["ok"], out["changes"]["status"]), out  # type: ignore[index]
    assert not (workspace / "ordinary.txt").exists()  # nothing of a refused changeset lands


@pytest.mark.anyio
async def test_configured_workspace_globs_are_protected_too(workspace: Path) -> None:
    toml = 'protected = ["ops/*.sh"]\n'  # isolated_runtime appends it to its [workspace] table
    out = await _bash(workspace, "mkdir -p ops && echo x > ops/deploy.sh", toml)
    assert (False, "refused") == (out["ok"], out["changes"]["status"]), out  # type: ignore[index]
    assert not (workspace / "ops").exists()


@pytest.mark.anyio
async def test_ordinary_project_files_including_build_files_are_committed(workspace: Path) -> None:
    out = await _bash(
        workspace, "echo 'all:' > Makefile && echo x > notes.md && mkdir -p .vscode && echo '{}' > .vscode/launch.json"
    )
    assert ("committed", True) == (out["changes"]["status"], "ok" not in out), out  # type: ignore[index]
    assert (workspace / "Makefile").exists()


@pytest.mark.anyio
async def test_a_tree_deeper_than_the_recursion_limit_is_refused_and_its_layer_removed(workspace: Path) -> None:
    out = await _bash(workspace, "p=.; for i in $(seq 1500); do p=$p/d; done; mkdir -p $p && echo deep")
    assert (False, "refused", "deep\n") == (out["ok"], out["changes"]["status"], out["stdout"]), out  # type: ignore[index]
    assert not (workspace / "d").exists()
    layers = [p for p in workspace.rglob("layer-*") if any(p.iterdir())]
    assert [] == layers


def test_remove_tree_removes_a_deep_tree_with_unreadable_directories(tmp_path: Path) -> None:
    top = tmp_path / "top"
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        os.mkdir("top", dir_fd=fd)
        cur = os.open("top", os.O_RDONLY, dir_fd=fd)
        for _ in range(1500):
            os.mkdir("dd", dir_fd=cur)
            with open(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=cur), "w") as f:
                f.write("x")
            os.symlink("/etc", "link", dir_fd=cur)
            nxt = os.open("dd", os.O_RDONLY, dir_fd=cur)
            os.close(cur)
            cur = nxt
        os.mkdir("locked", dir_fd=cur)
        os.chmod("locked", 0, dir_fd=cur)
        os.close(cur)
    finally:
        os.close(fd)
    remove_tree(top)
    assert not top.exists()
    assert Path("/etc/passwd").exists()  # the links were removed, never followed


def test_remove_tree_of_a_symlink_removes_the_link_only(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "keep").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    remove_tree(tmp_path / "link")
    assert (False, True) == ((tmp_path / "link").exists(), (tmp_path / "real" / "keep").exists())
