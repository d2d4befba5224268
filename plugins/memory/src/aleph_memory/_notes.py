"""Notes: Markdown files with ``[[links]]`` in the notes folder, their full-text index and link graph.

A note is ``<notes_dir>/<path>.md`` with an optional front matter block (``title``, ``tags``,
``created``, ``updated``). ``[[target]]``, ``[[target|label]]`` and ``[[target#heading]]`` link to
another note by its path or, when unique, by its file name; a line ``relation:: [[target]]`` gives
the link a type (``supersedes``, ``contradicts``, ...). The index and the graph follow the files:
each read compares modification times and sizes and re-reads only what changed, so notes edited
outside Aleph are seen too.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aleph_memory._confine import NotesDir, NotesPathError
from aleph_memory._db import Database
from aleph_memory._text import fts_query, terms

__all__ = ["Note", "NoteGraph", "Notes", "parse_note", "render_note"]

SCHEMA_FILE = "SCHEMA"
_LINK = re.compile(r"\[\[([^\[\]|#\n]{1,512})(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
_TYPED = re.compile(r"^\s*[-*]?\s*([A-Za-z][\w-]{0,39})::\s*(.*)$")


@dataclass(slots=True)
class Note:
    """A parsed note."""

    path: str
    title: str
    body: str
    tags: list[str] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)
    """(target as written, relation type) in order of appearance."""


def parse_note(path: str, text: str) -> Note:
    """Split front matter from the body and collect the note's links."""
    meta: dict[str, str] = {}
    body = text
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            for line in text[4:end].splitlines():
                key, sep, value = line.partition(":")
                if sep and key.strip():
                    meta[key.strip().lower()] = value.strip()
            body = text[end + 4 :].lstrip("\n")
    tags = [t.strip().strip("'\"") for t in meta.get("tags", "").strip("[]").split(",") if t.strip().strip("'\"")]
    title = meta.get("title") or _first_heading(body) or path.rsplit("/", 1)[-1]
    links: list[tuple[str, str]] = []
    for line in body.splitlines():
        typed = _TYPED.match(line)
        kind = typed.group(1).lower() if typed else "link"
        for match in _LINK.finditer(line):
            links.append((match.group(1).strip(), kind))
    return Note(path, title, body, tags, meta, links)


def render_note(
    title: str, body: str, tags: list[str], created: str, updated: str, extra: dict[str, str] | None = None
) -> str:
    """A note file's text: front matter (``extra`` fields last, e.g. ``private``/``owner``), then the body.

    Every value is folded onto its one line (any line break, ``\u2028`` included, becomes a space): a
    caller's title or tag must never start a front-matter line of its own, such as ``owner:``.
    """
    lines = ["---", f"title: {_one_line(title)}"]
    if tags:
        lines.append("tags: [" + ", ".join(_one_line(t.replace(",", " ")) for t in tags) + "]")
    lines += [f"created: {_one_line(created)}", f"updated: {_one_line(updated)}"]
    lines += [f"{k}: {_one_line(v)}" for k, v in (extra or {}).items()]
    lines += ["---", ""]
    return "\n".join(lines) + body.rstrip("\n") + "\n"


def _one_line(value: str) -> str:
    """``value`` with every run of whitespace (line breaks included) as one space."""
    return " ".join(value.split())


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def content_hash(text: str | None) -> str | None:
    """The guard hash of a file's text (SCHEMA.md writes)."""
    return hashlib.sha256(text.encode()).hexdigest() if text is not None else None


@dataclass(slots=True)
class NoteGraph:
    """Links between notes: ``edges[src]`` = [(dst, type)], ``back[dst]`` = [(src, type)], and unresolved links."""

    notes: dict[str, Note]
    edges: dict[str, list[tuple[str, str]]]
    back: dict[str, list[tuple[str, str]]]
    unresolved: dict[str, list[str]]

    def neighbours(self, path: str) -> list[tuple[str, str, str]]:
        """(other note, type, direction ``out`` / ``in``) for every link touching ``path``."""
        out = [(d, t, "out") for d, t in self.edges.get(path, [])]
        out += [(s, t, "in") for s, t in self.back.get(path, [])]
        return out

    def shortest_path(self, start: str, goal: str, max_depth: int) -> list[tuple[str, str, str]] | None:
        """The shortest chain of links from ``start`` to ``goal`` (either direction), within ``max_depth`` steps."""
        if start == goal:
            return []
        previous: dict[str, tuple[str, str, str]] = {}
        queue = deque([(start, 0)])
        seen = {start}
        while queue:
            node, depth = queue.popleft()
            if depth >= max_depth:
                continue
            for other, kind, direction in self.neighbours(node):
                if other in seen:
                    continue
                seen.add(other)
                previous[other] = (node, kind, direction)
                if other == goal:
                    steps = []
                    cur = goal
                    while cur != start:
                        prev, k, d = previous[cur]
                        steps.append((prev, cur, k if d == "out" else f"{k} (backlink)"))
                        cur = prev
                    return steps[::-1]
                queue.append((other, depth + 1))
        return None

    def component(self, path: str, limit: int) -> list[str]:
        """The notes linked to ``path`` directly or through others (its connected component), up to ``limit``."""
        seen = {path}
        queue = deque([path])
        while queue and len(seen) < limit:
            for other, _, _ in self.neighbours(queue.popleft()):
                if other not in seen and len(seen) < limit:
                    seen.add(other)
                    queue.append(other)
        return sorted(seen)


class Notes:
    """The notes folder, its index in the family's database, and the link graph (rebuilt when files change)."""

    def __init__(self, folder: NotesDir, db: Database, max_notes: int) -> None:
        self.folder = folder
        self.db = db
        self.max_notes = max_notes
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[str, int, int], ...] | None = None
        self._graph: NoteGraph | None = None
        self.truncated = False
        with db.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS notes_index (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER,"
                " title TEXT, tags TEXT, fts_rowid INTEGER)"
            )
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS notes_fts USING fts5(path UNINDEXED, title, body,"
                " tokenize='porter unicode61 remove_diacritics 2')"
            )

    def _load(self, path: str) -> Note | None:
        try:
            return parse_note(path, self.folder.read(path))
        except (NotesPathError, UnicodeDecodeError, OSError):
            return None

    def sync(self) -> NoteGraph:
        """Bring the index and graph up to date with the files; returns the graph."""
        with self._lock:
            files, self.truncated = self.folder.walk(limit=self.max_notes)
            files = [f for f in files if f[0] != SCHEMA_FILE]
            stamp = tuple(files)
            if stamp == self._stamp and self._graph is not None:
                return self._graph
            with self.db.write() as conn:
                known = {
                    r[0]: (r[1], r[2], r[3])
                    for r in conn.execute("SELECT path, mtime_ns, size, fts_rowid FROM notes_index")
                }
                present = {f[0] for f in files}
                for path, (_, _, rowid) in known.items():
                    if path not in present:
                        conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (rowid,))
                        conn.execute("DELETE FROM notes_index WHERE path = ?", (path,))
                for path, mtime, size in files:
                    old = known.get(path)
                    if old is not None and old[0] == mtime and old[1] == size:
                        continue
                    note = self._load(path)
                    if old is not None:
                        conn.execute("DELETE FROM notes_fts WHERE rowid = ?", (old[2],))
                    if note is None:
                        conn.execute("DELETE FROM notes_index WHERE path = ?", (path,))
                        continue
                    cur = conn.execute(
                        "INSERT INTO notes_fts (path, title, body) VALUES (?, ?, ?)", (path, note.title, note.body)
                    )
                    conn.execute(
                        "INSERT OR REPLACE INTO notes_index (path, mtime_ns, size, title, tags, fts_rowid)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (path, mtime, size, note.title, ",".join(note.tags), cur.lastrowid),
                    )
            notes = {p: n for p in (f[0] for f in files) if (n := self._load(p)) is not None}
            self._graph = _build_graph(notes)
            self._stamp = stamp
            return self._graph

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """Notes matching ``query`` (BM25 over title and body), best first."""
        self.sync()
        words = terms(query)
        if not words:
            return []
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT path, title, snippet(notes_fts, 2, '[', ']', '…', 24), bm25(notes_fts, 0, 3.0, 1.0) AS s"
                " FROM notes_fts WHERE notes_fts MATCH ? ORDER BY s LIMIT ?",
                (fts_query(words), limit),
            ).fetchall()
        return [{"path": p, "title": t, "excerpt": e, "score": round(-s, 4)} for p, t, e, s in rows]

    def resolve(self, target: str, graph: NoteGraph | None = None) -> str | None:
        """The note a link or argument names: an exact path, else a unique file name."""
        graph = graph or self.sync()
        return _resolve(target, graph.notes)


def _resolve(target: str, notes: dict[str, Note]) -> str | None:
    clean = target.strip().strip("/")
    if clean.endswith(".md"):
        clean = clean[:-3]
    if clean in notes:
        return clean
    lowered = clean.lower()
    by_name = [p for p in notes if p.rsplit("/", 1)[-1].lower() == lowered.rsplit("/", 1)[-1]]
    return by_name[0] if len(by_name) == 1 else None


def _build_graph(notes: dict[str, Note]) -> NoteGraph:
    edges: dict[str, list[tuple[str, str]]] = {}
    back: dict[str, list[tuple[str, str]]] = {}
    unresolved: dict[str, list[str]] = {}
    for path, note in notes.items():
        seen: set[tuple[str, str]] = set()
        for target, kind in note.links:
            dst = _resolve(target, notes)
            if dst is None:
                unresolved.setdefault(path, []).append(target)
                continue
            if dst == path or (dst, kind) in seen:
                continue
            seen.add((dst, kind))
            edges.setdefault(path, []).append((dst, kind))
            back.setdefault(dst, []).append((path, kind))
    return NoteGraph(notes, edges, back, unresolved)
