"""``file_read``, ``file_write`` and ``file_edit``: one file at a time, confined to the workspace."""

from __future__ import annotations

import base64
import binascii
import difflib
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field

from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph_files._config import FilesConfig
from aleph_files._confine import MAX_PATH_BYTES, Workspace
from aleph_files._io import atomic_write, guard, read_limited, sniff_binary

__all__ = ["FileEditTool", "FileReadTool", "FileWriteTool", "nearest_lines"]

_MAX_TEXT_ARG = 64 * 1024 * 1024


class FileReadArgs(ToolArgs):
    path: str = Field(max_length=MAX_PATH_BYTES)
    """File to read, relative to the workspace (or absolute inside it)."""
    offset: int | None = Field(default=None, ge=1, le=100_000_000)
    """First line to return, 1-based. Default: line 1."""
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    """How many lines to return from ``offset``. Default: to the end of the file."""
    encoding: Literal["text", "base64"] = "text"
    """``text`` (UTF-8, binary files are refused) or ``base64`` (the raw bytes, for binary files)."""
    line_numbers: bool = True
    """Prefix each line with its 1-based number and a tab (like ``cat -n``)."""


class FileReadTool(AlephTool[FileReadArgs]):
    NAME = "file_read"
    DESCRIPTION = (
        "Read a file in the workspace. Text comes back with 1-based line numbers; use offset/limit to read "
        "part of a large file. A read longer than the output budget stops at a line boundary with "
        "truncated=true and a note naming the offset to continue from. Binary files are refused unless "
        "encoding='base64'. Files above the size limit (default 2 MB) must be read in ranges."
    )
    Args = FileReadArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("filesystem", "read"))

    def __init__(self, ws: Workspace, config: FilesConfig, max_chars: int) -> None:
        self.ws = ws
        self.config = config
        self.max_chars = max_chars

    async def call(self, args: FileReadArgs) -> dict[str, Any]:
        return self.read(args)

    def _fit(self, result: dict[str, Any], first: int) -> dict[str, Any]:
        """Cut ``content`` at the last line boundary within the character budget and say where to go on."""
        content: str = result["content"]
        budget = self.max_chars
        if len(content) <= budget:
            return result
        cut = content.rfind("\n", 0, budget + 1)
        if cut <= 0:
            result["content"] = content[:budget]
            result["end_line"] = first
            more = f"line {first} alone is longer than that: it is cut; read the file with encoding='base64' or bash"
        else:
            result["content"] = content[:cut]
            result["end_line"] = first + content.count("\n", 0, cut)
            more = f"continue with offset={result['end_line'] + 1}"
        result["truncated"] = True
        result["note"] = f"output budget of {budget} characters reached after line {result['end_line']}; {more}"
        return result

    def read(self, args: FileReadArgs) -> dict[str, Any]:
        """Synchronous body (cheap enough for the event loop at the sizes the cap allows)."""
        cap = self.config.max_read_bytes
        ranged = args.offset is not None or args.limit is not None
        with guard(self.NAME), self.ws.open_regular(args.path) as (fd, target):
            if args.encoding == "base64":
                data = read_limited(fd, cap)
                if len(data) > cap:
                    raise ExecutionFailed(self.NAME, f"{args.path!r} is larger than the {cap}-byte read limit")
                return {"path": target.rel, "encoding": "base64", "size": len(data), "content": _b64(data)}
            if ranged:
                return self._read_range(fd, target.rel, args, cap)
            data = read_limited(fd, cap)
            if len(data) > cap:
                raise ExecutionFailed(
                    self.NAME,
                    f"{args.path!r} is larger than the {cap}-byte read limit ([files] max_read_bytes); "
                    "read it in parts with offset and limit",
                )
            text = self._decode(args.path, data)
        if args.line_numbers and "\r" in text:
            text = text.replace("\r\n", "\n")  # "\r\n" ends a line like "\n", as in ranged reads
        body = text[:-1] if text.endswith("\n") else text
        # Lines end at "\n" only, as in ranged reads (str.splitlines would also split at form feeds, U+2028
        # and friends, and so disagree with offset/limit).
        count = body.count("\n") + 1 if text else 0
        # Only the first max_chars characters can be shown: render no more than that (_fit cuts the rest).
        head = body[: self.max_chars + 1]
        content = _render(head.split("\n"), 1, True) if args.line_numbers and text else head
        result = {
            "path": target.rel,
            "content": content,
            "start_line": 1 if count else 0,
            "end_line": count,
            "total_lines": count,
            "truncated": False,
        }
        return self._fit(result, 1)

    def _decode(self, path: str, data: bytes) -> str:
        try:
            if b"\x00" in data[:8192]:
                raise ValueError("NUL byte")
            return data.decode("utf-8")
        except ValueError:  # UnicodeDecodeError is a ValueError
            raise ExecutionFailed(
                self.NAME,
                f"{path!r} looks binary (NUL bytes or not UTF-8); pass encoding='base64' to get its bytes",
            ) from None

    def _read_range(self, fd: int, rel: str, args: FileReadArgs, cap: int) -> dict[str, Any]:
        first = args.offset or 1
        last = first + args.limit - 1 if args.limit is not None else None
        out: list[str] = []
        size = 0
        truncated = False
        number = 0
        with open(fd, "rb", closefd=False) as fh:
            head = fh.peek(8192) if hasattr(fh, "peek") else b""
            if b"\x00" in head[:8192]:
                self._decode(args.path, head)
            for number, raw in enumerate(fh, start=1):
                if number < first:
                    continue
                if last is not None and number > last:
                    number -= 1
                    break
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError:
                    raise ExecutionFailed(
                        self.NAME, f"{args.path!r} looks binary (line {number} is not UTF-8); pass encoding='base64'"
                    ) from None
                size += len(raw)
                if size > cap:
                    truncated = True
                    number -= 1
                    break
                out.append(line)
        end = first + len(out) - 1 if out else first - 1
        result: dict[str, Any] = {
            "path": rel,
            "content": _render(out, first, args.line_numbers),
            "start_line": first if out else 0,
            "end_line": end if out else 0,
            "truncated": truncated,
        }
        if not out and number < first:
            result["note"] = f"the file has {number} lines; offset {first} is past its end"
        return self._fit(result, first)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


_PREFIXES: list[str] = []
_PREFIX_CACHE_LINES = 100_000


def _prefixes(first: int, count: int) -> Iterable[str]:
    """Line-number prefixes (newline, six-wide number, tab), cached so a large read joins strings in C."""
    last = first + count - 1
    if last <= _PREFIX_CACHE_LINES:
        if len(_PREFIXES) < last:
            _PREFIXES.extend(f"\n{n:>6}\t" for n in range(len(_PREFIXES) + 1, last + 1))
        return _PREFIXES[first - 1 : last]
    return (f"\n{n:>6}\t" for n in range(first, last + 1))


def _render(lines: list[str], first: int, numbered: bool) -> str:
    if not numbered or not lines:
        return "\n".join(lines)
    # prefix, line, prefix, line, ... joined once: the text is copied a single time (concatenating each
    # prefix with its line first would copy it twice, and costs more than the split itself). Each
    # prefix carries the newline that ends the line before it; the first one has none.
    count = len(lines)
    parts = [""] * (2 * count)
    parts[0::2] = _prefixes(first, count)
    parts[1::2] = lines
    parts[0] = parts[0][1:]
    return "".join(parts)


class FileWriteArgs(ToolArgs):
    path: str = Field(max_length=MAX_PATH_BYTES)
    """File to create or replace, relative to the workspace."""
    content: str = Field(max_length=_MAX_TEXT_ARG)
    """The complete new content (UTF-8 text, or base64 when encoding='base64')."""
    encoding: Literal["text", "base64"] = "text"
    """How ``content`` is encoded."""
    create_dirs: bool = False
    """Create missing parent directories."""


class FileWriteTool(AlephTool[FileWriteArgs]):
    NAME = "file_write"
    DESCRIPTION = (
        "Create or replace a whole file in the workspace, atomically: readers see the old content or the new, "
        "never a partial file. An existing file keeps its permissions. Set create_dirs to make missing parent "
        "directories. To change part of a file use file_edit instead."
    )
    Args = FileWriteArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=("filesystem", "write"))

    def __init__(self, ws: Workspace, config: FilesConfig) -> None:
        self.ws = ws
        self.config = config

    async def call(self, args: FileWriteArgs) -> dict[str, Any]:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.write, args)

    def write(self, args: FileWriteArgs) -> dict[str, Any]:
        """Synchronous body (fsync blocks, so it runs in a worker thread)."""
        if args.encoding == "base64":
            try:
                data = base64.b64decode(args.content, validate=True)
            except (binascii.Error, ValueError):
                raise ValidationFailed(self.NAME, "content: not valid base64") from None
        else:
            data = args.content.encode("utf-8", "surrogatepass")
        if len(data) > self.config.max_write_bytes:
            raise ValidationFailed(
                self.NAME, f"content: {len(data)} bytes is over the {self.config.max_write_bytes}-byte write limit"
            )
        with guard(self.NAME):
            rel, created = atomic_write(self.ws, args.path, data, create_dirs=args.create_dirs)
        return {"path": rel, "bytes": len(data), "created": created}


class FileEditArgs(ToolArgs):
    path: str = Field(max_length=MAX_PATH_BYTES)
    """File to edit, relative to the workspace."""
    old_string: str = Field(min_length=1, max_length=_MAX_TEXT_ARG)
    """Exact text to replace (whitespace and indentation included). It must occur exactly once unless replace_all."""
    new_string: str = Field(max_length=_MAX_TEXT_ARG)
    """Replacement text."""
    replace_all: bool = False
    """Replace every occurrence instead of requiring exactly one."""


class FileEditTool(AlephTool[FileEditArgs]):
    NAME = "file_edit"
    DESCRIPTION = (
        "Replace an exact piece of text in a workspace file (old_string → new_string). old_string must match "
        "exactly once (or set replace_all); when it does not, the error lists the nearest lines with their "
        "numbers so you can copy the exact text. The file is rewritten atomically."
    )
    Args = FileEditArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=("filesystem", "write"))

    def __init__(self, ws: Workspace, config: FilesConfig) -> None:
        self.ws = ws
        self.config = config

    async def call(self, args: FileEditArgs) -> dict[str, Any]:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.edit, args)

    def edit(self, args: FileEditArgs) -> dict[str, Any]:
        """Synchronous body."""
        if args.old_string == args.new_string:
            raise ValidationFailed(self.NAME, "new_string: identical to old_string, nothing to change")
        cap = self.config.max_write_bytes
        with guard(self.NAME):
            with self.ws.open_regular(args.path) as (fd, target):
                data = read_limited(fd, cap)
                if len(data) > cap:
                    raise ExecutionFailed(self.NAME, f"{args.path!r} is larger than the {cap}-byte edit limit")
                if sniff_binary(data):
                    raise ExecutionFailed(self.NAME, f"{args.path!r} looks binary; file_edit only edits UTF-8 text")
                rel = target.rel
            text = data.decode("utf-8")
            count = text.count(args.old_string)
            if count == 0:
                raise ExecutionFailed(self.NAME, _not_found(rel, text, args.old_string))
            if count > 1 and not args.replace_all:
                lines = _occurrence_lines(text, args.old_string)
                shown = ", ".join(map(str, lines[:20])) + (" ..." if len(lines) > 20 else "")
                raise ExecutionFailed(
                    self.NAME,
                    f"old_string occurs {count} times in {rel} (lines {shown}); include more surrounding "
                    "text to make it unique, or set replace_all=true",
                )
            new_text = text.replace(args.old_string, args.new_string)
            new_data = new_text.encode("utf-8", "surrogatepass")
            if len(new_data) > cap:
                raise ExecutionFailed(self.NAME, f"the edited file would exceed the {cap}-byte write limit")
            atomic_write(self.ws, rel, new_data)
        first_line = text.count("\n", 0, text.index(args.old_string)) + 1
        return {"path": rel, "replacements": count, "first_line": first_line}


def _occurrence_lines(text: str, needle: str) -> list[int]:
    lines, start = [], 0
    while (at := text.find(needle, start)) >= 0:
        lines.append(text.count("\n", 0, at) + 1)
        start = at + max(1, len(needle))
    return lines


def nearest_lines(text: str, needle: str, n: int = 3) -> list[tuple[int, str, float]]:
    """The ``n`` lines of ``text`` most similar to ``needle``'s first non-blank line: (line number, line, ratio)."""
    probe = next((line.strip() for line in needle.splitlines() if line.strip()), needle.strip())
    scored = []
    for number, line in enumerate(text.splitlines()[:50_000], start=1):
        stripped = line.strip()
        if not stripped:
            continue
        matcher = difflib.SequenceMatcher(None, probe, stripped, autojunk=False)
        if matcher.real_quick_ratio() < 0.4 or matcher.quick_ratio() < 0.4:
            continue
        scored.append((number, line, matcher.ratio()))
    scored.sort(key=lambda item: (-item[2], item[0]))
    return [item for item in scored[:n] if item[2] >= 0.4]


def _not_found(rel: str, text: str, needle: str) -> str:
    squeeze = " ".join(needle.split())
    hint = ""
    if squeeze and squeeze in " ".join(text.split()):
        hint = " The text is there with different whitespace or line breaks; copy it exactly from file_read."
    close = nearest_lines(text, needle)
    if not close:
        return f"old_string not found in {rel} and no similar line exists.{hint} Read the file first with file_read."
    shown = "\n".join(f"  line {number}: {line.strip()[:200]}" for number, line, _ in close)
    return f"old_string not found in {rel}.{hint} Nearest lines:\n{shown}\nCopy the exact text (file_read shows it)."
