"""Workspace files a repository's git configuration points git at, which git then reads or runs.

The protected list (:mod:`aleph._protected`) keeps every ``.git/config`` itself out of a tool's reach.
But a config the person wrote may name *other* files of the workspace: ``include.path`` and
``includeIf.*.path`` pull in another config (which can set ``core.fsmonitor`` or ``core.pager``),
``core.hooksPath`` moves the hooks into a tracked directory (husky's ``.husky``), and a command setting
(``core.fsmonitor``, ``filter.<x>.clean``, ``diff.<x>.textconv``, ``alias.<x> = !…``) can name a script
of the repository. A write there is code the person's next ``git status`` or ``git commit`` runs, so
those files are protected too, for as long as the config names them.

The configs are read with git itself (``git config --file … --null --list --no-includes``), so the
syntax is git's own, and includes are followed here, bounded, relative to the including file. The
answer is cached by each config file's identity (inode, size, mtime), so a judge asks once per change.
Without git on the host nothing runs those files, and nothing extra is protected.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["git_named_paths"]

MAX_CONFIGS = 64
"""Configs read for one workspace at most (its own, its worktrees' and submodules', and their includes)."""

_CONFIG_BYTES = 8 << 20

# Keys (lowercased, as git lists them) whose value is a path git reads a config or hooks from.
_PATH_KEYS = ("include.path", "core.hookspath")
# Keys whose value is a command git runs: (prefix, suffix) of the lowercased key.
_COMMAND_KEYS = (
    ("core.fsmonitor", ""),
    ("core.pager", ""),
    ("core.editor", ""),
    ("core.sshcommand", ""),
    ("core.askpass", ""),
    ("sequence.editor", ""),
    ("diff.external", ""),
    ("gpg.program", ""),
    ("credential.helper", ""),
    ("uploadpack.packobjectshook", ""),
    ("alias.", ""),
    ("pager.", ""),
    ("filter.", ".clean"),
    ("filter.", ".smudge"),
    ("filter.", ".process"),
    ("diff.", ".command"),
    ("diff.", ".textconv"),
    ("merge.", ".driver"),
    ("gpg.", ".program"),
    ("credential.", ".helper"),
)

_cache: dict[tuple[str, ...], tuple[str, ...]] = {}


def git_named_paths(workspace: Path) -> tuple[str, ...]:
    """Workspace-relative paths that the workspace's git configs point git at (see the module docstring)."""
    git = shutil.which("git")
    root = Path(os.path.realpath(workspace))
    if git is None or not root.is_dir():
        return ()
    configs = list(_own_configs(root))
    key = (str(root), *(_identity(c) for c in configs))
    found = _cache.get(key)
    if found is None:
        found = _collect(git, root, configs)
        if len(_cache) >= 256:
            _cache.clear()
        _cache[key] = found
    return found


def _identity(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:-"
    return f"{path}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _own_configs(root: Path) -> Iterator[Path]:
    """The repository's config files: its git dir's, its worktrees' and its submodules' (not nested repos)."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return
    yield git_dir / "config"
    yield git_dir / "config.worktree"
    try:  # a linked worktree's git dir names the repository's own through ``commondir``
        common = (git_dir / "commondir").read_text(errors="replace")[:4096].strip()
    except OSError:
        common = ""
    if common:
        yield (git_dir / common).resolve() / "config"
    for sub in ("worktrees", "modules"):
        base = git_dir / sub
        if base.is_dir():
            for entry in sorted(base.iterdir())[:MAX_CONFIGS]:
                yield entry / "config"
                yield entry / "config.worktree"


def _git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(errors="replace")[:4096] if dot.is_file() else ""
    except OSError:
        return None
    if text.startswith("gitdir:"):
        target = Path(text[len("gitdir:") :].strip())
        return (root / target).resolve() if not target.is_absolute() else target
    return None


def _collect(git: str, root: Path, configs: list[Path]) -> tuple[str, ...]:
    found: dict[str, None] = {}
    queue = [c for c in configs if c.is_file()]
    seen: set[str] = set()
    while queue and len(seen) < MAX_CONFIGS:
        config = queue.pop(0)
        real = os.path.realpath(config)
        if real in seen:
            continue
        seen.add(real)
        for key, value in _entries(git, config):
            if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
                target = _resolve(value, Path(real).parent)
                if target is not None:
                    _add(found, root, target)
                    queue.append(target)
            elif key in _PATH_KEYS:
                target = _resolve(value, root)
                if target is not None:
                    _add(found, root, target)
            elif _is_command(key):
                for word in _words(value):
                    target = _resolve(word, root)
                    if target is not None:
                        _add(found, root, target)
    return tuple(found)


def _entries(git: str, config: Path) -> list[tuple[str, str]]:
    try:
        if config.stat().st_size > _CONFIG_BYTES:
            return []  # not a config a person wrote; git reads it, but what it names is not ours to guess
        done = subprocess.run(
            [git, "config", "--file", str(config), "--null", "--list", "--no-includes"],
            capture_output=True,
            timeout=10,
            check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        # git refuses a config it cannot parse, and then runs nothing from it either.
        return []
    out: list[tuple[str, str]] = []
    for item in done.stdout.decode("utf-8", "replace").split("\0"):
        key, _, value = item.partition("\n")
        if key:
            out.append((key.lower(), value))
    return out


def _is_command(key: str) -> bool:
    for head, tail in _COMMAND_KEYS:
        if not head.endswith("."):
            if key == head:
                return True
        elif key.startswith(head) and key.endswith(tail) and len(key) > len(head) + len(tail):
            return True
    return False


def _words(value: str) -> list[str]:
    """The words of a command that may name a workspace file: a program given by path, any argument."""
    text = value[1:] if value.startswith("!") else value
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    if words and "/" not in words[0]:
        words = words[1:]  # a bare program name is looked up on PATH, not in the workspace
    return [w for w in words if not w.startswith(("-", "%"))]


def _resolve(value: str, base: Path) -> Path | None:
    value = value.strip()
    if not value or value.startswith(("~", "$")) or value.lower() in ("true", "false", "yes", "no", "on", "off"):
        return None
    path = Path(value)
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def _add(found: dict[str, None], root: Path, target: Path) -> None:
    try:
        rel = target.relative_to(root)
    except ValueError:
        real = Path(os.path.realpath(target))
        try:
            rel = real.relative_to(root)
        except ValueError:
            return  # outside the workspace: no tool writes there
    text = rel.as_posix()
    if text != ".":
        found[text] = None
