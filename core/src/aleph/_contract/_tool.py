"""Typed tools (:class:`AlephTool`, :func:`tool`) and untyped ones (:class:`LoopTool`).

Both satisfy the :class:`Tool` protocol the registry stores: a name, declared
facts, a :class:`ToolDefinition` and ``call_json`` (validate, run, serialise).
"""

from __future__ import annotations

import copy
import inspect
import math
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, PydanticUserError, ValidationError
from pydantic_core import to_jsonable_python

from aleph._contract._schema import model_input_schema, schema_problems, validation_errors
from aleph._contract._types import (
    BUILTIN,
    DeferredSchema,
    ToolDefinition,
    ToolFacts,
    ToolOutput,
    ToolSource,
    is_flat_json,
)
from aleph._errors import ExecutionFailed, ValidationFailed

__all__ = [
    "AlephTool",
    "LazyArgs",
    "LoopTool",
    "Prepared",
    "Tool",
    "ToolArgs",
    "ToolContractError",
    "check_tool_name",
    "contract_problem",
    "facts_declared",
    "jsonable",
    "refused",
]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)

ArgsT = TypeVar("ArgsT", bound=BaseModel)


def check_tool_name(name: object) -> str:
    """Return ``name`` if it is a valid tool name (ASCII ``[A-Za-z0-9_-]{1,64}``), else raise ValueError."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(
            f"invalid tool name {name!r}: use 1-64 ASCII letters, digits, '_' or '-' "
            "(look-alike Unicode, spaces and dots are refused)"
        )
    return name


class ToolContractError(TypeError):
    """A tool breaks the tool contract (no description, a bad name, ``Args`` not a model); says which and why.

    The registry raises it when such a tool is registered; a plugin's registrar holds that one tool
    (reported by ``aleph plugins`` and ``aleph doctor``) and keeps the plugin's other tools.
    """


def contract_problem(tool: object) -> str | None:
    """Why ``tool`` cannot be registered (not a tool, or it breaks the contract), or None."""
    problem = getattr(type(tool), "_contract_problem", None)
    if isinstance(problem, str):
        return problem
    if not isinstance(tool, Tool):
        return f"{type(tool).__name__} is not a tool (an AlephTool, an @aleph.tool function or a LoopTool)"
    try:
        check_tool_name(tool.name)
    except ValueError as exc:
        return str(exc)
    return None


def _class_problem(cls: type[AlephTool[Any]]) -> str | None:
    if not isinstance(getattr(cls, "DESCRIPTION", None), str) or not cls.DESCRIPTION.strip():
        return f"tool {cls.NAME}: DESCRIPTION must be a non-empty string (the model reads it to choose the tool)"
    # Read without triggering a descriptor (inspect.getattr_static does the same, ten times slower).
    args = next((vars(k)["Args"] for k in cls.__mro__ if "Args" in vars(k)), None)
    if isinstance(args, LazyArgs):  # built on first use; a model that cannot be built fails then, by name
        return None
    if not (isinstance(args, type) and issubclass(args, BaseModel)):
        return f"tool {cls.NAME}: Args must be a pydantic model class"
    return None


class LazyArgs:
    """An ``Args`` class attribute whose model is built the first time it is read (then kept).

    ``@aleph.tool`` uses it: building a pydantic model costs about 0.4 ms, so decorating thousands of
    functions builds none until each tool is first called or its schema first read. A model that cannot
    be built raises :class:`ToolContractError` naming the tool at that first read.
    """

    __slots__ = ("_build", "_holder", "_lock", "_model", "_name")

    def __init__(self, name: str, build: Callable[[], type[BaseModel]]) -> None:
        self._name = name
        self._build = build
        self._model: type[BaseModel] | None = None
        self._holder: type | None = None
        self._lock = threading.Lock()

    def __set_name__(self, owner: type, name: str) -> None:
        self._holder = owner

    def __get__(self, obj: object, owner: type | None = None) -> type[BaseModel]:
        model = self._model
        if model is None:
            with self._lock:  # one model per tool, even when two threads read it first at once
                if self._model is None:
                    try:
                        self._model = self._build()
                    except Exception as exc:
                        raise ToolContractError(_unbuildable(self._name, exc)) from exc
                    if self._holder is not None:  # from now on a plain class attribute: no call per read
                        type.__setattr__(self._holder, "Args", self._model)
                model = self._model
        return model

    @property
    def built(self) -> bool:
        """Whether the model exists already."""
        return self._model is not None


@runtime_checkable
class Tool(Protocol):
    """What the registry stores. :class:`AlephTool` and :class:`LoopTool` both satisfy it."""

    @property
    def name(self) -> str:
        """The tool's registered name."""
        ...

    @property
    def facts(self) -> ToolFacts:
        """The tool's declared facts."""
        ...

    def definition(self, source: ToolSource = ...) -> ToolDefinition:
        """The definition a model sees."""
        ...

    async def call_json(self, input: Mapping[str, Any]) -> ToolOutput:
        """Validate ``input``, run the tool and return its serialisable output."""
        ...


class Prepared:
    """One call's input as the tool will run it: validated once, judged and run on the same value.

    ``value`` is what the tool's ``call`` receives (the ``Args`` model of an :class:`AlephTool`, the
    checked dict of a :class:`LoopTool`). ``arguments`` is its JSON form (coerced values, defaults
    filled in), computed when first asked for: rules, votes, prompts and the ledger judge that, so
    ``"yes"`` that pydantic turns into ``True`` is judged as ``True``.
    """

    __slots__ = ("_arguments", "_dump", "raw", "value")

    def __init__(
        self,
        raw: dict[str, Any],
        value: Any,
        *,
        arguments: dict[str, Any] | None = None,
        dump: Callable[[Any], dict[str, Any]] | None = None,
    ) -> None:
        self.raw = raw
        """The boundary-checked JSON input as the caller sent it."""
        self.value = value
        self._arguments = arguments
        self._dump = dump

    @classmethod
    def checked(cls, raw: dict[str, Any], value: Any, dump: Callable[[Any], dict[str, Any]]) -> Prepared:
        """``Prepared(raw, value, dump=dump)``, built without keyword parsing (a tool's ``prepare``, per call)."""
        self = object.__new__(cls)
        self.raw, self.value, self._arguments, self._dump = raw, value, None, dump
        return self

    @property
    def arguments(self) -> dict[str, Any]:
        """The validated arguments as JSON data (the form every gate judges)."""
        if self._arguments is None:
            dumped = None
            if self._dump is not None:
                try:
                    dumped = self._dump(self.value)
                except Exception:  # a value pydantic cannot serialise: judge what was sent
                    dumped = None
            self._arguments = dumped if isinstance(dumped, dict) else self.raw
        return self._arguments


def _dump_model(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


def facts_declared(tool: Tool) -> bool:
    """Whether ``tool`` states its facts explicitly instead of inheriting the fail-closed defaults."""
    if isinstance(tool, LoopTool):
        return tool.facts_declared
    return any("FACTS" in vars(cls) for cls in type(tool).__mro__ if cls is not AlephTool)


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown fields are refused and attribute docstrings become descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def _bad_input(name: str, exc: ValidationError) -> ValidationFailed:
    errors = validation_errors(exc)
    cause = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return ValidationFailed(name, cause, errors=errors)


def _not_an_object(name: str, input: object) -> ValidationFailed:
    return ValidationFailed(name, f"input must be a JSON object, got {type(input).__name__}")


class AlephTool(Generic[ArgsT]):
    """A typed tool. Subclass it and set ``NAME``, ``DESCRIPTION``, ``Args`` and ``call``.

    ``Args`` is a pydantic model (ideally a :class:`ToolArgs`); its JSON Schema is what the
    model sees. ``FACTS`` declares the tool's facts; leaving it out keeps the fail-closed
    defaults. ``Output`` is informational: whatever ``call`` returns is serialised to JSON.
    """

    NAME: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    Args: type[ArgsT]
    Output: ClassVar[Any] = Any
    FACTS: ClassVar[ToolFacts] = ToolFacts()

    runs_sync: ClassVar[bool] = False
    """Whether :meth:`run_sync` runs the tool on the calling thread (an ``@aleph.tool`` on a sync function)."""

    _schema_cache: ClassVar[dict[str, Any] | None] = None
    _contract_problem: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._schema_cache = None
        cls._contract_problem = None
        if inspect.isabstract(cls) or "NAME" not in cls.__dict__:
            return
        check_tool_name(cls.NAME)  # a tool is reported by its name, so a bad one is refused at once
        # Kept, not raised: the registry refuses the tool by name while the plugin's other tools load.
        cls._contract_problem = _class_problem(cls)

    @property
    def name(self) -> str:
        """The tool's name (``NAME``)."""
        return self.NAME

    @property
    def facts(self) -> ToolFacts:
        """The tool's declared facts (``FACTS``)."""
        return self.FACTS

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        """The JSON Schema of ``Args``, computed once per class.

        Raises :class:`ToolContractError` naming the tool when pydantic cannot build it (a parameter
        type with no JSON Schema, such as a socket).
        """
        if cls._schema_cache is None:
            try:
                cls._schema_cache = model_input_schema(cls.Args)
            except PydanticUserError as exc:
                raise ToolContractError(_unbuildable(cls.NAME, exc)) from exc
        return cls._schema_cache

    def definition(self, source: ToolSource = BUILTIN) -> ToolDefinition:
        """The definition a model sees; a tool that fails its contract raises :class:`ToolContractError`.

        The input schema is built when the definition's ``input_schema`` is first read (a listing that
        shows it, ``describe``, a client), not here: registering thousands of tools builds none. A schema
        that cannot be built raises :class:`ToolContractError` naming the tool at that first read.
        """
        if self._contract_problem is not None:
            raise ToolContractError(self._contract_problem)
        schema = self._schema_cache
        return ToolDefinition(
            self.NAME,
            self.DESCRIPTION,
            schema if schema is not None else DeferredSchema(type(self).input_schema),
            source,
            self.FACTS,
        )

    def parse(self, input: Mapping[str, Any]) -> ArgsT:
        """Validate ``input`` against ``Args``; a failure names each bad field."""
        if not isinstance(input, Mapping):
            raise _not_an_object(self.NAME, input)
        try:
            return self.Args.model_validate(input)
        except Exception as exc:
            raise refused(self.NAME, exc) from None

    def prepare(self, input: dict[str, Any]) -> Prepared:
        """Validate ``input`` (boundary-checked JSON) once, for the judge and the run alike."""
        try:
            model = self.Args.model_validate(input)
        except Exception as exc:
            raise refused(self.NAME, exc) from None
        return Prepared(input, model, dump=_dump_model)

    async def run_prepared(self, prepared: Prepared) -> ToolOutput:
        """Run :meth:`call` on the arguments :meth:`prepare` validated."""
        return ToolOutput(jsonable(self.NAME, await self.call(prepared.value)))

    async def call_json(self, input: Mapping[str, Any]) -> ToolOutput:
        """Validate ``input``, run :meth:`call` and return its output as JSON-compatible data."""
        result = await self.call(self.parse(input))
        return ToolOutput(jsonable(self.NAME, result))

    async def call(self, args: ArgsT) -> Any:
        """Run the tool on validated arguments. Raise a :class:`ToolError` to fail with a message."""
        raise NotImplementedError


def refused(name: str, exc: Exception) -> Exception:
    """What validating a tool's input raised, as the chokepoint reports it."""
    if isinstance(exc, ValidationError):
        return _bad_input(name, exc)
    if isinstance(exc, PydanticUserError):  # a deferred Args model that cannot be built: the tool's fault
        return ExecutionFailed(name, _unbuildable(name, exc))
    if isinstance(exc, ToolContractError):
        return ExecutionFailed(name, str(exc))
    return exc


def _unbuildable(name: str, exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"tool {name}: its input model cannot be built ({first}); give every parameter a JSON-compatible type"


_SCALARS = (str, int, float, bool)


def jsonable(name: str, value: Any) -> Any:
    """A tool's result as JSON-compatible data; :class:`ExecutionFailed` when JSON cannot carry it."""
    if value is None or isinstance(value, _SCALARS):  # a tuple: `str | int | ...` is rebuilt on every call
        return value
    if is_flat_json(value):
        return value  # already JSON data (the common flat result): nothing to convert
    try:
        return to_jsonable_python(value)
    except Exception as exc:  # a tool returned something JSON cannot carry
        raise ExecutionFailed(name, f"output is not JSON-serialisable: {exc}") from None


_Check = Callable[[Any], bool]
_ANNOTATIONS = frozenset(
    ("$schema", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly")
)
"""Keywords that never reject (``format`` too: the validator is built without a format checker)."""
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "number": lambda v: type(v) is int or (type(v) is float and math.isfinite(v)),
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
}
_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda v, b: v >= b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "exclusiveMaximum": lambda v, b: v < b,
}


def _any_type(tests: tuple[_Check, ...], v: Any) -> bool:
    return any(t(v) for t in tests)


def _has_keys(need: frozenset[str], v: Any) -> bool:
    return type(v) is not dict or need <= v.keys()


def _only_keys(known: frozenset[str], v: Any) -> bool:
    return type(v) is not dict or v.keys() <= known


def _extra_values(extra: _Check, known: frozenset[str], v: Any) -> bool:
    return type(v) is not dict or all(extra(x) for k, x in v.items() if k not in known)


def _items(item: _Check, v: Any) -> bool:
    return type(v) is not list or all(item(x) for x in v)


def _one_of(allowed: frozenset[str], v: Any) -> bool:
    return type(v) is str and v in allowed


def _length(kind: type[str | list[Any]], n: int, at_least: bool, v: Any) -> bool:
    return type(v) is not kind or (len(v) >= n if at_least else len(v) <= n)


def _bound(cmp: Callable[[Any, Any], bool], b: float, v: Any) -> bool:
    return type(v) not in (int, float) or (math.isfinite(v) and cmp(v, b))


def _fast_check(schema: Any) -> _Check | None:
    """A plain-Python acceptor for the common subset of JSON Schema, or None when ``schema`` leaves it.

    Validating with jsonschema costs tens of microseconds per call even on valid input; MCP
    schemas are mostly objects of typed properties. The acceptor is conservative: it answers True
    only when jsonschema would accept, and False whenever in doubt (a value of a non-JSON Python
    type, a keyword outside the subset fails compilation), so jsonschema still decides every rejection.
    """
    if schema is True:
        return lambda v: True
    if not isinstance(schema, dict):
        return None
    checks: list[_Check] = []
    props: dict[str, _Check] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS or key == "format" or key.startswith("x-"):
            continue
        if key == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
                return None
            tests = [_TYPES[n] for n in names]
            checks.append(tests[0] if len(tests) == 1 else partial(_any_type, tuple(tests)))
        elif key == "properties" and isinstance(value, dict):
            for name, sub in value.items():
                compiled = _fast_check(sub)
                if compiled is None:
                    return None
                props[name] = compiled
        elif key == "required" and isinstance(value, list) and all(isinstance(n, str) for n in value):
            checks.append(partial(_has_keys, frozenset(value)))
        elif key == "additionalProperties":
            known = frozenset(schema.get("properties") or ())
            if value is False:
                checks.append(partial(_only_keys, known))
                continue
            extra = _fast_check(value)
            if extra is None:
                return None
            checks.append(partial(_extra_values, extra, known))
        elif key == "items" and isinstance(value, dict | bool):
            item = _fast_check(value) if value is not False else (lambda v: False)
            if item is None:
                return None
            checks.append(partial(_items, item))
        elif key == "enum" and isinstance(value, list) and value and all(type(x) is str for x in value):
            checks.append(partial(_one_of, frozenset(value)))
        elif key in ("minLength", "maxLength") and type(value) is int:
            checks.append(partial(_length, str, value, key == "minLength"))
        elif key in ("minItems", "maxItems") and type(value) is int:
            checks.append(partial(_length, list, value, key == "minItems"))
        elif key in _BOUNDS and type(value) in (int, float):
            checks.append(partial(_bound, _BOUNDS[key], value))
        else:
            return None
    if props:
        pairs = tuple(props.items())

        def properties(v: Any) -> bool:
            if type(v) is dict:
                for name, check in pairs:
                    if name in v and not check(v[name]):
                        return False
            return True

        checks.append(properties)

    def accepts(v: Any) -> bool:
        # A value of any other Python type (tuple, Decimal, a subclass) is left to jsonschema.
        kind = type(v)
        if kind not in _JSON_TYPES or (kind is dict and not all(type(k) is str for k in v)):
            return False
        for check in checks:
            if not check(v):
                return False
        return True

    return accepts


_JSON_TYPES = frozenset((dict, list, str, int, float, bool, type(None)))


class LoopTool:
    """An untyped tool: a name, a description, a raw JSON Schema and an async handler on a dict.

    Used for MCP and other dynamic tools. Input is validated with ``jsonschema`` (Draft 2020-12)
    before the handler runs. Pass ``handler`` or subclass and override :meth:`call`.
    """

    def __init__(
        self,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        handler: Callable[[dict[str, Any]], Awaitable[Any]] | None = None,
        *,
        facts: ToolFacts | None = None,
    ) -> None:
        self._name = check_tool_name(name)
        if not isinstance(description, str):
            raise TypeError(f"tool {name}: description must be a string")
        problems = schema_problems(dict(input_schema))
        if problems:
            raise ValueError(f"tool {name}: {'; '.join(problems)}")
        self.description = description
        self.input_schema: dict[str, Any] = dict(input_schema)
        self._facts = facts or ToolFacts()
        self.facts_declared = facts is not None
        self._handler = handler
        self.runs_sync = False  # handlers are async: the synchronous core hands a call to a runner
        # Compiled on the first call, not here: listing or registering thousands of tools builds none.
        self._compiled: tuple[_Check | None, Any] | None = None

    @property
    def name(self) -> str:
        """The tool's name."""
        return self._name

    @property
    def facts(self) -> ToolFacts:
        """The tool's declared facts."""
        return self._facts

    def definition(self, source: ToolSource = BUILTIN) -> ToolDefinition:
        """The definition a model sees."""
        return ToolDefinition(self._name, self.description, self.input_schema, source, self._facts)

    def validate(self, input: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``input`` against the schema; a failure names each bad field."""
        if not isinstance(input, Mapping):
            raise _not_an_object(self._name, input)
        data = dict(input)
        compiled = self._compiled
        if compiled is None:
            from jsonschema import Draft202012Validator  # imported on first use: `import aleph` stays light

            compiled = self._compiled = (_fast_check(self.input_schema), Draft202012Validator(self.input_schema))
        accepts, validator = compiled
        # The fast check only ever accepts; anything it cannot vouch for goes to jsonschema, which
        # alone decides a rejection and words its messages.
        if accepts is not None and accepts(data):
            return data
        errors = []
        for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
            where = ".".join(str(p) for p in err.absolute_path) or "(input)"
            errors.append({"field": where, "message": err.message})
        if errors:
            raise ValidationFailed(
                self._name, "; ".join(f"{e['field']}: {e['message']}" for e in errors), errors=errors
            )
        return data

    def prepare(self, input: dict[str, Any]) -> Prepared:
        """Check ``input`` (boundary-checked JSON) against the schema once, for the judge and the run alike."""
        data = self.validate(input)
        # The handler gets its own copy: what it does to its input never reaches what was judged and recorded.
        value = dict(data) if is_flat_json(data) else copy.deepcopy(data)
        return Prepared(input, value, arguments=data)

    async def run_prepared(self, prepared: Prepared) -> ToolOutput:
        """Run the handler on the dict :meth:`prepare` checked."""
        result = await self.call(prepared.value)
        if isinstance(result, ToolOutput):
            return result
        return ToolOutput(jsonable(self._name, result))

    async def call_json(self, input: Mapping[str, Any]) -> ToolOutput:
        """Validate ``input``, run the handler and return its output."""
        result = await self.call(self.validate(input))
        if isinstance(result, ToolOutput):
            return result
        return ToolOutput(jsonable(self._name, result))

    async def call(self, input: dict[str, Any]) -> Any:
        """Run the tool on a validated dict."""
        if self._handler is None:
            raise NotImplementedError(f"tool {self._name}: pass a handler or override call()")
        return await self._handler(input)
