"""The value types of the tool contract: facts, sources, definitions, outputs and results."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, overload

__all__ = [
    "BUILTIN",
    "DeferredSchema",
    "ToolDefinition",
    "ToolFacts",
    "ToolOutput",
    "ToolResult",
    "ToolSource",
    "dumps_json",
]


_PLAIN = (str, int, float, bool, type(None))


def is_flat_json(value: Any) -> bool:
    """Whether ``value`` is a dict of string keys and plain values (strings, numbers, booleans, null).

    Such a dict is JSON data as it is, and a copy of it is out of reach of later changes to the original.
    """
    return type(value) is dict and all(type(k) is str and type(v) in _PLAIN for k, v in value.items())


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps_json(value: Any) -> str:
    """Serialise ``value`` deterministically: sorted keys, no insignificant whitespace, UTF-8 kept."""
    return _ENCODER.encode(value)  # json.dumps with these options would build an encoder per call


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What a tool declares about itself. The defaults fail closed.

    An unknown tool is treated as mutating (not idempotent), exclusive (not
    concurrent-safe) and without a budget of its own. Facts drive the exec
    tiers, retries, concurrency and the ledger; they never loosen a policy.
    """

    idempotent: bool = False
    """Calling twice with the same input has the same effect as once (read-only tools are idempotent)."""
    requires_approval: bool = False
    """The tool asks a human under every tier, even when a policy allows it."""
    concurrent_safe: bool = False
    """Calls may run in parallel with other calls."""
    max_duration_ms: int | None = None
    """The tool's own wall-clock budget; None means the runtime default."""
    tags: tuple[str, ...] = ()
    """Free-form labels (``"network"``, ``"filesystem"``) for policies and search."""
    inline: bool = False
    """A sync tool that is cheap enough to run on the event loop instead of a worker thread."""
    requires_role: Literal["operator", "member", "guest"] | None = None
    """The weakest caller role that may call the tool (operator > member > guest); None: any role.

    The chokepoint enforces it from the bound principal: a weaker caller is refused like a deny and
    does not see the tool listed.
    """

    sink: bool = False
    """Calls send data out or act for the user (messages, mail, payments, network egress, installs).

    The chokepoint judges a sink's arguments against the session's provenance (``[flow]``, docs/dataflow.md).
    """
    untrusted_output: str | None = None
    """The untrusted source the tool's output comes from (``"web"``, ``"e-mail"``); None: trusted output."""

    def __post_init__(self) -> None:
        if self.requires_role not in (None, "operator", "member", "guest"):
            raise ValueError(f"requires_role must be operator, member, guest or None, not {self.requires_role!r}")

    def to_json(self) -> dict[str, Any]:
        """The JSON form used in definitions and the CLI."""
        out: dict[str, Any] = {
            "idempotent": self.idempotent,
            "requires_approval": self.requires_approval,
            "concurrent_safe": self.concurrent_safe,
            "max_duration_ms": self.max_duration_ms,
            "tags": list(self.tags),
        }
        if self.requires_role is not None:
            out["requires_role"] = self.requires_role
        if self.sink:
            out["sink"] = True
        if self.untrusted_output is not None:
            out["untrusted_output"] = self.untrusted_output
        return out


@dataclass(frozen=True, slots=True)
class ToolSource:
    """Where a tool comes from: core itself, a plugin distribution, or an MCP server."""

    type: Literal["builtin", "plugin", "mcp"] = "builtin"
    plugin_id: str | None = None
    server_id: str | None = None

    @classmethod
    def builtin(cls) -> ToolSource:
        """A tool shipped by aleph-core."""
        return BUILTIN

    @classmethod
    def plugin(cls, plugin_id: str) -> ToolSource:
        """A tool registered by the plugin ``plugin_id``."""
        return cls("plugin", plugin_id=plugin_id)

    @classmethod
    def mcp(cls, server_id: str) -> ToolSource:
        """A tool offered by the MCP server ``server_id``."""
        return cls("mcp", server_id=server_id)

    @property
    def owner(self) -> str:
        """A human-readable owner label used in diagnostics."""
        if self.type == "plugin":
            return f"plugin {self.plugin_id!r}"
        if self.type == "mcp":
            return f"MCP server {self.server_id!r}"
        return "aleph-core"

    def to_json(self) -> dict[str, Any]:
        """Tagged-union form with tag field ``type``."""
        out: dict[str, Any] = {"type": self.type}
        if self.type == "plugin":
            out["plugin_id"] = self.plugin_id
        elif self.type == "mcp":
            out["server_id"] = self.server_id
        return out


BUILTIN = ToolSource("builtin")
"""The source of tools shipped by aleph-core."""


class DeferredSchema:
    """An input schema built when first read: ``build()`` returns the schema dict (called once, then kept).

    Pass one as a :class:`ToolDefinition`'s ``input_schema`` so that registering and listing thousands of
    tools builds no schema until a model, a client or a call needs it. An exception ``build`` raises
    reaches whoever reads the schema (a tool's contract error names the tool).
    """

    __slots__ = ("build",)

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self.build = build


class _InputSchema:
    """The ``input_schema`` field of :class:`ToolDefinition`: a dict, or a :class:`DeferredSchema` built on first read.

    A data descriptor on a dataclass field (the documented "descriptor-typed field"): the generated
    ``__init__`` stores through ``__set__``, every read goes through ``__get__``.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _InputSchema: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> dict[str, Any]: ...

    def __get__(self, obj: object, owner: type | None = None) -> dict[str, Any] | _InputSchema:
        if obj is None:
            raise AttributeError(self._slot)  # no class-level default: the field is required
        value = obj.__dict__[self._slot]
        if type(value) is DeferredSchema:
            value = obj.__dict__[self._slot] = value.build()
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: dict[str, Any] | DeferredSchema) -> None:
        obj.__dict__[self._slot] = value


@dataclass(frozen=True)
class ToolDefinition:
    """What a model is told about a tool: name, description and JSON Schema, plus facts and source.

    ``input_schema`` may be given as a :class:`DeferredSchema`; it is built the first time it is read.
    """

    name: str
    description: str
    input_schema: _InputSchema = _InputSchema()
    source: ToolSource = BUILTIN
    facts: ToolFacts = field(default_factory=ToolFacts)

    @property
    def schema_built(self) -> bool:
        """Whether the input schema exists already (False while a deferred one has not been read)."""
        return type(self.__dict__["_input_schema"]) is not DeferredSchema

    def __getstate__(self) -> dict[str, Any]:
        # A copy or a pickle carries the schema itself, never the function that builds it.
        return {**self.__dict__, "_input_schema": self.input_schema}

    def to_json(self) -> dict[str, Any]:
        """The full JSON form (CLI, ``aleph serve``, ``get_tool_schema``)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "source": self.source.to_json(),
            "facts": self.facts.to_json(),
        }

    def to_function(self) -> dict[str, Any]:
        """The provider-facing function form: ``{name, description, parameters}``."""
        return {"name": self.name, "description": self.description, "parameters": self.input_schema}


@dataclass(slots=True)
class ToolOutput:
    """A successful tool result. ``value`` is JSON-compatible; ``text`` is its deterministic JSON."""

    value: Any
    metadata: dict[str, Any] = field(default_factory=dict)
    _text: str | None = None

    @property
    def text(self) -> str:
        """The serialised output the model sees: a string is passed as is, anything else is JSON."""
        if self._text is None:
            self._text = self.value if isinstance(self.value, str) else dumps_json(self.value)
        return self._text


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What an agent loop feeds back to the model. Never an exception."""

    success: bool
    output: str | None = None
    error: str | None = None
    duration_ms: float = 0.0
    error_kind: str | None = None
    retryable: bool = False
    warnings: tuple[str, ...] = ()
    """Problems beside the result, e.g. the audit ledger could not record the call."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for logs and the CLI."""
        out: dict[str, Any] = {"success": self.success, "duration_ms": round(self.duration_ms, 3)}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.success:
            out["output"] = self.output
        else:
            out["error"] = self.error
            out["error_kind"] = self.error_kind
            out["retryable"] = self.retryable
        return out
