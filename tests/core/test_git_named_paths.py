"""Files a repository's own git config points git at are protected like the config itself.

Real git makes the repositories and writes their configs (``git config``), and a real ``git status``
shows that the named file is run: the protection is about what git does, so the tests ask git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from aleph import ProtectedPaths

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

BASE = ProtectedPaths(ProtectedPaths.HOST_EXECUTED)


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
        "GIT_AUTHOR_NAME": "t",
        "GIT_COMMITTER_NAME": "t",
    }
    env |= {"GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_EMAIL": "t@example.com"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q")
    return root


def hit(repo: Path, path: str) -> str | None:
    return BASE.with_git_names(repo).hit(path, non_dir=True)


def test_a_repository_whose_config_names_nothing_adds_nothing(repo: Path) -> None:
    assert BASE.with_git_names(repo) is BASE
    assert hit(repo, "src/app.py") is None
    assert hit(repo, ".git/config") == ".git/config"


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("include.path", "../team.gitconfig", "team.gitconfig"),
        ("includeIf.gitdir:~/.path", "../conf/extra.inc", "conf/extra.inc"),
        ("core.hooksPath", ".husky", ".husky/pre-commit"),
        ("core.fsmonitor", "./tools/fsmonitor.sh", "tools/fsmonitor.sh"),
        ("filter.lfs.clean", "sh scripts/clean.sh %f", "scripts/clean.sh"),
        ("diff.pdf.textconv", "bin/pdf2txt", "bin/pdf2txt"),
        ("alias.up", "!sh ./scripts/up.sh", "scripts/up.sh"),
        ("core.pager", "tools/pager --color", "tools/pager"),
    ],
)
def test_a_file_a_config_points_git_at_cannot_be_written(repo: Path, key: str, value: str, named: str) -> None:
    git(repo, "config", key, value)
    assert hit(repo, named) is not None
    assert hit(repo, "src/app.py") is None  # only what the config names


def test_an_included_config_is_followed_and_what_it_names_is_protected_too(repo: Path) -> None:
    (repo / "conf").mkdir()
    (repo / "conf" / "shared.gitconfig").write_text("[core]\n\tfsmonitor = conf/monitor.sh\n")
    git(repo, "config", "include.path", "../conf/shared.gitconfig")
    guard = BASE.with_git_names(repo)
    assert guard.hit("conf/shared.gitconfig", non_dir=True) is not None
    assert guard.hit("conf/monitor.sh", non_dir=True) is not None


def test_the_named_script_is_what_git_status_runs(repo: Path) -> None:
    # The reason for the rule, shown with git itself: a fsmonitor script in the workspace runs on status.
    script = repo / "fsmon.sh"
    marker = repo.parent / "ran"
    script.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    script.chmod(0o755)
    git(repo, "config", "core.fsmonitor", "./fsmon.sh")
    git(repo, "status", "--porcelain")
    assert marker.exists()
    assert hit(repo, "fsmon.sh") is not None


def test_a_config_changed_later_protects_from_then_on(repo: Path) -> None:
    assert hit(repo, ".githooks/pre-push") is None
    git(repo, "config", "core.hooksPath", ".githooks")
    assert hit(repo, ".githooks/pre-push") is not None
    git(repo, "config", "--unset", "core.hooksPath")
    assert hit(repo, ".githooks/pre-push") is None


def test_a_directory_above_a_named_file_cannot_be_replaced_by_a_link(repo: Path) -> None:
    git(repo, "config", "core.fsmonitor", "tools/watch/fsmon")
    guard = BASE.with_git_names(repo)
    assert guard.hit("tools", non_dir=True) is not None  # a symlink or file at tools/ would redirect it
    assert guard.hit("tools", non_dir=False) is None  # the directory itself may still be made


def test_paths_outside_the_workspace_and_home_relative_ones_add_nothing(repo: Path) -> None:
    git(repo, "config", "include.path", "~/.gitconfig-work")
    git(repo, "config", "core.hooksPath", "/usr/share/git-hooks")
    git(repo, "config", "core.editor", "vim")
    assert BASE.with_git_names(repo) is BASE


def test_a_worktree_file_pointer_and_a_submodule_config_are_read(repo: Path, tmp_path: Path) -> None:
    (repo / "f").write_text("x")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "one")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    git(repo, "config", "extensions.worktreeConfig", "true")
    git(linked, "config", "--worktree", "core.fsmonitor", "./mon.sh")
    git(repo, "config", "core.hooksPath", ".hooks")
    # The linked worktree's .git is a gitdir: pointer; its config.worktree names mon.sh in that tree,
    # and the common config (found through commondir) names the hooks directory for both.
    guard = BASE.with_git_names(linked)
    assert guard.hit("mon.sh", non_dir=True) is not None
    assert guard.hit(".hooks/pre-commit", non_dir=True) is not None
