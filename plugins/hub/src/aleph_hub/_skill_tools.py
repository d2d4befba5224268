"""skill_list, skill_read, skill_status and skill_install."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolDefinition, ToolFacts
from aleph_hub._archive import ArchiveError, remove_tree, unpack_source
from aleph_hub._scan import disclose_skill, scan_text
from aleph_hub._skill_pin import approved_content, pin_installed, pin_state, read_verified, skill_content
from aleph_hub._skills import MAX_RESOURCE_BYTES, Skill, discover, skill_files, validate_skill_dir
from aleph_hub._state import HubState, consent, owner

__all__ = ["SkillInstall", "SkillList", "SkillRead", "SkillStatus", "check_skill_id", "find_skill", "rank_skills"]

_SOURCE_ORDER = {"project": 0, "folder": 1, "user": 2}


def check_skill_id(tool: str, skill_id: str) -> str:
    """``skill_id`` if it is a plain folder name; ValidationFailed otherwise."""
    if not skill_id.strip():
        raise aleph.ValidationFailed(tool, "skill_id cannot be empty")
    if "/" in skill_id or "\\" in skill_id or ".." in skill_id or "\0" in skill_id:
        raise aleph.ValidationFailed(tool, "skill_id cannot contain path separators or '..'")
    if skill_id.startswith("."):
        raise aleph.ValidationFailed(tool, "skill_id cannot start with '.'")
    return skill_id


def find_skill(state: HubState, tool: str, skill_id: str) -> Skill:
    """The one skill named ``skill_id``; NotFound, or an error naming every location when ambiguous."""
    check_skill_id(tool, skill_id)
    _, seen = discover(state.roots())
    found = seen.get(skill_id, [])
    if not found:
        raise aleph.ExecutionFailed(tool, f"Skill '{skill_id}' not found")
    if len(found) > 1:
        places = ", ".join(str(s.location) for s in found)
        raise aleph.ExecutionFailed(tool, f"skill '{skill_id}' is ambiguous — found in multiple locations: {places}")
    return found[0]


def _skill_text(skill: Skill) -> str:
    extra = [str(skill.meta.get(k, "")) for k in ("when-to-use", "when_to_use", "compatibility")]
    meta = skill.meta.get("metadata")
    if isinstance(meta, dict):
        extra.extend(str(v) for v in meta.values())
    return " ".join([skill.name.replace("-", " "), skill.description, *extra])


def shown_description(skill: Skill, approval: str) -> str:
    """The description a listing shows: a skill nobody approved keeps its words only if the scan flags nothing."""
    if approval == "approved":
        return skill.description
    flagged = sorted({f.id for f in scan_text(f"{skill.name}\n{skill.description}", "SKILL.md")})
    if flagged:
        return f"(withheld until a human approves this skill: {', '.join(flagged)})"
    return skill.description


def rank_skills(skills: list[Skill], query: str, limit: int) -> list[tuple[Skill, float]]:
    """Skills ranked by BM25 (core's tool index) over name, description and when-to-use."""
    by_id = {s.id: s for s in skills}
    index = aleph.ToolIndex(ToolDefinition(s.id, _skill_text(s), {}) for s in skills)
    return [(by_id[hit.name], hit.score) for hit in index.search(query, limit)]


class ListArgs(ToolArgs):
    filter: str | None = Field(default=None, max_length=200)
    """Keep skills whose id, name or description contains this text (case-insensitive)."""
    query: str | None = Field(default=None, max_length=1000)
    """Rank skills by how well they match this task description (BM25) instead of listing them by id."""
    limit: int = Field(default=50, ge=1, le=500)
    """Most skills returned."""
    include_archived: bool = False
    """Also list archived skills."""


class SkillList(AlephTool[ListArgs]):
    NAME = "skill_list"
    DESCRIPTION = (
        "List the available Agent Skills (name, description, location, files) from the project, user folders "
        "and installed packages; give query to rank them for a task. Read one with skill_read."
    )
    Args = ListArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("skills",))

    def __init__(self, state: HubState) -> None:
        self.state = state

    async def call(self, args: ListArgs) -> dict[str, Any]:
        skills, _ = discover(self.state.roots())
        states = self.state.store.skill_states(owner=owner())
        if not args.include_archived:
            skills = [s for s in skills if not states.get(s.id, {}).get("archived")]
        if args.filter:
            needle = args.filter.lower()
            skills = [s for s in skills if needle in f"{s.id}\n{s.name}\n{s.description}".lower()]
        if args.query:
            ranked = rank_skills(skills, args.query, args.limit)
            chosen = [s for s, _ in ranked]
        else:
            chosen = sorted(skills, key=lambda s: (_SOURCE_ORDER.get(s.source, 3), s.id))[: args.limit]
        out = []
        for s in chosen:
            item = s.summary()
            st = states.get(s.id, {})
            if st.get("enabled") == 0:
                item["disabled"] = True
            if st.get("archived"):
                item["archived"] = True
            item.update(pin_state(self.state, s))
            item["description"] = shown_description(s, item["approval"])
            out.append(item)
        return {"success": True, "count": len(out), "total": len(skills), "skills": out}


class ReadArgs(ToolArgs):
    skill_id: str = Field(max_length=200)
    """The skill's id (its folder name), as skill_list gives it."""
    file_name: str = Field(default="SKILL.md", max_length=500)
    """The file to read, relative to the skill folder (``references/api.md``); default its SKILL.md."""


def check_file_name(tool: str, file_name: str) -> PurePosixPath:
    """A relative, non-hidden path inside a skill; ValidationFailed otherwise."""
    if not file_name or "\\" in file_name or "\0" in file_name:
        raise aleph.ValidationFailed(tool, "invalid file_name: empty, or contains a backslash or NUL")
    path = PurePosixPath(file_name)
    if path.is_absolute():
        raise aleph.ValidationFailed(tool, "invalid file_name: absolute paths are not allowed")
    if ".." in path.parts:
        raise aleph.ValidationFailed(tool, "invalid file_name: traversal via '..' is not allowed")
    if any(p.startswith(".") for p in path.parts):
        raise aleph.ValidationFailed(tool, "invalid file_name: hidden files are not readable")
    return path


class SkillRead(AlephTool[ReadArgs]):
    NAME = "skill_read"
    DESCRIPTION = (
        "Read a skill's instructions (its SKILL.md) or one of its resource files. Follow the instructions; run "
        "its scripts with skill_manage action=run."
    )
    Args = ReadArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("skills",))

    def __init__(self, state: HubState) -> None:
        self.state = state

    async def call(self, args: ReadArgs) -> dict[str, Any]:
        rel = check_file_name(self.NAME, args.file_name)
        skill = find_skill(self.state, self.NAME, args.skill_id)
        root = skill.location.resolve()
        target = (root / rel).resolve()
        if root not in target.parents and target != root:
            raise aleph.PermissionDenied(self.NAME, f"'{args.file_name}' resolves outside the skill folder")
        available = skill_files(skill.location)
        if not target.is_file():
            raise aleph.ExecutionFailed(
                self.NAME, f"File '{args.file_name}' not found in skill '{skill.id}'. Available files: {available}"
            )
        size = target.stat().st_size
        if size > MAX_RESOURCE_BYTES:
            raise aleph.ExecutionFailed(self.NAME, f"File too large: {size} bytes (max: {MAX_RESOURCE_BYTES} bytes)")
        # Served only as a human approved it, whatever wrote the folder; the bytes served are the ones checked.
        approved = await approved_content(self.state, self.NAME, skill)
        data = read_verified(approved, root, target.relative_to(root).as_posix(), self.NAME)
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise aleph.ExecutionFailed(
                self.NAME, f"'{args.file_name}' is a binary file ({size} bytes); open it at {target} with a file tool"
            ) from None
        self.state.store.bump(skill.id, "uses" if str(rel) == "SKILL.md" else "views", owner=owner())
        return {
            "success": True,
            "skill_id": skill.id,
            "file_name": str(rel),
            "content": content,
            "size": size,
            "location": str(skill.location),
            "available_files": available,
        }


class StatusArgs(ToolArgs):
    filter: Literal["all", "ready", "needs_setup", "disabled"] = "all"
    """``ready``: eligible and enabled; ``needs_setup``: a program, variable or OS it needs is missing."""


def _listed(meta: dict[str, Any], key: str) -> list[str]:
    nested = meta.get("metadata")
    sub: dict[str, Any] = nested if isinstance(nested, dict) else {}
    value = meta.get(key, sub.get(key))
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def eligibility(skill: Skill) -> dict[str, list[str]]:
    """What ``skill`` needs and this machine lacks.

    Programs (``requires-bins``), environment variables (``requires-env``) and operating systems (``os``),
    read from its front matter or its ``metadata``.
    """
    missing_bins = [b for b in _listed(skill.meta, "requires-bins") if shutil.which(b) is None]
    missing_env = [e for e in _listed(skill.meta, "requires-env") if not os.environ.get(e)]
    systems = [s.lower() for s in _listed(skill.meta, "os")]
    here = platform.system().lower()
    missing_os = systems if systems and here not in systems else []
    return {"bins": missing_bins, "env": missing_env, "os": missing_os}


class SkillStatus(AlephTool[StatusArgs]):
    NAME = "skill_status"
    DESCRIPTION = (
        "Show each skill's readiness: enabled or not, and any programs, environment variables or operating "
        "system it needs that are missing here."
    )
    Args = StatusArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("skills",))

    def __init__(self, state: HubState) -> None:
        self.state = state

    async def call(self, args: StatusArgs) -> dict[str, Any]:
        skills, _ = discover(self.state.roots())
        states = self.state.store.skill_states(owner=owner())
        entries = []
        for s in sorted(skills, key=lambda s: (_SOURCE_ORDER.get(s.source, 3), s.id)):
            st = states.get(s.id, {})
            missing = eligibility(s)
            disabled = st.get("enabled") == 0 or st.get("scope") == "disabled" or bool(st.get("archived"))
            eligible = not any(missing.values())
            approval = pin_state(self.state, s)
            entry = {
                "id": s.id,
                "name": s.name,
                "description": shown_description(s, approval["approval"]),
                **approval,
                "source": s.source,
                "location": str(s.location),
                "eligible": eligible,
                "disabled": disabled,
                "missing": missing,
                "usage": {"uses": st.get("uses", 0), "views": st.get("views", 0)},
            }
            keep = {
                "all": True,
                "ready": eligible and not disabled,
                "needs_setup": not eligible,
                "disabled": disabled,
            }[args.filter]
            if keep:
                entries.append(entry)
        return {"total": len(skills), "filtered": len(entries), "skills": entries}


class InstallArgs(ToolArgs):
    source: str = Field(min_length=1, max_length=4096)
    """A skill folder, ``.zip`` or tarball (workspace-relative or absolute path)."""
    scope: Literal["project", "user"] = "project"
    """``project``: ``<workspace>/.aleph/skills``; ``user``: the first of ``[hub] user_skills_dirs``."""
    overwrite: bool = False
    """Replace an installed skill of the same name (atomically; the old one is restored on failure)."""


class SkillInstall(AlephTool[InstallArgs]):
    NAME = "skill_install"
    DESCRIPTION = (
        "Install an Agent Skill from a folder, zip or tarball: it is validated against the Agent Skills spec, "
        "scanned, and the human sees what it contains (files, scripts, tools it names, findings) and approves."
    )
    Args = InstallArgs
    FACTS = ToolFacts(sink=True, tags=("skills", "filesystem"))

    def __init__(self, state: HubState) -> None:
        self.state = state

    async def call(self, args: InstallArgs) -> dict[str, Any]:
        source = Path(args.source).expanduser()
        source = source if source.is_absolute() else self.state.workspace / source
        if not source.exists():
            raise aleph.ValidationFailed(self.NAME, f"source: {args.source} does not exist")
        dest_root = self.state.project_skills_dir() if args.scope == "project" else self.state.user_skills_dir()
        dest_root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest_root))
        try:
            return await self._install(args, source, dest_root, staging)
        finally:
            remove_tree(staging)

    async def _install(self, args: InstallArgs, source: Path, dest_root: Path, staging: Path) -> dict[str, Any]:
        cfg = self.state.config
        try:
            folder = unpack_source(
                source, staging / "unpacked", max_files=cfg.max_skill_files, max_bytes=cfg.max_skill_bytes
            )
        except (ArchiveError, OSError) as exc:
            raise aleph.ExecutionFailed(self.NAME, f"cannot unpack {args.source}: {exc}") from None
        # The spec wants the folder named as the skill; an archive's own name does not count.
        disclosure = disclose_skill(folder, await self.state.known_tools())
        name = disclosure["name"]
        named = staging / name
        if "/" in name or name.startswith(".") or not name:
            raise aleph.ExecutionFailed(self.NAME, f"skill name {name!r} cannot be a folder name")
        folder.rename(named)
        problems = validate_skill_dir(named)
        if problems:
            raise aleph.ExecutionFailed(
                self.NAME, "the skill does not follow the Agent Skills spec: " + "; ".join(problems)
            )
        if disclosure["verdict"] == "dangerous":
            ids = sorted({f["id"] for f in disclosure["findings"] if f["level"] == "dangerous"})
            raise aleph.PermissionDenied(
                self.NAME, f"skill '{name}' blocked by security scan (dangerous): {', '.join(ids)}"
            )
        dest = dest_root / name
        if dest.exists() and not args.overwrite:
            raise aleph.ExecutionFailed(
                self.NAME, f"skill '{name}' is already installed at {dest}; pass overwrite=true"
            )
        cfg = self.state.config
        content = skill_content(named, max_files=cfg.max_skill_files, max_bytes=cfg.max_skill_bytes, tool=self.NAME)
        disclosure["pinned_digest"] = content.digest
        disclosure["pinned_entries"] = sorted(content.files)
        digest = aleph.adds_digest(disclosure)
        await consent(self.NAME, "skill", f"{name} from {args.source} into {dest_root}", digest, disclosure)
        backup = staging / ".previous"
        if dest.exists():
            os.replace(dest, backup)
        try:
            os.replace(named, dest)
        except OSError:
            if backup.exists():
                os.replace(backup, dest)
            raise
        pin_installed(self.state, dest, content.digest, self.NAME)  # the human approved exactly these bytes
        return {
            "success": True,
            "message": f"Skill '{name}' installed at {dest}",
            "skill_id": name,
            "location": str(dest),
            "verdict": disclosure["verdict"],
            "digest": digest,
            "files": [f["path"] for f in disclosure["files"]],
            "scripts": disclosure["scripts"],
            "tools_named": disclosure["tools_named"],
        }
