"""note_manage, note_orient, note_schema, note_graph_query and memory_browse (the notes folder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph_memory._base import FamilyTool, in_thread
from aleph_memory._confine import NotesPathError, split_path
from aleph_memory._guard import scan
from aleph_memory._items import iso, now_ms
from aleph_memory._notes import SCHEMA_FILE, Note, Notes, content_hash, parse_note, render_note
from aleph_memory._notes_owned import OwnedNotes, is_private, private_meta
from aleph_memory._provenance import annotate, call_info

__all__ = ["MemoryBrowseTool", "NoteGraphQueryTool", "NoteManageTool", "NoteOrientTool", "NoteSchemaTool"]

READ = aleph.ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=("notes", "filesystem"))
WRITE = aleph.ToolFacts(idempotent=False, max_duration_ms=30_000, tags=("notes", "filesystem"))
MAX_BODY_OUT = 4_000
MAX_RESPONSE = 24_000
MAX_GET = 64_000


def _fail(tool: str, exc: NotesPathError) -> aleph.ToolError:
    if exc.kind == "invalid":
        return aleph.ValidationFailed(tool, f"path: {exc}")
    return aleph.ExecutionFailed(tool, str(exc))


class NoteTool(FamilyTool):
    """A tool over the notes folder."""

    @property
    def notes(self) -> OwnedNotes:
        """The notes folder and its index as the calling agent sees them (others' private notes do not exist)."""
        notes: Notes = self.rt.notes
        return OwnedNotes(notes, call_info(self.NAME).agent)


class ManageArgs(aleph.ToolArgs):
    action: Literal["create", "update", "append", "get", "list", "query", "delete", "rename"]
    """What to do with notes."""
    path: str | None = Field(default=None, max_length=1024)
    """The note, as ``folder/name`` inside the notes folder (no ``.md``); for ``list``, a folder."""
    title: str | None = Field(default=None, max_length=300)
    """The note's title (create; update keeps the old one unless given)."""
    content: str | None = Field(default=None, max_length=16 * 1_048_576)
    """The Markdown body (create, update); ``[[other-note]]`` links to another note."""
    facts: list[str] | None = Field(default=None, max_length=1000)
    """Lines to append as bullet points (append)."""
    links: list[str] | None = Field(default=None, max_length=200)
    """Notes to link to, added as ``[[links]]`` (create, update, append)."""
    tags: list[str] | None = Field(default=None, max_length=50)
    """Tags (create; update replaces them when given)."""
    query: str | None = Field(default=None, max_length=2000)
    """What to search for (query)."""
    new_path: str | None = Field(default=None, max_length=1024)
    """The new ``folder/name`` (rename); links to the note are rewritten."""
    limit: int = Field(default=20, ge=1, le=200)
    """Results returned at most (list, query)."""
    private: bool = False
    """For create: the note is yours alone; other agents' tools see no such note."""


def _kept_meta(note: Note) -> dict[str, str]:
    """The privacy fields an update, append or rename carries over."""
    return private_meta(note.meta.get("owner", "")) if is_private(note) else {}


class NoteManageTool(NoteTool):
    NAME = "note_manage"
    DESCRIPTION = (
        "Create, update, append to, read, list, search, rename or delete Markdown notes in the workspace's notes"
        " folder. Notes link to each other with [[folder/name]]; renaming rewrites those links."
    )
    Args = ManageArgs
    FACTS = WRITE

    def subject_paths(self, input: Mapping[str, Any]) -> list[str]:
        """The note files a call names, workspace-relative, for path rules such as ``note_manage(notes/**)``."""
        out = []
        for key in ("path", "new_path"):
            value = input.get(key)
            if isinstance(value, str) and value.strip():
                try:
                    out.append(self.notes.folder.workspace_path(value))
                except NotesPathError:
                    out.append(f"{self.notes.folder.rel}/{value}")
        return out

    async def call(self, args: ManageArgs) -> dict[str, Any]:
        try:
            return await in_thread(self._run, args)
        except NotesPathError as exc:
            raise _fail(self.NAME, exc) from None

    def _need(self, value: Any, field: str, action: str) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            raise aleph.ValidationFailed(self.NAME, f"{field}: required for {action}")
        return value

    def _run(self, args: ManageArgs) -> dict[str, Any]:
        action = args.action
        folder = self.notes.folder
        limit = self.memory.config.max_note_chars
        if action in ("create", "update"):
            path = self._need(args.path, "path", action)
            split_path(path)
            body = self._need(args.content, "content", action) if action == "update" else (args.content or "")
            if len(body) > limit:
                raise aleph.ValidationFailed(self.NAME, f"content: {len(body)} chars, over the {limit}-char limit")
            body = _with_links(body, args.links or [])
            stamp = iso(now_ms()) or ""
            if action == "create":
                title = self._need(args.title, "title", action)
                extra = private_meta(self.notes.agent) if args.private else None
                folder.write(path, render_note(title, body, args.tags or [], stamp, stamp, extra), create=True)
            else:
                old = parse_note(path, folder.read(path))
                title = args.title or old.title
                tags = args.tags if args.tags is not None else old.tags
                created = old.meta.get("created", stamp)
                folder.write(path, render_note(title, body, tags, created, stamp, _kept_meta(old)), create=False)
            annotate(note=folder.workspace_path(path))
            related = [r for r in self.notes.search(f"{title} {body[:500]}", 6) if r["path"] != _bare(path)][:5]
            out: dict[str, Any] = {
                "success": True,
                "message": f"Note {_bare(path)!r} {action}d.",
                "note_path": _bare(path),
            }
            if related:
                out["related_notes"] = related
                out["message"] += " Related notes exist: link them with [[path]] if they belong together."
            return out
        if action == "append":
            path = self._need(args.path, "path", action)
            if not (args.facts or args.links):
                raise aleph.ValidationFailed(self.NAME, "facts: at least one fact or link is required for append")
            lines = [f"- {' '.join(f.split())}" for f in args.facts or [] if f.strip()]
            stamp = iso(now_ms()) or ""
            if folder.exists(path):
                old = parse_note(path, folder.read(path))
                body = _with_links(old.body.rstrip("\n") + "\n" + "\n".join(lines), args.links or [])
                text = render_note(old.title, body, old.tags, old.meta.get("created", stamp), stamp, _kept_meta(old))
            else:
                body = _with_links("\n".join(lines), args.links or [])
                text = render_note(args.title or path.rsplit("/", 1)[-1], body, args.tags or [], stamp, stamp)
            if len(text) > limit:
                raise aleph.ValidationFailed(self.NAME, f"facts: the note would be over the {limit}-char limit")
            folder.write(path, text)
            annotate(note=folder.workspace_path(path))
            return {
                "success": True,
                "message": f"Appended {len(lines)} fact(s) to {_bare(path)!r}.",
                "note_path": _bare(path),
            }
        if action == "get":
            path = self._need(args.path, "path", action)
            resolved = self.notes.resolve(path) or _bare(path)
            text = folder.read(resolved)
            note = parse_note(resolved, text)
            body = (
                note.body
                if len(note.body) <= MAX_GET
                else note.body[:MAX_GET] + f"…(+{len(note.body) - MAX_GET} chars truncated)"
            )
            return {"success": True, "note_path": resolved, "title": note.title, "tags": note.tags, "content": body}
        if action == "list":
            graph = self.notes.sync()
            prefix = (args.path or "").strip("/")
            rows = [p for p in graph.notes if not prefix or p == prefix or p.startswith(prefix + "/")]
            notes = [
                {"path": p, "title": graph.notes[p].title, "tags": graph.notes[p].tags} for p in rows[: args.limit]
            ]
            return {
                "success": True,
                "message": f"{len(rows)} note(s)",
                "notes": notes,
                "truncated": len(rows) > args.limit,
            }
        if action == "query":
            query = self._need(args.query, "query", action)
            hits = self.notes.search(query, args.limit)
            if not hits:
                return {
                    "success": True,
                    "message": f"No notes found matching {query!r}",
                    "notes": [],
                    "search": {"mode": "full-text"},
                }
            used = 0
            for hit in hits:
                try:
                    body = parse_note(hit["path"], folder.read(hit["path"])).body
                except (NotesPathError, UnicodeDecodeError):
                    continue
                if used < MAX_RESPONSE:
                    cut = body[:MAX_BODY_OUT]
                    hit["content"] = cut + (
                        f"…(+{len(body) - MAX_BODY_OUT} chars truncated)" if len(body) > MAX_BODY_OUT else ""
                    )
                    used += len(hit["content"])
            return {
                "success": True,
                "message": f"{len(hits)} note(s) match",
                "notes": hits,
                "search": {"mode": "full-text"},
            }
        if action == "delete":
            path = self._need(args.path, "path", action)
            folder.delete(path)
            annotate(note=folder.workspace_path(path))
            return {"success": True, "message": f"Note {_bare(path)!r} deleted."}
        path = self._need(args.path, "path", action)
        new = self._need(args.new_path, "new_path", action)
        if _bare(path) == _bare(new):
            raise aleph.ValidationFailed(self.NAME, "new_path: equals the current path")
        return self._rename(_bare(path), _bare(new))

    def _rename(self, path: str, new: str) -> dict[str, Any]:
        folder = self.notes.folder
        graph = self.notes.sync()
        if path not in graph.notes:
            raise NotesPathError("missing", f"note {path!r} does not exist")
        if folder.exists(new):
            raise NotesPathError("exists", f"note {new!r} already exists")
        text = folder.read(path)
        folder.write(new, text, create=True)
        folder.delete(path)
        rewritten = []
        for src, _ in graph.back.get(path, []):
            if src == path:
                continue
            old_text = folder.read(src)
            new_text = _rewrite_links(old_text, path, new)
            if new_text != old_text:
                folder.write(src, new_text, create=False)
                rewritten.append(src)
        annotate(note=folder.workspace_path(new), renamed_from=folder.workspace_path(path))
        return {
            "success": True,
            "message": f"Renamed {path!r} to {new!r}; rewrote links in {len(rewritten)} note(s).",
            "note_path": new,
            "rewritten": sorted(set(rewritten)),
        }


def _bare(path: str) -> str:
    clean = path.strip().strip("/")
    return clean[:-3] if clean.endswith(".md") else clean


def _with_links(body: str, links: list[str]) -> str:
    extra = [f"[[{_bare(link)}]]" for link in links if link.strip() and f"[[{_bare(link)}]]" not in body]
    return body.rstrip("\n") + ("\n\n" + " ".join(extra) if extra else "")


def _rewrite_links(text: str, old: str, new: str) -> str:
    import re

    name = old.rsplit("/", 1)[-1]
    pattern = re.compile(r"\[\[(" + re.escape(old) + "|" + re.escape(name) + r")((?:#[^\]|]*)?(?:\|[^\]]*)?)\]\]")
    return pattern.sub(lambda m: f"[[{new}{m.group(2)}]]", text)


class OrientArgs(aleph.ToolArgs):
    max_tokens: int = Field(default=2000, ge=100, le=65536)
    """Rough size of the snapshot (about four characters per token)."""


class NoteOrientTool(NoteTool):
    NAME = "note_orient"
    DESCRIPTION = (
        "Get oriented in the notes: the conventions in SCHEMA.md (section headings and their first lines), an"
        " index of notes by folder with titles, and the most recently changed notes."
    )
    Args = OrientArgs
    FACTS = READ

    async def call(self, args: OrientArgs) -> dict[str, Any]:
        return await in_thread(self._run, args)

    def _run(self, args: OrientArgs) -> dict[str, Any]:
        budget = args.max_tokens * 4
        graph = self.notes.sync()
        try:
            schema_text: str | None = self.notes.folder.read(SCHEMA_FILE)
        except NotesPathError:
            schema_text = None
        schema = _compact_schema(schema_text or "", budget // 3)
        # The conventions are handed to the model as guidance: scanned as memory is, whatever wrote the file.
        withheld = scan(schema) if schema else None
        if withheld is not None:
            schema = ""
        lines = ["# Index"]
        folder = None
        for path in sorted(graph.notes):
            top = path.rsplit("/", 1)[0] if "/" in path else ""
            if top != folder:
                folder = top
                lines.append(f"## {top or '(top level)'}")
            lines.append(f"- [[{path}]] — {graph.notes[path].title}")
        index = _cap("\n".join(lines), budget // 2)
        files, _ = self.notes.folder.walk(limit=self.memory.config.max_notes)
        recent = sorted((f for f in files if f[0] != SCHEMA_FILE), key=lambda f: -f[1])[:10]
        log = "\n".join(f"- {iso(m // 1_000_000)} {p}" for p, m, _ in recent)
        out: dict[str, Any] = {
            "schema": schema or None,
            "index": index,
            "recent_log": _cap(log, budget // 6),
            "notes": len(graph.notes),
        }
        if withheld is not None:
            out["schema_withheld"] = f"SCHEMA.md withheld by the threat scanner ({withheld})"
        return out


def _compact_schema(text: str, limit: int) -> str:
    out: list[str] = []
    take_next = False
    for line in text.splitlines():
        if line.startswith("#"):
            out.append(line)
            take_next = True
        elif take_next and line.strip():
            out.append(line)
            take_next = False
    return _cap("\n".join(out), limit)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 20)] + f"\n…(+{len(text) - limit + 20} chars)"


class SchemaArgs(aleph.ToolArgs):
    action: Literal["read", "write"] = "read"
    """``read`` SCHEMA.md, or ``write`` it."""
    content: str | None = Field(default=None, max_length=1_048_576)
    """The new SCHEMA.md text (write)."""
    expected_hash: str | None = Field(default=None, max_length=64, pattern=r"^[0-9a-f]{64}$")
    """The content_hash your read returned: the write is refused as a conflict if the file changed since."""


class NoteSchemaTool(NoteTool):
    NAME = "note_schema"
    DESCRIPTION = (
        "Read or write SCHEMA.md, the notes' conventions (folders, tags, how to link). A write with the hash"
        " from your read is refused as a conflict when someone changed the file in between."
    )
    Args = SchemaArgs
    FACTS = WRITE

    def subject_paths(self, input: Mapping[str, Any]) -> list[str]:
        """SCHEMA.md's workspace-relative path, for path rules."""
        return [self.notes.folder.workspace_path(SCHEMA_FILE)]

    async def call(self, args: SchemaArgs) -> dict[str, Any]:
        return await in_thread(self._run, args)

    def _run(self, args: SchemaArgs) -> dict[str, Any]:
        folder = self.notes.folder
        try:
            current: str | None = folder.read(SCHEMA_FILE)
        except NotesPathError as exc:
            if exc.kind != "missing":
                raise _fail(self.NAME, exc) from None
            current = None
        if args.action == "read":
            return {"content": current, "content_hash": content_hash(current), "conflict": False}
        if args.content is None:
            raise aleph.ValidationFailed(self.NAME, "content: required for write")
        if args.expected_hash is not None and args.expected_hash != content_hash(current):
            return {"content": None, "content_hash": content_hash(current), "conflict": True}
        if args.expected_hash is None and current is not None:
            return {
                "content": None,
                "content_hash": content_hash(current),
                "conflict": True,
                "message": "SCHEMA.md exists: read it and pass its content_hash as expected_hash",
            }
        folder.write(SCHEMA_FILE, args.content)
        annotate(note=folder.workspace_path(SCHEMA_FILE))
        return {"content": None, "content_hash": content_hash(args.content), "conflict": False}


class GraphArgs(aleph.ToolArgs):
    op: Literal["schema", "neighbors", "backlinks", "path", "community", "related"]
    """``schema``: counts; ``neighbors``: linked notes around ``target``; ``backlinks``: notes linking to it;
    ``path``: the shortest chain of links from ``target`` to ``to``; ``community``: its connected group;
    ``related``: notes sharing links or words with it."""
    target: str | None = Field(default=None, max_length=1024)
    """The note (``folder/name``); required for every op but schema."""
    to: str | None = Field(default=None, max_length=1024)
    """The other end (path)."""
    depth: int | None = Field(default=None, ge=1, le=6)
    """Steps to follow (neighbors 1-3, default 1; path 1-6, default 2)."""
    limit: int = Field(default=20, ge=1, le=200)
    """Nodes or results returned at most."""


class NoteGraphQueryTool(NoteTool):
    NAME = "note_graph_query"
    DESCRIPTION = (
        "Query the graph of [[links]] between notes: counts by folder and link type, a note's neighbours and"
        " backlinks, the shortest link path between two notes, its connected group, or related notes."
    )
    Args = GraphArgs
    FACTS = READ

    async def call(self, args: GraphArgs) -> dict[str, Any]:
        return await in_thread(self._run, args)

    def _run(self, args: GraphArgs) -> dict[str, Any]:
        graph = self.notes.sync()
        advisory: dict[str, Any] = {"applied_limit": args.limit}
        if args.op == "schema":
            folders: dict[str, int] = {}
            for path in graph.notes:
                key = path.rsplit("/", 1)[0] if "/" in path else ""
                folders[key] = folders.get(key, 0) + 1
            kinds: dict[str, int] = {}
            for edges in graph.edges.values():
                for _, kind in edges:
                    kinds[kind] = kinds.get(kind, 0) + 1
            return {
                "total_notes": len(graph.notes),
                "categories": sorted(folders.items(), key=lambda kv: (-kv[1], kv[0])),
                "relation_types": sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])),
                "unresolved_links": sum(len(v) for v in graph.unresolved.values()),
            }
        if not args.target:
            raise aleph.ValidationFailed(self.NAME, 'target: op requires a `target` note path ("folder/name")')
        target = self.notes.resolve(args.target, graph)
        if target is None:
            raise aleph.ExecutionFailed(self.NAME, f"no note {args.target!r} in the notes folder")
        if args.op == "neighbors":
            depth = min(args.depth or 1, 3)
            advisory["applied_depth"] = depth
            links: list[tuple[str, str, str]] = []
            frontier, seen = [target], {target}
            for _ in range(depth):
                nxt = []
                for node in frontier:
                    for other, kind, direction in graph.neighbours(node):
                        edge = (node, other, kind) if direction == "out" else (other, node, kind)
                        if edge not in links:
                            links.append(edge)
                        if other not in seen and len(seen) < args.limit + 1:
                            seen.add(other)
                            nxt.append(other)
                frontier = nxt
            nodes = [{"path": p, "link_count": len(graph.neighbours(p))} for p in sorted(seen - {target})]
            advisory["truncated"] = len(nodes) >= args.limit
            return {
                "target": target,
                "nodes": nodes[: args.limit],
                "edges": [{"from": a, "to": b, "relation": k} for a, b, k in links[: args.limit * 4]],
                "advisory": advisory,
            }
        if args.op == "backlinks":
            back = graph.back.get(target, [])
            advisory["truncated"] = len(back) > args.limit
            return {
                "target": target,
                "backlinks": [{"from": s, "relation": k} for s, k in back[: args.limit]],
                "advisory": advisory,
            }
        if args.op == "path":
            if not args.to:
                raise aleph.ValidationFailed(self.NAME, 'to: path op requires a `to` note path ("folder/name")')
            goal = self.notes.resolve(args.to, graph)
            if goal is None:
                raise aleph.ExecutionFailed(self.NAME, f"no note {args.to!r} in the notes folder")
            depth = args.depth or 2
            advisory["applied_depth"] = depth
            steps = graph.shortest_path(target, goal, depth)
            return {
                "target": target,
                "to": goal,
                "path_found": steps is not None,
                "path": [{"from": a, "to": b, "relation": k} for a, b, k in steps or []],
                "advisory": advisory,
            }
        if args.op == "community":
            group = graph.component(target, args.limit)
            advisory["truncated"] = len(group) >= args.limit
            return {"target": target, "community": group, "advisory": advisory}
        mine = {o for o, _, _ in graph.neighbours(target)}
        scores: dict[str, float] = {}
        for other in graph.notes:
            if other == target or other in mine:
                continue
            shared = mine & {o for o, _, _ in graph.neighbours(other)}
            if shared:
                scores[other] = float(len(shared))
        note = graph.notes[target]
        for hit in self.notes.search(f"{note.title} {note.body[:400]}", args.limit + 1):
            if hit["path"] != target and hit["path"] not in mine:
                scores[hit["path"]] = scores.get(hit["path"], 0.0) + 0.5
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: args.limit]
        return {"target": target, "related": [{"path": p, "score": s} for p, s in ranked], "advisory": advisory}


class BrowseArgs(aleph.ToolArgs):
    action: Literal["list", "read"] = "list"
    """``list`` a folder of notes, or ``read`` one note."""
    path: str | None = Field(default=None, max_length=1024)
    """The folder (list; empty = the top) or the note ``folder/name`` (read)."""


class MemoryBrowseTool(NoteTool):
    NAME = "memory_browse"
    DESCRIPTION = (
        "Browse the durable notes folder like a file tree: list folders and notes, or read one note by its"
        " path (folder/name)."
    )
    Args = BrowseArgs
    FACTS = READ

    async def call(self, args: BrowseArgs) -> dict[str, Any]:
        try:
            return await in_thread(self._run, args)
        except NotesPathError as exc:
            raise _fail(self.NAME, exc) from None

    def _run(self, args: BrowseArgs) -> dict[str, Any]:
        folder = self.notes.folder
        if args.action == "read":
            if not args.path:
                raise aleph.ValidationFailed(self.NAME, "path: required for 'read' action")
            return {"success": True, "message": f"Read note {_bare(args.path)}", "content": folder.read(args.path)}
        where = (args.path or "").strip("/")
        try:
            folders, notes = folder.listdir(where)
        except NotesPathError as exc:
            if exc.kind != "missing":
                raise
            return {"success": True, "message": f"No entries at {where or '/'}", "entries": []}
        entries = [f"{f}/" for f in folders] + notes
        return {"success": True, "message": f"Listed {len(entries)} entries under {where or '/'}", "entries": entries}
