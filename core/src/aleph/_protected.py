"""Workspace paths no tool may write: the files a trusted program on the host reads and then runs code from.

A tool's changes land in the person's workspace, where their own programs run later: ``git status``
reads ``.git/config`` (``core.fsmonitor``, ``core.pager``, ``include.path``), follows ``.git/commondir``
and ``gitdir:`` pointers to another config, and runs ``.git/hooks``; direnv, mise, editors, npm, yarn and
pre-commit run what their project files name. A change there is code the person runs unasked, so it is
refused wherever it comes from: a transaction's changeset, the files family, a patch.

What is in the list and why (docs/command-policy.md says it for people):

* every git directory's config, hooks and pointers (``config``, ``config.worktree``, ``hooks``,
  ``commondir``, ``gitdir``, ``info/attributes``), for the repository, its submodules
  (``.git/modules/**``), its worktrees (``.git/worktrees/*``) and nested repositories (``**/.git``);
  a ``.git`` *file* (a ``gitdir:`` pointer) or symlink anywhere is refused by the prefix rule below;
* Mercurial's ``.hg/hgrc`` (hooks);
* files other programs execute from a project unasked or on the next routine command: ``.envrc``
  (direnv), ``mise.toml``/``.mise.toml``/``.config/mise`` (mise trusts by path, not content),
  ``.vscode/settings.json`` and ``tasks.json`` (interpreter and tool paths, tasks run on folder open),
  ``.idea`` (run configurations), ``.npmrc``, ``.yarnrc``, ``.yarnrc.yml`` (``script-shell``,
  ``node-options``, ``yarnPath``), ``.pre-commit-config.yaml`` (what the installed hook runs),
  ``.exrc``, ``.nvimrc``, ``.nvim.lua`` (editor start-up code).

Not in it: build files and sources (``Makefile``, ``package.json`` scripts, ``setup.py``,
``conftest.py``): they run when a person runs the build or the tests, like any code an agent edits,
and are reviewed as code. ``.gitattributes`` only selects drivers that a (protected) config defines,
and git ignores ``update = !command`` from ``.gitmodules``.

The list (:attr:`aleph.ProtectedPaths.HOST_EXECUTED`) grows through ``[workspace] protected`` (globs)
and the ``aleph_protected_paths`` hook, and :meth:`ProtectedPaths.with_git_names` adds the workspace
files that its git configs point git at (an ``include.path``, a ``core.hooksPath``, a script a
``core.fsmonitor`` or filter runs).

Patterns are ``/``-separated globs relative to the workspace (``*`` and ``?`` inside one component,
``**`` across components). A pattern protects what it matches and everything under it, and a
non-directory at any of its leading components: ``**/.git/config`` also refuses a ``.git`` *file*
(a ``gitdir:`` pointer) or symlink anywhere, which would point git at another config.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from aleph._gitnames import git_named_paths

__all__ = ["HOST_EXECUTED_PATHS", "ProtectedPaths", "check_pattern", "glob_regex"]

_GIT_DIR_FILES = ("config", "config.worktree", "hooks", "commondir", "gitdir", "info/attributes")
_GIT_DIRS = (".git", ".git/modules/**", ".git/worktrees/*", "**/.git", "**/.git/modules/**", "**/.git/worktrees/*")

HOST_EXECUTED_PATHS: tuple[str, ...] = (
    *(f"{d}/{f}" for d in _GIT_DIRS for f in _GIT_DIR_FILES),
    "**/.hg/hgrc",
    "**/.envrc",
    "**/mise.toml",
    "**/.mise.toml",
    "**/.config/mise",
    "**/.vscode/settings.json",
    "**/.vscode/tasks.json",
    "**/.idea",
    "**/.npmrc",
    "**/.yarnrc",
    "**/.yarnrc.yml",
    "**/.pre-commit-config.yaml",
    "**/.exrc",
    "**/.nvimrc",
    "**/.nvim.lua",
)
"""Workspace globs whose contents a trusted program on the host runs (see the module docstring)."""


def check_pattern(pattern: object) -> str:
    """``pattern`` if it is a workspace-relative glob; else ValueError saying why."""
    if not isinstance(pattern, str) or not pattern.strip("/") or pattern.startswith("/"):
        raise ValueError(f"protected path {pattern!r}: give a glob relative to the workspace, e.g. '**/.envrc'")
    if ".." in pattern.split("/") or "\x00" in pattern:
        raise ValueError(f"protected path {pattern!r}: '..' and NUL are not allowed")
    return pattern


def _component(part: str) -> str:
    out = []
    for ch in part:
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
    return "".join(out)


def glob_regex(parts: list[str]) -> str:
    """Regex text for a ``/``-split glob."""
    out = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out += "[^/]+(?:/[^/]+)*" if last else "(?:[^/]+/)*"
        else:
            out += _component(part) + ("" if last else "/")
    return out


class ProtectedPaths:
    """A set of workspace-relative globs (and literal paths), matched against one path at a time.

    Each pattern is indexed by a component a matching path must contain (its last one without glob
    characters), so a path is tried only against the few patterns that name one of its components:
    judging a changeset of thousands of ordinary paths costs a set lookup per path, not a regex per
    pattern. A pattern with no literal component (``**/*.pem``) is tried on every path.
    """

    HOST_EXECUTED: ClassVar[tuple[str, ...]] = HOST_EXECUTED_PATHS
    """The globs every family protects: files a trusted program on the host runs code from (module docstring)."""

    GIT_DIR_CODE: ClassVar[frozenset[str]] = frozenset(f.split("/", 1)[0] for f in _GIT_DIR_FILES)
    """The entries of a git directory git runs code from or follows to another config (``config``,
    ``hooks``, the pointers, ``info`` for its attributes): what :data:`HOST_EXECUTED` protects in a ``.git``."""

    GIT_DIR_SHAPE: ClassVar[tuple[str, ...]] = ("HEAD", "objects", "refs")
    """What makes a directory a git directory to git's discovery, with no ``.git`` above it: a bare
    repository, whose :data:`GIT_DIR_CODE` entries git reads and runs like those of a ``.git``."""

    INTERNAL: ClassVar[tuple[str, ...]] = (".aleph-tx",)
    """Top-level workspace directories Aleph keeps for itself, not the project's: ``.aleph-tx`` holds
    aleph-exec's transaction layers (on the workspace's filesystem, so a commit renames). Families list
    and search none of them; aleph-exec protects, masks and ignores them (see docs/exec.md)."""

    def __init__(self, patterns: Iterable[str], literals: Iterable[str] = ()) -> None:
        self._globs = tuple(dict.fromkeys(patterns))
        self._literals = tuple(literals)
        self._extended: dict[tuple[str, ...], ProtectedPaths] = {}
        entries: list[tuple[str, list[str], bool]] = []
        for p in self._globs:  # the same glob from two sources is matched once
            entries.append((p, [s for s in p.strip("/").split("/") if s], True))
        for p in self._literals:
            entries.append((p, [s for s in p.strip("/").split("/") if s], False))
        self.patterns = [e[0] for e in entries if e[1]]
        # (required component or None, compiled regex, the pattern's text), for full and prefix matches
        self._full: dict[str | None, list[tuple[re.Pattern[str], str]]] = {}
        self._prefix: dict[str | None, list[tuple[re.Pattern[str], str]]] = {}
        for text, parts, is_glob in entries:
            if not parts:
                continue
            regex = glob_regex(parts) if is_glob else re.escape("/".join(parts))
            key = _required(parts, is_glob)
            self._full.setdefault(key, []).append((re.compile(f"{regex}(?:/.*)?", re.DOTALL), text))
            for k in range(1, len(parts)):
                head = parts[:k]
                if head[-1] == "**":
                    continue
                regex = glob_regex(head) if is_glob else re.escape("/".join(head))
                self._prefix.setdefault(_required(head, is_glob), []).append((re.compile(regex, re.DOTALL), text))

    def with_git_names(self, workspace: Path) -> ProtectedPaths:
        """These patterns plus the workspace files its git configs point git at (:mod:`aleph._gitnames`).

        Call it when judging (it reads the configs again only when one of them changed), so a config the
        person edits later protects what it names from then on.
        """
        names = git_named_paths(workspace)
        if not names:
            return self
        extended = self._extended.get(names)
        if extended is None:
            extended = ProtectedPaths(self._globs, (*self._literals, *names))
            if len(self._extended) >= 16:
                self._extended.clear()
            self._extended[names] = extended
        return extended

    def hit(self, path: str, *, non_dir: bool) -> str | None:
        """The pattern protecting ``path`` (a change of a non-directory when ``non_dir``), or None."""
        components = path.split("/")
        found = _first(self._full, components, path)
        if found is None and non_dir:
            found = _first(self._prefix, components, path)
        return found


def _required(parts: list[str], is_glob: bool) -> str | None:
    """A component every path matching ``parts`` contains, or None when the pattern names none."""
    for part in reversed(parts):
        if not is_glob or not any(c in part for c in "*?["):
            return part
    return None


def _first(table: dict[str | None, list[tuple[re.Pattern[str], str]]], components: list[str], path: str) -> str | None:
    candidates = table.get(None, [])
    for component in components:
        if component in table and component is not None:
            candidates = [*candidates, *table[component]]
    for regex, text in candidates:
        if regex.fullmatch(path):
            return text
    return None
