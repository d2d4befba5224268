"""The per-request discovery tools: ``tool_search``, ``get_tool_schema`` and ``session_set_mode``.

They are bound to the request's own :class:`ScopedToolService`, so they see exactly what that
caller may see: a tool hidden by a deny rule or outside the agent's allow-set is never returned,
named or suggested (stricter than the reference, whose search corpus is the raw registry).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from aleph._contract._names import suggest_candidates
from aleph._contract._registry import RegisteredTool, ToolRegistry
from aleph._contract._types import BUILTIN, ToolDefinition, ToolFacts, ToolOutput, ToolSource
from aleph._discovery._disclosure import MODES
from aleph._discovery._index import ToolIndex
from aleph._discovery._sessions import SessionStore
from aleph._errors import ExecutionFailed, ValidationFailed

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

    from aleph._chokepoint._scoped import ScopedToolService

__all__ = [
    "DEFAULT_LIMIT",
    "GET_TOOL_SCHEMA",
    "MAX_LIMIT",
    "SESSION_SET_MODE",
    "TOOL_SEARCH",
    "RequestBinding",
    "clamp_limit",
    "request_tools",
    "search_tools",
]

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MAX_QUERY_CHARS = 1000

_READ_ONLY = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=2_000)

TOOL_SEARCH = ToolDefinition(
    "tool_search",
    "Search every tool available to you, including ones not listed yet, by what you want to do. "
    "Returns the best matches with their full input schemas; matching tools become listed from the next turn.",
    {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What you want to do, in a few words (any language), e.g. 'screenshot the page'.",
                "maxLength": MAX_QUERY_CHARS,
            },
            "limit": {
                "type": "integer",
                "description": f"How many tools to return, 1-{MAX_LIMIT} (default {DEFAULT_LIMIT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    BUILTIN,
    _READ_ONLY,
)

GET_TOOL_SCHEMA = ToolDefinition(
    "get_tool_schema",
    "Load the full input schema of a tool whose parameters are collapsed. Call it before calling that tool.",
    {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string", "description": "The exact tool name.", "maxLength": 200},
        },
        "required": ["tool_name"],
        "additionalProperties": False,
    },
    BUILTIN,
    _READ_ONLY,
)

SESSION_SET_MODE = ToolDefinition(
    "session_set_mode",
    "Switch this session's mode: chat (conversation; exec and write tools step back), work (the default) "
    "or code (patching and context search join the core tools). Takes effect from the next turn.",
    {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": list(MODES), "description": "chat, work or code."},
        },
        "required": ["mode"],
        "additionalProperties": False,
    },
    BUILTIN,
    ToolFacts(max_duration_ms=5_000),
)


def clamp_limit(limit: object) -> int:
    """``limit`` as an int in 1..20; None means the default (5)."""
    if limit is None:
        return DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        raise ValueError(f"limit must be an integer, got {type(limit).__name__}")
    return max(1, min(MAX_LIMIT, int(limit)))


class RequestBinding:
    """Ties the per-request tools to the service they were built for (set right after construction)."""

    def __init__(self, registry: ToolRegistry, index: Callable[[], ToolIndex], deferred: Any) -> None:
        self.registry = registry
        self.index = index
        self.deferred = deferred
        self.service: ScopedToolService | None = None

    def require(self) -> ScopedToolService:
        """The bound service (always set by the time a tool can be called)."""
        if self.service is None:
            raise RuntimeError("discovery tools used before their tool service was built")
        return self.service

    def visible_entry(self, name: str) -> RegisteredTool | None:
        """The entry for ``name`` if the bound caller may see it."""
        service = self.require()
        entry = service.extra_tools.get(name) or self.registry.get(name)
        if entry is None or not service._visible(entry):
            return None
        return entry


def search_tools(
    binding: RequestBinding, query: object, limit: object = None, *, promote: bool = True
) -> dict[str, Any]:
    """Run a search for the bound caller: ``{query, count, results: [{name, description, parameters, score}]}``."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("tool_search requires a non-empty `query`.")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"`query` is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    count = clamp_limit(limit)
    entries: dict[str, RegisteredTool] = {}

    def accept(name: str) -> bool:
        entry = binding.visible_entry(name)
        if entry is not None:
            entries[name] = entry
        return entry is not None

    hits = binding.index().search(query, count, accept)
    results = []
    for hit in hits:
        definition = entries[hit.name].definition
        results.append(
            {
                "name": definition.name,
                "description": definition.description,
                "parameters": definition.input_schema,
                "score": round(hit.score, 3),
            }
        )
    undefer = getattr(binding.deferred, "undefer", None)  # any deferred set that can promote (DeferredSet does)
    if promote and callable(undefer) and results:
        undefer([hit.name for hit in hits])
    return {"query": query, "count": len(results), "results": results}


def _schema_lookup(binding: RequestBinding, tool_name: object) -> dict[str, Any]:
    if not isinstance(tool_name, str) or not tool_name.strip():
        raise ValueError("get_tool_schema requires a non-empty `tool_name`.")
    entry = binding.visible_entry(tool_name)
    if entry is not None:
        return {"found": True, "name": entry.name, "parameters": entry.definition.input_schema}
    service = binding.require()
    names = {e.name for e in service._entries() if service._visible(e)}
    return {
        "found": False,
        "name": tool_name,
        "error": f"No tool named '{tool_name}'.",
        "suggestions": suggest_candidates(tool_name, sorted(names), 5),
    }


def _set_mode(binding: RequestBinding, sessions: SessionStore, mode: object) -> dict[str, Any]:
    turn = binding.require().turn
    if turn is None or not turn.session_key:
        raise RuntimeError(
            "session_set_mode needs a session: this request has no turn context with a session key, "
            "so there is no session whose mode could change."
        )
    previous = sessions.get(turn.session_key).mode
    knobs = sessions.set_mode(turn.session_key, str(mode))
    return {"mode": knobs.mode, "previous": previous, "note": "The new mode applies from the next turn."}


class _RequestTool:
    """A tool object bound to one request; input is checked against its (shared) schema validator."""

    __slots__ = ("_definition", "_run", "_validator")

    def __init__(
        self,
        definition: ToolDefinition,
        validator: Draft202012Validator,
        run: Callable[[dict[str, Any]], Awaitable[Any]],
    ) -> None:
        self._definition = definition
        self._validator = validator
        self._run = run

    @property
    def name(self) -> str:
        """The tool's name."""
        return self._definition.name

    @property
    def facts(self) -> ToolFacts:
        """The tool's declared facts."""
        return self._definition.facts

    def definition(self, source: ToolSource = BUILTIN) -> ToolDefinition:
        """The definition a model sees."""
        return self._definition

    async def call_json(self, input: Mapping[str, Any]) -> ToolOutput:
        """Validate ``input`` and run; a bad value raises :class:`ValidationFailed` naming the field."""
        name = self._definition.name
        if not isinstance(input, Mapping):
            raise ValidationFailed(name, f"input must be a JSON object, got {type(input).__name__}")
        data = dict(input)
        errors = [
            {"field": ".".join(str(p) for p in e.absolute_path) or "(input)", "message": e.message}
            for e in sorted(self._validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
        ]
        if errors:
            raise ValidationFailed(name, "; ".join(f"{e['field']}: {e['message']}" for e in errors), errors=errors)
        try:
            return ToolOutput(await self._run(data))
        except ValueError as exc:
            raise ValidationFailed(name, str(exc)) from None
        except RuntimeError as exc:
            raise ExecutionFailed(name, str(exc)) from None


_VALIDATORS: dict[str, Draft202012Validator] = {}


def _validator(definition: ToolDefinition) -> Draft202012Validator:
    """The (cached) validator of one discovery tool; jsonschema is imported on first use."""
    found = _VALIDATORS.get(definition.name)
    if found is None:
        from jsonschema import Draft202012Validator

        found = _VALIDATORS[definition.name] = Draft202012Validator(definition.input_schema)
    return found


def request_tools(binding: RequestBinding, sessions: SessionStore) -> dict[str, RegisteredTool]:
    """``tool_search``, ``get_tool_schema`` and ``session_set_mode`` bound to one request."""

    async def search(data: dict[str, Any]) -> Any:
        return search_tools(binding, data.get("query"), data.get("limit"))

    async def schema(data: dict[str, Any]) -> Any:
        return _schema_lookup(binding, data.get("tool_name"))

    async def set_mode(data: dict[str, Any]) -> Any:
        return _set_mode(binding, sessions, data.get("mode"))

    out: dict[str, RegisteredTool] = {}
    for definition, run in ((TOOL_SEARCH, search), (GET_TOOL_SCHEMA, schema), (SESSION_SET_MODE, set_mode)):
        tool = _RequestTool(definition, _validator(definition), run)
        out[definition.name] = RegisteredTool(tool, definition)
    return out
