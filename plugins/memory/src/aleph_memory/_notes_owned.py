"""Notes as one principal sees them: the one place the notes tools filter private notes by owner.

A note is shared by everyone who can use the notes folder unless its front matter says ``private: true``;
then it is its ``owner``'s (the agent that created it). Every notes tool reaches the folder and its
index through :class:`OwnedNotes`, built for the calling agent: another agent's private note is left out
of listings, searches, the link graph and the orientation index, and reading, changing, renaming or
deleting it answers exactly like a note that does not exist. Writing over it is refused (it is never
changed); creating a note at its path is refused like creating over any existing note.
"""

from __future__ import annotations

import threading
from typing import Any

from aleph_memory._confine import NotesDir, NotesPathError, split_path
from aleph_memory._notes import Note, NoteGraph, Notes, _build_graph, _resolve, parse_note

__all__ = ["OwnedNotes", "is_private", "private_meta"]

_TRUE = frozenset({"true", "yes", "1"})


def is_private(note: Note) -> bool:
    """Whether the note's front matter marks it private."""
    return note.meta.get("private", "").strip().lower() in _TRUE


def private_meta(owner: str) -> dict[str, str]:
    """The front-matter fields that make a note ``owner``'s alone."""
    return {"private": "true", "owner": owner}


def _key(path: str) -> str:
    """A note path as the graph keys it (no ``.md``, no surrounding slashes)."""
    bare = path.strip().strip("/")
    return bare[:-3] if bare.endswith(".md") else bare


class _Graphs:
    """Per-agent filtered graphs of one :class:`Notes`, rebuilt when the full graph changes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.source: NoteGraph | None = None
        self.views: dict[str, tuple[NoteGraph, frozenset[str]]] = {}


_CACHE: dict[int, _Graphs] = {}
_CACHE_LOCK = threading.Lock()


def _graphs(notes: Notes) -> _Graphs:
    with _CACHE_LOCK:
        found = _CACHE.get(id(notes))
        if found is None:
            found = _CACHE[id(notes)] = _Graphs()
        return found


class OwnedNotes:
    """:class:`Notes` for ``agent``: another agent's private notes do not exist here."""

    def __init__(self, notes: Notes, agent: str) -> None:
        self._notes = notes
        self.agent = agent
        self.folder = _OwnedFolder(notes.folder, self)
        self.max_notes = notes.max_notes

    @property
    def truncated(self) -> bool:
        """Whether the folder holds more notes than ``max_notes`` (the rest is not indexed)."""
        return self._notes.truncated

    def _view(self) -> tuple[NoteGraph, frozenset[str]]:
        """The graph without other agents' private notes, and the paths left out."""
        full = self._notes.sync()
        cache = _graphs(self._notes)
        with cache.lock:
            if cache.source is not full:
                cache.source, cache.views = full, {}
            hit = cache.views.get(self.agent)
            if hit is None:
                hidden = frozenset(
                    p for p, n in full.notes.items() if is_private(n) and n.meta.get("owner") != self.agent
                )
                graph = full if not hidden else _build_graph({p: n for p, n in full.notes.items() if p not in hidden})
                hit = cache.views[self.agent] = (graph, hidden)
            return hit

    def hidden(self, path: str) -> bool:
        """Whether ``path`` is another agent's private note.

        A note the graph does not hold (past ``max_notes``, or written since the last sync) is judged by its
        own front matter, read here: being left out of the index never makes a private note readable.
        """
        key = _key(path)
        graph, hidden = self._view()
        if key in hidden or key in graph.notes:
            return key in hidden
        try:
            note = parse_note(key, self._notes.folder.read(path))
        except (NotesPathError, UnicodeDecodeError, OSError):
            return False  # nothing readable there: every read of it fails the same way
        return is_private(note) and note.meta.get("owner") != self.agent

    def foreign_folder(self, folder: str) -> bool:
        """Whether ``folder`` holds notes and all of them are other agents' private notes."""
        graph, hidden = self._view()
        prefix = folder.strip("/") + "/"
        return any(h.startswith(prefix) for h in hidden) and not any(k.startswith(prefix) for k in graph.notes)

    def sync(self) -> NoteGraph:
        """The link graph of the notes this agent can see."""
        return self._view()[0]

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """Notes matching ``query`` that this agent can see, best first."""
        _, hidden = self._view()
        if not hidden:
            return self._notes.search(query, limit)
        hits = self._notes.search(query, limit + len(hidden))
        return [h for h in hits if h["path"] not in hidden][:limit]

    def resolve(self, target: str, graph: NoteGraph | None = None) -> str | None:
        """The visible note a link or argument names."""
        return _resolve(target, (graph or self.sync()).notes)


class _OwnedFolder:
    """The notes folder for one agent: another agent's private note reads and deletes as missing."""

    def __init__(self, folder: NotesDir, owner: OwnedNotes) -> None:
        self._folder = folder
        self._owner = owner
        self.rel = folder.rel

    def _missing(self, path: str) -> NotesPathError:
        return NotesPathError("missing", f"note {path!r} does not exist")  # NotesDir's own words

    def workspace_path(self, path: str) -> str:
        """The note's path relative to the workspace."""
        return self._folder.workspace_path(path)

    def read(self, path: str, **kw: Any) -> str:
        """The note's text; another agent's private note is missing."""
        if self._owner.hidden(path):
            raise self._missing(path)
        return self._folder.read(path, **kw)

    def exists(self, path: str, **kw: Any) -> bool:
        """Whether a note this agent can see is at ``path``."""
        return not self._owner.hidden(path) and self._folder.exists(path, **kw)

    def write(self, path: str, text: str, **kw: Any) -> None:
        """Write a note; another agent's private note is never written over."""
        if self._owner.hidden(path):
            split_path(path)
            raise NotesPathError("exists", f"note {path!r} already exists")
        self._folder.write(path, text, **kw)

    def delete(self, path: str) -> None:
        """Delete a note; another agent's private note is missing."""
        if self._owner.hidden(path):
            raise self._missing(path)
        self._folder.delete(path)

    def walk(self, *, limit: int) -> tuple[list[tuple[str, int, int]], bool]:
        """The visible note files (path, mtime, size)."""
        files, truncated = self._folder.walk(limit=limit)
        return [f for f in files if not self._owner.hidden(f[0])], truncated

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        """Sub-folders and visible notes under ``path``.

        A folder that holds notes and only other agents' private ones does not exist here either: it is
        left out of its parent's listing, and listing it answers like a missing folder (its name, such as
        ``acme-acquisition/``, would tell what the notes in it are about).
        """
        where = path.strip().strip("/")
        if where and self._owner.foreign_folder(where):
            name = where.rsplit("/", 1)[-1]
            raise NotesPathError("missing", f"folder {name!r} does not exist")  # NotesDir's own words
        folders, names = self._folder.listdir(path)
        visible = [n for n in names if not self._owner.hidden(f"{where}/{n}" if where else n)]
        shown = [f for f in folders if not self._owner.foreign_folder(f"{where}/{f}" if where else f)]
        return shown, visible
