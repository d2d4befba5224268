"""Skills are handed to a model only as a human approved them: scanned, consented to, pinned to their bytes.

A skill folder can be written by anything: ``skill_install``, ``skill_manage``, but also bash, a file
tool, a ``git pull`` or another program. So the check sits where the text becomes instructions, not where
it was written: before ``skill_read`` serves a file or ``skill_manage`` runs a script, the whole folder is
hashed (every file and symbolic link, hidden ones and bytecode included). A digest a human approved for
that folder is served; any other (a new skill, or an approved one whose bytes changed) is scanned, refused
outright when the scan finds something dangerous, and otherwise put to a human through ``hub_consent``
with its full disclosure. The approval pins that exact digest, sealed with the runtime's keystore secret
so a process that edits the hub's database cannot approve a skill. What is then served is the bytes that
were hashed, never a second read that could differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aleph
from aleph_hub._scan import disclose_skill
from aleph_hub._skills import Skill
from aleph_hub._state import HubState, consent

__all__ = [
    "SkillChanged",
    "SkillContent",
    "approved_content",
    "pin_installed",
    "pin_state",
    "read_verified",
    "skill_content",
]

_CHUNK = 1 << 16


class SkillChanged(aleph.ExecutionFailed):
    """The skill's files changed while it was being checked."""


@dataclass(frozen=True, slots=True)
class SkillContent:
    """Every entry of a skill folder: ``{relative path: sha256 hex | "symlink:<target>"}`` and their digest."""

    files: dict[str, str]
    digest: str


def skill_content(folder: Path, *, max_files: int, max_bytes: int, tool: str = "skill_read") -> SkillContent:
    """Hash every entry of ``folder`` (bounded by ``max_files`` and ``max_bytes``); raises a ToolError when over."""
    files: dict[str, str] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        entries = sorted(filenames) + sorted(d for d in dirnames if (here / d).is_symlink())
        dirnames[:] = sorted(d for d in dirnames if not (here / d).is_symlink())
        for name in entries:
            path = here / name
            rel = path.relative_to(folder).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                files[rel] = "symlink:" + os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > max_bytes:
                    raise aleph.PermissionDenied(
                        tool, f"skill folder {folder} holds more than {max_bytes} bytes; it cannot be verified"
                    )
                files[rel] = _sha256(path)
            else:
                raise aleph.PermissionDenied(tool, f"{rel} in skill folder {folder} is not a regular file")
            if len(files) > max_files:
                raise aleph.PermissionDenied(
                    tool, f"skill folder {folder} holds more than {max_files} files; it cannot be verified"
                )
    listing = json.dumps(sorted(files.items()), separators=(",", ":"), ensure_ascii=False)
    return SkillContent(files, "sha256:" + hashlib.sha256(listing.encode("utf-8", "surrogateescape")).hexdigest())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _pin_message(location: Path, digest: str) -> bytes:
    return f"{location}\0{digest}".encode("utf-8", "surrogateescape")


def _approved(state: HubState, location: Path, digest: str) -> bool:
    row = state.store.skill_pin(str(location))
    if row is None or row["digest"] != digest:
        return False
    return state.context.state_seal("skill-pins").verify(_pin_message(location, digest), row["seal"])


def _pin(state: HubState, location: Path, digest: str) -> None:
    seal = state.context.state_seal("skill-pins").sign(_pin_message(location, digest))
    state.store.put_skill_pin(str(location), digest, seal)


def _content(state: HubState, folder: Path, tool: str) -> SkillContent:
    cfg = state.config
    return skill_content(folder, max_files=cfg.max_skill_files, max_bytes=cfg.max_skill_bytes, tool=tool)


async def approved_content(state: HubState, tool: str, skill: Skill) -> SkillContent:
    """The skill's content, once it passed the scan and a human approved these exact bytes (asking if needed).

    Raises :class:`aleph.PermissionDenied` for a dangerous finding, the chokepoint's approval errors when
    nobody approves, and :class:`SkillChanged` when the folder changes while it is checked.
    """
    location = skill.location.resolve()
    content = _content(state, location, tool)
    if _approved(state, location, content.digest):
        return content
    disclosure = disclose_skill(location, await state.known_tools())
    shown = {path["path"]: path["sha256"] for path in disclosure["files"]}
    if any(content.files.get(path) != digest for path, digest in shown.items()):
        raise SkillChanged(tool, f"skill '{skill.id}' changed while it was being read; try again")
    if disclosure["verdict"] == "dangerous":
        ids = sorted({f["id"] for f in disclosure["findings"] if f["level"] == "dangerous"})
        raise aleph.PermissionDenied(
            tool, f"skill '{skill.id}' is not served: the security scan found dangerous content ({', '.join(ids)})"
        )
    # Keys sort after name and description, so a prompt cut short still shows what the skill is.
    disclosure["pinned_digest"] = content.digest
    disclosure["pinned_entries"] = sorted(content.files)
    disclosure["location"] = str(location)
    disclosure["source"] = skill.source
    what = f"skill {skill.id} at {location}: new, or changed since a human approved it"
    await consent(tool, "skill", what, aleph.adds_digest(disclosure), disclosure)
    if _content(state, location, tool).digest != content.digest:
        raise SkillChanged(tool, f"skill '{skill.id}' changed while awaiting approval; nothing was served")
    _pin(state, location, content.digest)
    return content


def read_verified(content: SkillContent, folder: Path, rel: str, tool: str) -> bytes:
    """The bytes of ``rel`` in ``folder``, only if they are the ones ``content`` approved."""
    expected = content.files.get(rel)
    if expected is None or expected.startswith("symlink:"):
        raise aleph.PermissionDenied(tool, f"'{rel}' is not a regular file of the approved skill")
    data = (folder / rel).read_bytes()
    if hashlib.sha256(data).hexdigest() != expected:
        raise SkillChanged(tool, f"'{rel}' changed since the skill was approved; read the skill again")
    return data


def pin_installed(state: HubState, folder: Path, expected: str, tool: str) -> None:
    """Pin the skill just installed at ``folder`` (a human approved ``expected``) if it still hashes to it."""
    location = folder.resolve()
    if _content(state, location, tool).digest != expected:
        raise SkillChanged(tool, f"the installed skill at {location} differs from what was approved")
    _pin(state, location, expected)


def pin_state(state: HubState, skill: Skill) -> dict[str, Any]:
    """Whether ``skill`` is served as it is now (``approved``) or needs a human first (``needs_approval``)."""
    location = skill.location.resolve()
    try:
        content = _content(state, location, "skill_list")
    except aleph.ToolError as exc:
        return {"approval": "unverifiable", "reason": str(exc)}
    return {"approval": "approved" if _approved(state, location, content.digest) else "needs_approval"}
