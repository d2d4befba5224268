"""``apply_patch``: the V4A multi-file patch format, applied all or nothing.

::

    *** Begin Patch
    *** Add File: docs/new.md
    +first line
    *** Update File: src/app.py
    *** Move to: src/main.py
    @@ def main():
     context line
    -old line
    +new line
    *** Delete File: old.txt
    *** End Patch

Every file's new content is computed and checked before anything is written; the writes then run
under a rollback journal, so a failure on one file leaves every file as it was.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from pydantic import Field

from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph_files._config import FilesConfig
from aleph_files._confine import PathError, Workspace
from aleph_files._files import nearest_lines
from aleph_files._io import Original, atomic_write, guard, read_limited, restore, snapshot, sniff_binary

__all__ = ["ApplyPatchTool", "PatchError", "parse_patch"]


class PatchError(ValueError):
    """The patch text is malformed or does not apply; the message says where."""


@dataclass(slots=True)
class Chunk:
    """One ``@@`` hunk: optional anchor lines, then the old and new lines."""

    anchors: list[str] = field(default_factory=list)
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_eof: bool = False


@dataclass(slots=True)
class FileOp:
    """One file section of a patch."""

    kind: str  # "add" | "update" | "delete"
    path: str
    move_to: str | None = None
    content: str = ""
    chunks: list[Chunk] = field(default_factory=list)


_BEGIN, _END = "*** Begin Patch", "*** End Patch"
_ADD, _UPDATE, _DELETE, _MOVE = "*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "
_EOF = "*** End of File"


def parse_patch(text: str) -> list[FileOp]:
    """Parse V4A patch text into file operations, or raise :class:`PatchError` naming the line."""
    lines = text.strip().splitlines()
    if not lines or lines[0].strip() != _BEGIN:
        raise PatchError(f"the patch must start with '{_BEGIN}'")
    if lines[-1].strip() != _END:
        raise PatchError(f"the patch must end with '{_END}'")
    ops: list[FileOp] = []
    i = 1
    end = len(lines) - 1
    while i < end:
        line = lines[i]
        if line.startswith(_ADD):
            op = FileOp("add", line[len(_ADD) :].strip())
            i += 1
            body = []
            while i < end and not lines[i].startswith("*** "):
                if not lines[i].startswith("+"):
                    raise PatchError(f"line {i + 1}: every line of an added file starts with '+', got {lines[i]!r}")
                body.append(lines[i][1:])
                i += 1
            op.content = "\n".join(body) + ("\n" if body else "")
            ops.append(op)
        elif line.startswith(_DELETE):
            ops.append(FileOp("delete", line[len(_DELETE) :].strip()))
            i += 1
        elif line.startswith(_UPDATE):
            op = FileOp("update", line[len(_UPDATE) :].strip())
            i += 1
            if i < end and lines[i].startswith(_MOVE):
                op.move_to = lines[i][len(_MOVE) :].strip()
                i += 1
            chunk: Chunk | None = None
            while i < end and not (lines[i].startswith("*** ") and lines[i].strip() != _EOF):
                raw = lines[i]
                if raw.strip() == _EOF:
                    if chunk is None:
                        raise PatchError(f"line {i + 1}: '{_EOF}' before any change")
                    chunk.at_eof = True
                elif raw.startswith("@@"):
                    if chunk is None or chunk.old or chunk.new:
                        chunk = Chunk()
                        op.chunks.append(chunk)
                    anchor = raw[2:].strip()
                    if anchor:
                        chunk.anchors.append(anchor)
                else:
                    if chunk is None:
                        chunk = Chunk()
                        op.chunks.append(chunk)
                    tag, rest = (raw[:1], raw[1:]) if raw else (" ", "")
                    if tag == " ":
                        chunk.old.append(rest)
                        chunk.new.append(rest)
                    elif tag == "-":
                        chunk.old.append(rest)
                    elif tag == "+":
                        chunk.new.append(rest)
                    else:
                        raise PatchError(f"line {i + 1}: a change line starts with ' ', '-' or '+', got {raw[:80]!r}")
                i += 1
            if not op.chunks and op.move_to is None:
                raise PatchError(f"'{_UPDATE}{op.path}' has no changes")
            ops.append(op)
        elif not line.strip():
            i += 1
        else:
            raise PatchError(f"line {i + 1}: expected a '*** Add/Update/Delete File:' header, got {line[:80]!r}")
    if not ops:
        raise PatchError("the patch contains no file operations")
    return ops


def _find(lines: list[str], seq: list[str], start: int, at_eof: bool) -> int:
    """Index where ``seq`` occurs in ``lines`` at or after ``start``: exact, then ignoring trailing, then all space."""
    if not seq:
        return len(lines) if at_eof else start
    for norm in (lambda s: s, str.rstrip, str.strip):
        target = [norm(s) for s in seq]
        last = len(lines) - len(seq)
        candidates = [last] if at_eof else []
        candidates += range(start, last + 1)
        for idx in candidates:
            if idx >= start and [norm(s) for s in lines[idx : idx + len(seq)]] == target:
                return idx
    return -1


def apply_chunks(path: str, text: str, chunks: list[Chunk]) -> str:
    """Apply update hunks to ``text`` in order; raise :class:`PatchError` for one that does not match."""
    trailing = text.endswith("\n")
    lines = text.split("\n")
    if trailing:
        lines.pop()
    cursor = 0
    for n, chunk in enumerate(chunks, start=1):
        for anchor in chunk.anchors:
            found = next((k for k in range(cursor, len(lines)) if lines[k].strip() == anchor), None)
            if found is None:
                found = next((k for k in range(cursor, len(lines)) if anchor in lines[k]), None)
            if found is None:
                raise PatchError(f"{path}: hunk {n}: context line '@@ {anchor}' not found")
            cursor = found + 1
        idx = _find(lines, chunk.old, cursor, chunk.at_eof)
        if idx < 0:
            close = nearest_lines("\n".join(lines), "\n".join(chunk.old))
            near = "; nearest: " + ", ".join(f"line {k}: {t.strip()[:80]!r}" for k, t, _ in close) if close else ""
            first = next((s for s in chunk.old if s.strip()), chunk.old[0] if chunk.old else "")
            raise PatchError(f"{path}: hunk {n} does not apply: the lines starting {first[:80]!r} were not found{near}")
        lines[idx : idx + len(chunk.old)] = chunk.new
        cursor = idx + len(chunk.new)
    return "\n".join(lines) + ("\n" if trailing or not lines else "")


class ApplyPatchArgs(ToolArgs):
    patch: str = Field(max_length=16 * 1024 * 1024)
    """The V4A patch text, from '*** Begin Patch' to '*** End Patch'."""


class ApplyPatchTool(AlephTool[ApplyPatchArgs]):
    NAME = "apply_patch"
    DESCRIPTION = (
        "Apply a multi-file patch in the V4A format: '*** Begin Patch', then '*** Add File: p' (lines with +), "
        "'*** Update File: p' (optional '*** Move to: q', '@@ context' hunks of ' ', '-', '+' lines) or "
        "'*** Delete File: p', then '*** End Patch'. All or nothing: if any file fails, no file changes."
    )
    Args = ApplyPatchArgs
    FACTS = ToolFacts(max_duration_ms=120_000, tags=("filesystem", "write"))

    def __init__(self, ws: Workspace, config: FilesConfig) -> None:
        self.ws = ws
        self.config = config

    def subject_paths(self, input: Mapping[str, Any]) -> list[str]:
        """The files a patch names (sources and move targets), for path rules; [] if it does not parse."""
        try:
            ops = parse_patch(str(input.get("patch", "")))
        except PatchError:
            return []
        return [p for op in ops for p in (op.path, op.move_to) if p]

    async def call(self, args: ApplyPatchArgs) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self.apply, args)

    def apply(self, args: ApplyPatchArgs) -> dict[str, Any]:
        """Synchronous body: parse, plan every file, then write under a rollback journal."""
        try:
            ops = parse_patch(args.patch)
        except PatchError as exc:
            raise ValidationFailed(self.NAME, f"patch: {exc}") from None
        with guard(self.NAME):
            plan, summary = self._plan(ops)
            self._commit(plan)
        return {"files": summary}

    def _read_text(self, path: str) -> str:
        cap = self.config.max_write_bytes
        with self.ws.open_regular(path) as (fd, _):
            data = read_limited(fd, cap)
        if len(data) > cap:
            raise PatchError(f"{path}: larger than the {cap}-byte limit")
        if sniff_binary(data):
            raise PatchError(f"{path}: binary file; apply_patch edits UTF-8 text only")
        return data.decode("utf-8")

    def _canonical(self, path: str) -> str:
        rel = self.ws.canonical(path)
        if rel == ".":
            raise PathError("denied", "the workspace root itself cannot be patched")
        if self.ws.is_protected(rel):
            raise PathError(
                "denied",
                f"{path!r} is a protected path (Aleph's own files, .git/hooks, .git/config); "
                "apply_patch cannot write it",
            )
        return rel

    def _exists(self, rel: str) -> bool:
        try:
            with self.ws.resolve(rel, follow_last=False) as target:
                return target.lstat() is not None
        except PathError as exc:
            if exc.kind == "missing":
                return False
            raise

    def _plan(self, ops: list[FileOp]) -> tuple[dict[str, bytes | None], list[dict[str, str]]]:
        plan: dict[str, bytes | None] = {}
        summary = []

        def claim(rel: str, value: bytes | None) -> None:
            if rel in plan:
                raise PatchError(f"{rel}: named twice in one patch")
            if value is not None and len(value) > self.config.max_write_bytes:
                raise PatchError(f"{rel}: new content exceeds the {self.config.max_write_bytes}-byte limit")
            plan[rel] = value

        try:
            for op in ops:
                rel = self._canonical(op.path)
                exists = self._exists(rel)
                if op.kind == "add":
                    if exists:
                        raise PatchError(f"{rel}: already exists; use '*** Update File:' to change it")
                    claim(rel, op.content.encode("utf-8"))
                    summary.append({"path": rel, "action": "added"})
                    continue
                if not exists:
                    raise PatchError(f"{rel}: does not exist")
                if op.kind == "delete":
                    self._read_text(op.path)
                    claim(rel, None)
                    summary.append({"path": rel, "action": "deleted"})
                    continue
                new_text = apply_chunks(rel, self._read_text(op.path), op.chunks)
                if op.move_to is not None:
                    dest = self._canonical(op.move_to)
                    if self._exists(dest):
                        raise PatchError(f"{dest}: move destination already exists")
                    claim(rel, None)
                    claim(dest, new_text.encode("utf-8"))
                    summary.append({"path": rel, "action": "moved", "to": dest})
                else:
                    claim(rel, new_text.encode("utf-8"))
                    summary.append({"path": rel, "action": "updated"})
        except PatchError as exc:
            raise ExecutionFailed(self.NAME, f"{exc}; no file was changed") from None
        return plan, summary

    def _commit(self, plan: dict[str, bytes | None]) -> None:
        journal: list[Original] = []
        try:
            for rel, data in plan.items():
                journal.append(snapshot(self.ws, rel, self.config.max_write_bytes))
                if data is None:
                    with self.ws.resolve(rel, follow_last=False) as target:
                        os.unlink(target.name, dir_fd=target.parent_fd)
                else:
                    atomic_write(self.ws, rel, data, create_dirs=True)
        except (PathError, OSError) as exc:
            for original in reversed(journal):
                restore(self.ws, original)
            raise ExecutionFailed(self.NAME, f"writing the patch failed ({exc}); every file was restored") from None
