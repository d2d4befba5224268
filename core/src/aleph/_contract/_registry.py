"""The shared tool registry: one name → one tool, whatever its source."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from aleph._contract._tool import AlephTool, LoopTool, Tool, check_tool_name
from aleph._contract._types import ToolDefinition, ToolFacts, ToolSource
from aleph._errors import DuplicateTool

__all__ = ["RegisteredTool", "ToolRegistry", "fold_tool_name"]


def fold_tool_name(name: str) -> str:
    """The canonical fold used to resolve alias spellings: lowercase, ``.`` → ``_``."""
    return name.lower().replace(".", "_")


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """A registry entry: the tool object with its definition, facts and source fixed at registration."""

    tool: Tool
    definition: ToolDefinition
    name: str = field(init=False)
    """The registered name."""
    facts: ToolFacts = field(init=False)
    """The tool's declared facts."""
    source: ToolSource = field(init=False)
    """Where the tool came from."""

    def __post_init__(self) -> None:
        # Copied from the definition once: every gate reads them on every call.
        object.__setattr__(self, "name", self.definition.name)
        object.__setattr__(self, "facts", self.definition.facts)
        object.__setattr__(self, "source", self.definition.source)


class ToolRegistry:
    """Name → tool for every source (builtin, plugin, MCP). Thread-safe; readers never block on writers' work.

    Names are ASCII ``[A-Za-z0-9_-]{1,64}``. Two names that differ only by case are refused, so
    an alias spelling (``File.Delete``, ``file.delete``) resolves to exactly one tool and every
    gate sees the canonical name. Every change bumps :attr:`generation` and notifies subscribers.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tools: dict[str, RegisteredTool] = {}
        self._folded: dict[str, str] = {}
        self._generation = 0
        self._sorted: tuple[int, list[ToolDefinition]] | None = None
        self._listeners: list[Callable[[ToolRegistry], None]] = []

    @property
    def generation(self) -> int:
        """A counter bumped on every registration change; caches key on it."""
        return self._generation

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name) is not None

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(list(self._tools.values()))

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._tools)

    def register(self, tool: Tool, *, source: ToolSource | None = None) -> RegisteredTool:
        """Add ``tool``. A name (or a case/separator variant of one) already taken raises :class:`DuplicateTool`."""
        source = source or ToolSource.builtin()
        name = check_tool_name(tool.name)
        if source.type == "mcp":
            if not name.startswith(f"{source.server_id}__"):
                raise ValueError(f"MCP tool {name!r} must be named '{source.server_id}__<tool>'")
        elif "__" in name:
            raise ValueError(f"tool name {name!r}: '__' is reserved for MCP tools ('<server>__<tool>')")
        # The protocol check inspects every member (tens of µs); the two tool classes pass without it.
        if not isinstance(tool, AlephTool | LoopTool) and not isinstance(tool, Tool):
            raise TypeError(f"tool {name}: {type(tool).__name__} does not implement the Tool protocol")
        definition = tool.definition(source)
        entry = RegisteredTool(tool, definition)
        folded = fold_tool_name(name)
        with self._lock:
            clash = self._tools.get(name) or self._tools.get(self._folded.get(folded, ""))
            if clash is not None:
                raise DuplicateTool(
                    name, existing_owner=clash.source.owner, new_owner=source.owner, existing_name=clash.name
                )
            self._tools[name] = entry
            self._folded[folded] = name
            self._changed()
        return entry

    def unregister(self, name: str) -> bool:
        """Remove the tool called ``name`` (exact name). Returns whether it existed."""
        with self._lock:
            entry = self._tools.pop(name, None)
            if entry is None:
                return False
            self._folded.pop(fold_tool_name(name), None)
            self._changed()
            return True

    def unregister_source(self, source: ToolSource) -> list[str]:
        """Remove every tool registered with ``source``; returns the removed names."""
        with self._lock:
            gone = [name for name, entry in self._tools.items() if entry.source == source]
            for name in gone:
                del self._tools[name]
                self._folded.pop(fold_tool_name(name), None)
            if gone:
                self._changed()
            return sorted(gone)

    def resolve(self, name: str) -> str | None:
        """The canonical registered name for ``name``: exact match first, then the case/``.``↔``_`` fold."""
        if name in self._tools:
            return name
        if not isinstance(name, str) or not name.isascii():
            return None
        return self._folded.get(fold_tool_name(name))

    def get(self, name: str) -> RegisteredTool | None:
        """The entry for ``name`` after resolution, or None."""
        canonical = self.resolve(name)
        return None if canonical is None else self._tools.get(canonical)

    def definitions(self) -> list[ToolDefinition]:
        """Every definition, sorted by name (cached per generation; do not mutate)."""
        cached = self._sorted
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        with self._lock:
            defs = [self._tools[name].definition for name in sorted(self._tools)]
            self._sorted = (self._generation, defs)
            return defs

    def subscribe(self, listener: Callable[[ToolRegistry], None]) -> Callable[[], None]:
        """Call ``listener(registry)`` after every change; returns a function that unsubscribes."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _changed(self) -> None:
        self._generation += 1
        for listener in list(self._listeners):
            listener(self)
