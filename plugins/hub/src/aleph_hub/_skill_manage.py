"""skill_manage: configure, author, curate and run skills."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml  # type: ignore[import-untyped]
from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_hub._scan import scan_text
from aleph_hub._skill_pin import approved_content
from aleph_hub._skill_tools import check_file_name, check_skill_id, find_skill
from aleph_hub._skills import MAX_SKILL_MD_CHARS, Skill, SkillError, discover, parse_skill_md
from aleph_hub._state import HubState, owner, running_call

__all__ = ["SkillManage"]

_WRITABLE_DIRS = ("references", "scripts", "assets", "templates")
_MAX_FILE_BYTES = 1024 * 1024
# Python runs with -B: bytecode written into the skill folder would change what a human approved.
_INTERPRETERS = {
    ".py": ["python3", "-B"],
    ".sh": ["bash"],
    ".bash": ["bash"],
    ".js": ["node"],
    ".mjs": ["node"],
    ".rb": ["ruby"],
}

Action = Literal[
    "configure", "create", "edit", "patch", "write_file", "delete", "pin", "unpin", "archive", "restore", "run"
]


class ManageArgs(ToolArgs):
    action: Action = "configure"
    """What to do; every action but ``create`` needs ``skill_id``."""
    skill_id: str | None = Field(default=None, max_length=200)
    """The skill to act on (its folder name)."""
    enabled: bool | None = None
    """configure: enable or disable the skill."""
    scope: Literal["system", "tool", "standalone", "disabled"] | None = None
    """configure: how the skill is offered."""
    name: str | None = Field(default=None, max_length=64)
    """create: the new skill's name (lowercase letters, digits and hyphens)."""
    description: str | None = Field(default=None, max_length=1024)
    """create: what the skill does and when to use it."""
    content: str | None = Field(default=None, max_length=MAX_SKILL_MD_CHARS)
    """create: the body; edit: the complete new SKILL.md."""
    find: str | None = Field(default=None, max_length=MAX_SKILL_MD_CHARS)
    """patch: text that occurs exactly once in SKILL.md."""
    replace: str | None = Field(default=None, max_length=MAX_SKILL_MD_CHARS)
    """patch: its replacement."""
    file_name: str | None = Field(default=None, max_length=500)
    """write_file: a path under references/, scripts/, assets/ or templates/; run: a script under scripts/."""
    file_content: str | None = Field(default=None, max_length=_MAX_FILE_BYTES)
    """write_file: the file's text."""
    script_args: list[str] = Field(default_factory=list, max_length=64)
    """run: arguments passed to the script."""


def _need(args: ManageArgs, *fields: str) -> None:
    for name in fields:
        value = getattr(args, name)
        if value is None or (isinstance(value, str) and not value.strip() and name not in ("replace",)):
            raise aleph.ValidationFailed("skill_manage", f"'{name}' is required for action '{args.action}'")


def _vet(text: str, file: str) -> str:
    """Refuse dangerous content; a note listing caution findings otherwise."""
    findings = scan_text(text, file)
    dangerous = sorted({f.id for f in findings if f.level == "dangerous"})
    if dangerous:
        raise aleph.PermissionDenied(
            "skill_manage",
            f"Content blocked by security scan ({', '.join(dangerous)}). Remove the flagged constructs and retry.",
        )
    caution = sorted({f.id for f in findings})
    return f" Security scan flagged caution patterns: {', '.join(caution)}." if caution else ""


def _write_atomic(path: Path, text: str) -> None:
    if path.is_symlink():
        raise aleph.PermissionDenied("skill_manage", f"{path.name} is a symbolic link; it is not modified")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class SkillManage(AlephTool[ManageArgs]):
    NAME = "skill_manage"
    DESCRIPTION = (
        "Configure (enable, scope), create, edit, patch, add files to, pin, archive, delete, or run a script of "
        "a skill. Scripts run through the bash tool under the same permission checks as any command."
    )
    Args = ManageArgs
    FACTS = ToolFacts(tags=("skills", "filesystem"))

    def __init__(self, state: HubState) -> None:
        self.state = state

    async def call(self, args: ManageArgs) -> dict[str, Any]:
        if args.action == "create":
            return self._create(args)
        _need(args, "skill_id")
        assert args.skill_id is not None
        check_skill_id(self.NAME, args.skill_id)
        store = self.state.store
        if args.action == "configure":
            if args.enabled is None and args.scope is None:
                return {"success": False, "message": "No changes requested. Provide 'enabled' or 'scope' to update."}
            skill = find_skill(self.state, self.NAME, args.skill_id)
            fields: dict[str, Any] = {}
            if args.enabled is not None:
                fields["enabled"] = int(args.enabled)
            if args.scope is not None:
                fields["scope"] = args.scope
            store.update_skill(skill.id, owner=owner(), **fields)
            return {"success": True, "message": f"Skill {skill.id} configuration updated", "skill_id": skill.id}
        if args.action in ("pin", "unpin", "archive", "restore"):
            skill = find_skill(self.state, self.NAME, args.skill_id)
            column, value = {"pin": ("pinned", 1), "unpin": ("pinned", 0), "archive": ("archived", 1)}.get(
                args.action, ("archived", 0)
            )
            store.update_skill(skill.id, owner=owner(), **{column: value})
            return {"success": True, "message": f"Skill '{skill.id}': {args.action} done", "skill_id": skill.id}
        if args.action == "run":
            return await self._run(args)
        skill = find_skill(self.state, self.NAME, args.skill_id)
        if args.action == "delete":
            return self._delete(skill)
        self._mutable(skill, args.action)
        if args.action == "edit":
            _need(args, "content")
            assert args.content is not None
            return self._write_md(skill, args.content, "edited")
        if args.action == "patch":
            _need(args, "find", "replace")
            assert args.find is not None and args.replace is not None
            text = (skill.location / "SKILL.md").read_text(encoding="utf-8")
            count = text.count(args.find)
            if count == 0:
                raise aleph.ExecutionFailed(
                    self.NAME, "'find' text not found in SKILL.md. Read the skill first and copy the exact text."
                )
            if count > 1:
                raise aleph.ExecutionFailed(
                    self.NAME,
                    f"'find' text occurs {count} times — include more surrounding context so it matches exactly once.",
                )
            return self._write_md(skill, text.replace(args.find, args.replace, 1), "patched")
        _need(args, "file_name", "file_content")
        assert args.file_name is not None and args.file_content is not None
        return self._write_file(skill, args.file_name, args.file_content)

    def _mutable(self, skill: Skill, action: str) -> None:
        if skill.read_only:
            raise aleph.PermissionDenied(
                self.NAME, f"skill '{skill.id}' is managed by a package ({skill.source}) and cannot be modified here"
            )
        if (skill.location / "SKILL.md").is_symlink():
            raise aleph.PermissionDenied(self.NAME, f"skill '{skill.id}' has a symlinked SKILL.md; cannot {action} it")

    def _create(self, args: ManageArgs) -> dict[str, Any]:
        _need(args, "name", "description")
        assert args.name is not None and args.description is not None
        front: dict[str, Any] = {"name": args.name, "description": args.description}
        text = (
            "---\n"
            + yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
            + "---\n\n"
            + (args.content or "")
            + "\n"
        )
        try:
            meta, _ = parse_skill_md(text)
        except SkillError as exc:
            raise aleph.ValidationFailed(self.NAME, str(exc)) from None
        skill_id = str(meta["name"]).strip()
        if not any(c.isalnum() for c in skill_id):
            raise aleph.ValidationFailed(self.NAME, "name must contain at least one alphanumeric character")
        import skills_ref.validator  # type: ignore[import-untyped]

        problems = skills_ref.validator.validate_metadata(meta, None)
        if problems:
            raise aleph.ValidationFailed(self.NAME, "; ".join(problems))
        note = _vet(text, "SKILL.md")
        _, seen = discover(self.state.roots())
        if skill_id in seen:
            raise aleph.ExecutionFailed(
                self.NAME, f"Skill '{skill_id}' already exists. Use action='edit' or action='patch' to modify it."
            )
        folder = self.state.user_skills_dir() / skill_id
        if folder.exists():
            raise aleph.ExecutionFailed(self.NAME, f"{folder} already exists")
        _write_atomic(folder / "SKILL.md", text)
        return {"success": True, "message": f"Created skill '{skill_id}' at {folder}.{note}", "skill_id": skill_id}

    def _write_md(self, skill: Skill, text: str, verb: str) -> dict[str, Any]:
        try:
            meta, _ = parse_skill_md(text)
        except SkillError as exc:
            raise aleph.ValidationFailed(self.NAME, str(exc)) from None
        if str(meta["name"]).strip() != skill.id:
            raise aleph.ValidationFailed(
                self.NAME,
                f"the new SKILL.md names '{meta['name']}', not '{skill.id}'. Renaming via edit is not supported.",
            )
        note = _vet(text, "SKILL.md")
        _write_atomic(skill.location / "SKILL.md", text)
        return {"success": True, "message": f"Skill '{skill.id}' {verb}.{note}", "skill_id": skill.id}

    def _write_file(self, skill: Skill, file_name: str, content: str) -> dict[str, Any]:
        rel = check_file_name(self.NAME, file_name)
        if len(rel.parts) < 2 or rel.parts[0] not in _WRITABLE_DIRS:
            raise aleph.ValidationFailed(
                self.NAME,
                "file_name must live under one of: references/, scripts/, assets/, templates/ "
                "(e.g. 'references/api.md')",
            )
        if len(content.encode("utf-8")) > _MAX_FILE_BYTES:
            raise aleph.ValidationFailed(self.NAME, f"file_content exceeds {_MAX_FILE_BYTES} bytes")
        target = skill.location.joinpath(*rel.parts)
        for parent in [target, *target.parents]:
            if parent == skill.location:
                break
            if parent.is_symlink():
                raise aleph.PermissionDenied(self.NAME, f"{parent.relative_to(skill.location)} is a symbolic link")
        note = _vet(content, str(rel))
        _write_atomic(target, content)
        return {"success": True, "message": f"Wrote {rel} in skill '{skill.id}'.{note}", "skill_id": skill.id}

    def _delete(self, skill: Skill) -> dict[str, Any]:
        if self.state.store.pinned(skill.id):
            raise aleph.ExecutionFailed(self.NAME, f"Skill '{skill.id}' is pinned. Unpin it first (action='unpin').")
        self._mutable(skill, "delete")
        shutil.rmtree(skill.location)
        self.state.store.forget_skill(skill.id)
        return {"success": True, "message": f"Deleted skill '{skill.id}'", "skill_id": skill.id}

    def sub_calls(self, input: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """``run`` is the ``bash`` call it makes: judged under bash's own rules before the skill is touched."""
        if input.get("action") != "run":
            return []
        try:
            _, command = self._script_command(ManageArgs.model_validate(input))
        except (aleph.ToolError, ValueError):
            return []  # the call itself reports what is wrong
        return [("bash", {"command": command})]

    def _script_command(self, args: ManageArgs) -> tuple[Skill, str]:
        _need(args, "file_name")
        assert args.skill_id is not None and args.file_name is not None
        rel = check_file_name(self.NAME, args.file_name)
        if rel.parts[0] != "scripts" or len(rel.parts) < 2:
            raise aleph.ValidationFailed(self.NAME, "run: file_name must be a script under scripts/")
        skill = find_skill(self.state, self.NAME, args.skill_id)
        script = skill.location.joinpath(*rel.parts).resolve()
        if skill.location.resolve() not in script.parents or not script.is_file():
            raise aleph.ExecutionFailed(self.NAME, f"File '{args.file_name}' not found in skill '{skill.id}'")
        words = [*_INTERPRETERS.get(script.suffix, []), str(script), *args.script_args]
        return skill, " ".join(shlex.quote(w) for w in words)

    async def _run(self, args: ManageArgs) -> dict[str, Any]:
        skill, command = self._script_command(args)
        state = self.state.store.skill_states(owner=owner()).get(skill.id, {})
        if state.get("enabled") == 0 or state.get("archived"):
            raise aleph.PermissionDenied(self.NAME, f"skill '{skill.id}' is disabled or archived; enable it first")
        # A script runs only from a skill a human approved as it is now (whatever wrote the folder).
        await approved_content(self.state, self.NAME, skill)
        # The exec family runs it: the command policy, sandbox and approval apply as to any bash call.
        output = await running_call(self.NAME).subcall("bash", {"command": command})
        return {"success": True, "skill_id": skill.id, "command": command, "result": output.value}
