"""Agent Skills: folders with a ``SKILL.md`` and optional ``scripts/``, ``references/``, ``assets/`` files.

``SKILL.md`` holds YAML front matter (at least ``name`` and ``description``), then a markdown body.

Loading is progressive: a listing reads only the front matter; the body and resources are read on
request. Sources, in precedence order (the first occurrence of an id wins in a listing):

1. the project: ``.aleph/skills`` and ``.claude/skills`` in the workspace and each parent up to the
   git root;
2. ``[hub] skills_dirs``;
3. the user: ``[hub] user_skills_dirs`` (``~/.aleph/skills``, ``~/.claude/skills``);
4. installed Python packages that ship skills through the ``aleph.skills`` entry-point group: the
   entry point names a package whose directory holds skill folders (found from the distribution's
   files, without importing it).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

__all__ = [
    "MAX_SKILL_MD_CHARS",
    "Skill",
    "SkillError",
    "SkillRoot",
    "discover",
    "parse_skill_md",
    "skill_files",
    "skill_roots",
    "validate_skill_dir",
]

MAX_SKILL_MD_CHARS = 100_000
"""Longest SKILL.md read or written (characters)."""
MAX_RESOURCE_BYTES = 5 * 1024 * 1024
"""Largest resource ``skill_read`` returns."""
_MAX_FILES_LISTED = 500
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE)


class SkillError(ValueError):
    """A skill that cannot be used: the message says which file and why."""


@dataclass(frozen=True, slots=True)
class SkillRoot:
    """A folder holding skill folders, and where it came from."""

    path: Path
    source: str
    """``project``, ``folder``, ``user`` or ``package:<distribution>``."""


@dataclass(slots=True)
class Skill:
    """One discovered skill: its front matter, where it lives, and its files (not their contents)."""

    id: str
    name: str
    description: str
    location: Path
    source: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def read_only(self) -> bool:
        """Skills shipped by a package are managed by that package."""
        return self.source.startswith("package:")

    def summary(self) -> dict[str, Any]:
        """What ``skill_list`` shows: no body, no file contents."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "location": str(self.location),
            "source": self.source,
            "files": skill_files(self.location),
        }


def parse_skill_md(text: str, where: str = "SKILL.md") -> tuple[dict[str, Any], str]:
    """(front matter, body) of a SKILL.md text; :class:`SkillError` names what is wrong."""
    if len(text) > MAX_SKILL_MD_CHARS:
        raise SkillError(f"{where} exceeds the {MAX_SKILL_MD_CHARS}-character limit")
    match = _FRONT.match(text.lstrip("\ufeff"))
    if match is None:
        raise SkillError(f"{where} must start with YAML front matter between '---' lines")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        # Many hand-written skills leave a description with ": " in it unquoted, which YAML rejects.
        # Listing reads such simple `key: value` lines as they were meant; install validation
        # (skills-ref) still holds them to the spec.
        meta = _simple_front_matter(match.group(1))
        if meta is None:
            raise SkillError(f"{where}: invalid YAML front matter: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{where}: the front matter must be a YAML mapping")
    for key in ("name", "description"):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise SkillError(f"{where}: front matter field '{key}' must be a non-empty string")
    return meta, text[match.end() :].strip()


_SIMPLE_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):[ \t]*(.*?)[ \t]*$")


def _simple_front_matter(text: str) -> dict[str, Any] | None:
    """Flat ``key: value`` lines (the value is everything after the first colon), or None."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SIMPLE_LINE.match(line)
        if m is None:
            return None
        out[m.group(1)] = m.group(2)
    return out or None


def validate_skill_dir(path: Path) -> list[str]:
    """Problems with the skill folder ``path`` against the Agent Skills specification (empty: valid).

    The reference validator ``skills-ref`` decides: name format and folder match, description
    length, allowed front-matter fields. Our own parser must also accept it.
    """
    import skills_ref  # type: ignore[import-untyped]

    problems = list(skills_ref.validate(path))
    try:
        parse_skill_md((path / "SKILL.md").read_text(encoding="utf-8"), f"{path.name}/SKILL.md")
    except (OSError, UnicodeDecodeError, SkillError) as exc:
        problems.append(str(exc))
    return problems


def skill_files(location: Path) -> list[str]:
    """Relative paths of a skill's files (SKILL.md, hidden files and symlinks left out), sorted."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(location):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if name.startswith(".") or full.is_symlink():
                continue
            rel = full.relative_to(location).as_posix()
            if rel != "SKILL.md":
                out.append(rel)
            if len(out) >= _MAX_FILES_LISTED:
                return out
    return out


def _git_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def skill_roots(workspace: Path, extra: Iterable[str], user: Iterable[str]) -> list[SkillRoot]:
    """Every skill folder in precedence order (see the module docstring)."""
    roots: list[SkillRoot] = []
    top = _git_root(workspace)
    for folder in (workspace, *workspace.parents):
        for sub in (".aleph/skills", ".claude/skills"):
            roots.append(SkillRoot(folder / sub, "project"))
        if top is None or folder == top:
            break
    roots.extend(SkillRoot(Path(p).expanduser().resolve(), "folder") for p in extra)
    roots.extend(SkillRoot(Path(p).expanduser(), "user") for p in user)
    roots.extend(_package_roots())
    return roots


def _package_roots() -> list[SkillRoot]:
    roots = []
    for ep in importlib.metadata.entry_points(group="aleph.skills"):
        dist = ep.dist
        if dist is None:
            continue
        located = Path(str(dist.locate_file(ep.value.split(":")[0].replace(".", "/"))))
        roots.append(SkillRoot(located, f"package:{dist.metadata['Name']}"))
    return roots


def discover(roots: Iterable[SkillRoot]) -> tuple[list[Skill], dict[str, list[Skill]]]:
    """(skills, every occurrence by id): hidden folders and unparsable SKILL.md files are skipped."""
    skills: list[Skill] = []
    seen: dict[str, list[Skill]] = {}
    for root in roots:
        try:
            children = sorted(root.path.iterdir()) if root.path.is_dir() else []
        except OSError:
            continue
        for child in children:
            if child.name.startswith(".") or not child.is_dir():
                continue
            skill = load_skill(child, root.source)
            if skill is None:
                continue
            first = skill.id not in seen
            seen.setdefault(skill.id, []).append(skill)
            if first:
                skills.append(skill)
    return skills, seen


def load_skill(folder: Path, source: str) -> Skill | None:
    """The skill in ``folder``, or None when it has no SKILL.md that parses."""
    md = folder / "SKILL.md"
    try:
        if md.is_symlink() or not md.is_file() or md.stat().st_size > 4 * MAX_SKILL_MD_CHARS:
            return None
        meta, _ = parse_skill_md(md.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SkillError):
        return None
    return Skill(folder.name, str(meta["name"]).strip(), str(meta["description"]).strip(), folder, source, meta)
