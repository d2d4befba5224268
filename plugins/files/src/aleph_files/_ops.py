"""``file_ops``: list, search, stats, move, copy, delete, mkdir, batch_move and organize — all confined."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from aleph import AlephTool, ExecutionFailed, ProtectedPaths, ToolArgs, ToolFacts, ValidationFailed, current_call
from aleph_files._config import FilesConfig
from aleph_files._confine import MAX_PATH_BYTES, PathError, Target, Workspace
from aleph_files._io import atomic_write, guard, read_limited, sniff_binary

__all__ = ["FileOpsTool", "glob_regex"]

_SCAN_FILE_BYTES = 1024 * 1024
_SCAN_TOTAL_BYTES = 64 * 1024 * 1024
_MAX_TREE_ENTRIES = 10_000


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob where ``*`` and ``?`` never cross ``/`` and ``**`` spans directories."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


class Move(BaseModel):
    """One move of a batch."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    source: str = Field(max_length=MAX_PATH_BYTES)
    """Existing path to move."""
    destination: str = Field(max_length=MAX_PATH_BYTES)
    """New path (an existing directory receives the source inside it)."""


_RANK = {"allow": 0, "ask": 1, "deny": 2}

Operation = Literal["list", "search", "stats", "move", "copy", "delete", "mkdir", "batch_move", "organize"]


class FileOpsArgs(ToolArgs):
    operation: Operation
    """What to do: list, search, stats, move, copy, delete, mkdir, batch_move or organize."""
    path: str = Field(default=".", max_length=MAX_PATH_BYTES)
    """The path operated on (the source for move/copy, the directory for list/search/organize)."""
    destination: str | None = Field(default=None, max_length=MAX_PATH_BYTES)
    """Target of move and copy."""
    pattern: str | None = Field(default=None, max_length=1000)
    """search/list: glob on workspace-relative paths (``*`` stays in one directory, ``**`` spans them);
    a pattern without ``/`` matches file names at any depth."""
    content_regex: str | None = Field(default=None, max_length=1000)
    """search: a Python regular expression matched against each line of text files."""
    case_sensitive: bool = True
    """search: whether content_regex is case-sensitive."""
    recursive: bool = False
    """list: descend into subdirectories; delete: remove a non-empty directory with its contents."""
    overwrite: bool = False
    """move/copy/batch_move: replace an existing destination file."""
    moves: list[Move] = Field(default_factory=list, max_length=1000)
    """batch_move: the moves, applied all or none."""
    dry_run: bool = False
    """organize: report the planned moves without moving anything."""
    max_results: int = Field(default=100, ge=1, le=10_000)
    """list/search: stop after this many results (also bounded by [files] max_search_results)."""


class FileOpsTool(AlephTool[FileOpsArgs]):
    NAME = "file_ops"
    DESCRIPTION = (
        "File and directory operations in the workspace: list, search (glob on names plus an optional regex "
        "on contents), stats, move, copy, delete, mkdir, batch_move (all or nothing) and organize (sort the "
        "files of a directory into folders by extension). Paths are relative to the workspace."
    )
    Args = FileOpsArgs
    # Facts are per tool, and several operations mutate: fail closed (not idempotent, not concurrent-safe).
    FACTS = ToolFacts(max_duration_ms=120_000, tags=("filesystem", "write"))

    def __init__(self, ws: Workspace, config: FilesConfig) -> None:
        self.ws = ws
        self.config = config

    def subject_paths(self, input: Mapping[str, Any]) -> list[str]:
        """Every path this call would touch (``path``, ``destination`` and each batch move), for path rules."""
        paths = [input.get("path", "."), input.get("destination")]
        for move in input.get("moves") or []:
            if isinstance(move, Mapping):
                paths += [move.get("source"), move.get("destination")]
        return [p for p in paths if isinstance(p, str) and p]

    def sub_calls(self, input: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """A batch_move is its moves: each is judged as the ``file_ops`` move it is (then all run or none)."""
        if input.get("operation") != "batch_move":
            return []
        overwrite = input.get("overwrite", False)
        return [
            (
                "file_ops",
                {
                    "operation": "move",
                    "path": m.get("source"),
                    "destination": m.get("destination"),
                    "overwrite": overwrite,
                },
            )
            for m in input.get("moves") or []
            if isinstance(m, Mapping)
        ]

    async def call(self, args: FileOpsArgs) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self.run, args)

    def _hidden(self, path: str, *, content: bool) -> bool:
        """Whether the running call may not show ``path`` (or its content): the caller could not name it."""
        call = current_call()
        if call is None:
            return False
        if _RANK[call.permits(self.NAME, {"operation": "list", "path": path})] > _RANK[call.decision]:
            return True
        return content and call.permits("file_read", {"path": path}) == "deny"

    def run(self, args: FileOpsArgs) -> dict[str, Any]:
        """Synchronous body: dispatch on ``operation``."""
        with guard(self.NAME):
            handler = getattr(self, f"_op_{args.operation}")
            result: dict[str, Any] = handler(args)
        return {"operation": args.operation, **result}

    # -- read-only operations ----------------------------------------------------------------

    def _limit(self, args: FileOpsArgs) -> int:
        return min(args.max_results, self.config.max_search_results)

    def _op_list(self, args: FileOpsArgs) -> dict[str, Any]:
        limit = self._limit(args)
        match = _matcher(args.pattern)
        entries: list[dict[str, Any]] = []
        truncated = False
        with self.ws.open_dir(args.path) as (fd, rel):
            for sub, name, st in _walk(fd, args.recursive, rel):
                path = _join(sub, name)
                if match is not None and not match(path):
                    continue
                if self._hidden(_join(rel, path), content=False):
                    continue
                if len(entries) >= limit:
                    truncated = True
                    break
                entries.append({"path": _join(rel, path), "type": _type(st.st_mode), "size": st.st_size})
        return {"path": rel, "entries": entries, "truncated": truncated}

    def _op_search(self, args: FileOpsArgs) -> dict[str, Any]:
        if args.pattern is None and args.content_regex is None:
            raise ValidationFailed(self.NAME, "search needs pattern, content_regex or both")
        try:
            regex = (
                re.compile(args.content_regex, 0 if args.case_sensitive else re.IGNORECASE)
                if args.content_regex is not None
                else None
            )
        except re.error as exc:
            raise ValidationFailed(self.NAME, f"content_regex: invalid regular expression: {exc}") from None
        match = _matcher(args.pattern)
        limit = self._limit(args)
        results: list[dict[str, Any]] = []
        scanned = files = 0
        truncated = False
        with self.ws.open_dir(args.path) as (fd, rel):
            for sub, name, st in _walk(fd, True, rel):
                if not stat.S_ISREG(st.st_mode):
                    continue
                path = _join(sub, name)
                if match is not None and not match(path):
                    continue
                if self._hidden(_join(rel, path), content=regex is not None):
                    continue
                files += 1
                if regex is None:
                    if len(results) >= limit:
                        truncated = True
                        break
                    results.append({"path": _join(rel, path)})
                    continue
                if scanned >= _SCAN_TOTAL_BYTES:
                    truncated = True
                    break
                data = _read_at(fd, path, _SCAN_FILE_BYTES)
                if data is None or sniff_binary(data):
                    continue
                scanned += len(data)
                for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
                    if regex.search(line):
                        if len(results) >= limit:
                            truncated = True
                            break
                        results.append({"path": _join(rel, path), "line": number, "text": line[:500]})
                if truncated:
                    break
        return {"path": rel, "matches": results, "files_considered": files, "truncated": truncated}

    def _op_stats(self, args: FileOpsArgs) -> dict[str, Any]:
        with self.ws.resolve(args.path, follow_last=False) as target:
            st = target.lstat()
            if st is None:
                raise PathError("missing", f"{args.path!r} does not exist")
            out: dict[str, Any] = {
                "path": target.rel,
                "type": _type(st.st_mode),
                "size": st.st_size,
                "mode": oct(stat.S_IMODE(st.st_mode)),
                "modified": datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds"),
            }
            if stat.S_ISLNK(st.st_mode):
                out["link_target"] = os.readlink(target.name, dir_fd=target.parent_fd)
        if stat.S_ISDIR(st.st_mode):
            counts = {"files": 0, "directories": 0, "bytes": 0}
            with self.ws.open_dir(args.path) as (fd, rel):
                for n, (_, _, sub_st) in enumerate(_walk(fd, True, rel)):
                    if n >= _MAX_TREE_ENTRIES * 10:
                        out["truncated"] = True
                        break
                    if stat.S_ISDIR(sub_st.st_mode):
                        counts["directories"] += 1
                    else:
                        counts["files"] += 1
                        counts["bytes"] += sub_st.st_size
            out.update(counts)
        return out

    # -- mutating operations -----------------------------------------------------------------

    def _need_destination(self, args: FileOpsArgs) -> str:
        if not args.destination:
            raise ValidationFailed(self.NAME, f"destination: required for {args.operation}")
        return args.destination

    def _op_mkdir(self, args: FileOpsArgs) -> dict[str, Any]:
        with self.ws.resolve(args.path, create_dirs=True) as target:
            self.ws.check_writable(target, args.path)
            st = target.lstat()
            if st is not None and not stat.S_ISDIR(st.st_mode):
                raise PathError("type", f"{args.path!r} exists and is not a directory")
            if st is None:
                os.mkdir(target.name, 0o755, dir_fd=target.parent_fd)
            return {"path": target.rel, "created": st is None}

    def _op_delete(self, args: FileOpsArgs) -> dict[str, Any]:
        with self.ws.resolve(args.path, follow_last=False) as target:
            self.ws.check_writable(target, args.path)
            st = target.lstat()
            if st is None:
                raise PathError("missing", f"{args.path!r} does not exist")
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(target.name, dir_fd=target.parent_fd)
                return {"path": target.rel, "deleted": _type(st.st_mode), "entries": 1}
            removed = 1
            if args.recursive:
                fd = os.open(target.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=target.parent_fd)
                try:
                    for _, dirs, files, dfd in os.fwalk(".", dir_fd=fd, topdown=False, follow_symlinks=False):
                        for name in files:
                            os.unlink(name, dir_fd=dfd)
                        for name in dirs:
                            if stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                                os.unlink(name, dir_fd=dfd)
                            else:
                                os.rmdir(name, dir_fd=dfd)
                        removed += len(files) + len(dirs)
                finally:
                    os.close(fd)
            try:
                os.rmdir(target.name, dir_fd=target.parent_fd)
            except OSError as exc:
                if exc.errno == 39:  # ENOTEMPTY
                    raise ExecutionFailed(
                        self.NAME, f"directory {args.path!r} is not empty; set recursive=true to delete its contents"
                    ) from None
                raise
            return {"path": target.rel, "deleted": "directory", "entries": removed}

    def _move_one(self, source: str, destination: str, overwrite: bool) -> tuple[str, str]:
        with self.ws.resolve(source, follow_last=False) as src:
            self.ws.check_writable(src, source)
            if src.lstat() is None:
                raise PathError("missing", f"{source!r} does not exist")
            with self._destination(destination, src.name, overwrite) as dst:
                os.rename(src.name, dst.name, src_dir_fd=src.parent_fd, dst_dir_fd=dst.parent_fd)
                return src.rel, dst.rel

    def _destination(self, destination: str, name: str, overwrite: bool) -> Target:
        dst = self.ws.resolve(destination, create_dirs=True)
        try:
            st = dst.lstat()
            if st is not None and stat.S_ISDIR(st.st_mode):
                dst.close()
                dst = self.ws.resolve(f"{destination.rstrip('/')}/{name}", follow_last=False)
                st = dst.lstat()
            self.ws.check_writable(dst, destination)
            if st is not None and (not overwrite or stat.S_ISDIR(st.st_mode)):
                raise PathError(
                    "type", f"destination {dst.rel!r} already exists (set overwrite=true to replace a file)"
                )
            return dst
        except BaseException:
            dst.close()
            raise

    def _op_move(self, args: FileOpsArgs) -> dict[str, Any]:
        src, dst = self._move_one(args.path, self._need_destination(args), args.overwrite)
        return {"source": src, "destination": dst}

    def _op_copy(self, args: FileOpsArgs) -> dict[str, Any]:
        destination = self._need_destination(args)
        with self.ws.resolve(args.path) as src:
            st = src.lstat()
            if st is None:
                raise PathError("missing", f"{args.path!r} does not exist")
            source_name = src.name if src.name != "." else os.path.basename(self.ws.root)
        with self._destination(destination, source_name, args.overwrite) as dst:
            dst_rel = dst.rel
        if not stat.S_ISDIR(st.st_mode):
            self._copy_file(args.path, dst_rel)
            return {"source": src.rel, "destination": dst_rel, "files": 1}
        if dst_rel == src.rel or dst_rel.startswith(src.rel.rstrip("/") + "/") or src.rel == ".":
            raise ValidationFailed(self.NAME, "destination: cannot copy a directory into itself")
        copied = 0
        with self.ws.open_dir(args.path) as (fd, where):
            for n, (sub, name, entry) in enumerate(_walk(fd, True, where)):
                if n >= _MAX_TREE_ENTRIES:
                    raise ExecutionFailed(self.NAME, f"directory has more than {_MAX_TREE_ENTRIES} entries")
                rel = _join(sub, name)
                if stat.S_ISDIR(entry.st_mode):
                    self._op_mkdir(FileOpsArgs(operation="mkdir", path=f"{dst_rel}/{rel}"))
                elif stat.S_ISREG(entry.st_mode):
                    self._copy_file(f"{src.rel}/{rel}", f"{dst_rel}/{rel}")
                    copied += 1
        self._op_mkdir(FileOpsArgs(operation="mkdir", path=dst_rel))
        return {"source": src.rel, "destination": dst_rel, "files": copied}

    def _copy_file(self, source: str, destination: str) -> None:
        cap = self.config.max_write_bytes
        with self.ws.open_regular(source) as (fd, _):
            data = read_limited(fd, cap)
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if len(data) > cap:
            raise ExecutionFailed(self.NAME, f"{source!r} is larger than the {cap}-byte copy limit")
        atomic_write(self.ws, destination, data, create_dirs=True, mode=mode)

    def _op_batch_move(self, args: FileOpsArgs) -> dict[str, Any]:
        if not args.moves:
            raise ValidationFailed(self.NAME, "moves: batch_move needs at least one {source, destination}")
        done: list[tuple[str, str]] = []
        try:
            for move in args.moves:
                done.append(self._move_one(move.source, move.destination, args.overwrite))
        except BaseException as exc:
            for src, dst in reversed(done):
                self._move_one(dst, src, False)
            failed = args.moves[len(done)]
            raise ExecutionFailed(
                self.NAME,
                f"move {failed.source!r} → {failed.destination!r} failed ({exc}); "
                f"the {len(done)} earlier move(s) were undone, nothing changed",
            ) from None
        return {"moved": [{"source": s, "destination": d} for s, d in done]}

    def _op_organize(self, args: FileOpsArgs) -> dict[str, Any]:
        plan: list[tuple[str, str]] = []
        skipped: list[dict[str, str]] = []
        with self.ws.open_dir(args.path) as (fd, rel):
            names = sorted(e.name for e in os.scandir(fd) if e.is_file(follow_symlinks=False))
        for name in names:
            if name.startswith("."):
                continue
            ext = os.path.splitext(name)[1].lower().lstrip(".") or "no_extension"
            source, destination = _join(rel, name), _join(rel, f"{ext}/{name}")
            if self.ws.is_protected(source):
                skipped.append({"path": source, "reason": "protected path"})
                continue
            call = current_call()
            move = {"operation": "move", "path": source, "destination": destination}
            if call is not None and _RANK[call.permits(self.NAME, move)] > _RANK[call.decision]:
                skipped.append({"path": source, "reason": "the permission policy does not allow moving it"})
                continue
            plan.append((source, destination))
        moved = []
        if not args.dry_run:
            for source, destination in plan:
                try:
                    moved.append(self._move_one(source, destination, False))
                except (PathError, OSError) as exc:
                    skipped.append({"path": source, "reason": str(exc)})
        return {
            "path": rel,
            "dry_run": args.dry_run,
            "moves": [{"source": s, "destination": d} for s, d in (plan if args.dry_run else moved)],
            "skipped": skipped,
        }


def _matcher(pattern: str | None) -> Any:
    if pattern is None:
        return None
    regex = glob_regex(pattern)
    if "/" in pattern:
        return lambda path: regex.match(path) is not None
    return lambda path: regex.match(path.rsplit("/", 1)[-1]) is not None


_INTERNAL = frozenset(ProtectedPaths.INTERNAL)


def _walk(fd: int, recursive: bool, rel: str) -> Any:
    """Yield (relative dir, name, lstat) for the entries under ``fd``; symlinks are listed, never followed.

    ``rel``: where ``fd`` is in the workspace; at its root Aleph's own directories are left out.
    """
    skip = _INTERNAL if rel in ("", ".") else frozenset()
    if not recursive:
        for entry in sorted(os.scandir(fd), key=lambda e: e.name):
            if entry.name not in skip:
                yield "", entry.name, entry.stat(follow_symlinks=False)
        return
    for dirpath, dirs, files, dfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
        if dirpath == "." and skip:
            dirs[:] = [d for d in dirs if d not in skip]
        dirs.sort()
        sub = dirpath[2:] if dirpath.startswith("./") else ""
        for name in sorted(dirs + files):
            try:
                yield sub, name, os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue


def _read_at(root_fd: int, rel: str, limit: int) -> bytes | None:
    """Read a regular file below ``root_fd`` without following any symlink; None if it is not one."""
    parts = rel.split("/")
    fds = [root_fd]
    try:
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1])
    except OSError:
        return None
    finally:
        for extra in fds[1:]:
            os.close(extra)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_limited(fd, limit)[:limit]
    finally:
        os.close(fd)


def _join(base: str, name: str) -> str:
    if not base or base == ".":
        return name
    return f"{base}/{name}" if name else base


def _type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISREG(mode):
        return "file"
    return "other"
