"""``@aleph.tool``: a typed function (sync or async) as an :class:`~aleph.AlephTool`.

The function's docstring gives the description and, through ``Args:`` / ``:param:`` entries, the
parameter descriptions; its annotated parameters become the ``Args`` model.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, Literal, cast, get_type_hints, overload

import anyio.to_thread
import docstring_parser
from annotated_types import BaseMetadata
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic_core import PydanticUndefined, SchemaValidator

from aleph._contract._tool import AlephTool, LazyArgs, Prepared, ToolArgs, check_tool_name, jsonable, refused
from aleph._contract._types import ToolFacts, ToolOutput

__all__ = ["tool"]

_set = object.__setattr__
_PLAIN = frozenset((str, int, bool, type(None)))


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-, reST- or NumPy-style docstring into (summary, {param: description})."""
    if not doc or not doc.strip():
        return "", {}
    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        # Text that claims a section it does not hold (``Args:`` with nothing after it) is still a description.
        return inspect.cleandoc(doc), {}
    # A parameter description wrapped over several lines reads as one sentence in a JSON Schema.
    params = {p.arg_name: " ".join((p.description or "").split()) for p in parsed.params}
    return (parsed.description or "").strip(), params


class _FunctionArgs(ToolArgs):
    """The base of the ``Args`` model :func:`tool` builds from a function's signature.

    Parameter descriptions come from the function's docstring, so pydantic's attribute-docstring
    lookup (which tokenises the caller's whole source file, about 3 ms a tool) is off; the model
    itself is built on first use (:class:`~aleph._contract._tool.LazyArgs`) and its validator on the
    first validation or schema (``defer_build``).
    """

    model_config = ConfigDict(use_attribute_docstrings=False, defer_build=True)


def _args_model(
    fn: Callable[..., Any], name: str, hints: dict[str, Any], param_docs: Callable[[], dict[str, str]]
) -> type[BaseModel] | LazyArgs:
    """The ``Args`` model of ``fn``: its signature is checked now, the pydantic model built on first use.

    ``param_docs`` gives the docstring's parameter descriptions; it is called only when the model is
    built, so a tool that is registered and never listed or called does not parse its docstring's
    sections. A parameter name pydantic treats specially (leading ``_``, a ``BaseModel`` attribute)
    builds the model at once, so its error or warning reaches the decorator as before.
    """
    sig = inspect.signature(fn)
    params: list[tuple[str, Any, Any]] = []
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"tool {name}: parameter {pname!r} must be a plain or keyword parameter")
        if pname not in hints:
            raise TypeError(f"tool {name}: parameter {pname!r} needs a type annotation")
        params.append((pname, hints[pname], PydanticUndefined if param.default is param.empty else param.default))
    model_name = "".join(part.capitalize() for part in re.split(r"[_-]", name)) + "Args"

    def build() -> type[BaseModel]:
        docs = param_docs()
        fields: dict[str, Any] = {}
        for pname, hint, default in params:
            doc = docs.get(pname)
            fields[pname] = (hint, Field(default, description=doc) if doc else Field(default))
        model: type[BaseModel] = create_model(model_name, __base__=_FunctionArgs, **fields)
        return model

    if any(pname.startswith(("_", "model_")) or hasattr(BaseModel, pname) for pname, _, _ in params):
        return build()
    return LazyArgs(name, build)


def _fields_validator(model: type[BaseModel]) -> SchemaValidator | None:
    """A validator of ``model``'s fields alone (a dict out, defaults filled), or None when it is not plain.

    Validating into the model builds an instance on every call; a function's arguments need only the
    field values, so the same field schema and config validate into a dict at a quarter of the cost.
    A model whose schema is not a plain list of fields (a model validator, nested definitions) is
    validated as a model.
    """
    schema: Any = model.__pydantic_core_schema__
    if schema.get("type") != "model" or schema["schema"].get("type") != "model-fields":
        return None
    return SchemaValidator(schema["schema"], schema.get("config"))


def _serializes_plainly(model: type[BaseModel]) -> bool:
    """Whether ``model`` dumps (JSON mode, by alias) a str, int, bool or None field value as it is, under its name.

    True when nothing of the model's changes how a field is dumped: no alias, no excluded field, no field or
    model serializer, no computed field, and no annotation metadata other than plain constraints (``ge``,
    ``max_length``...), which a serializer could hide in.
    """
    decorators = model.__pydantic_decorators__
    if decorators.field_serializers or decorators.model_serializers or decorators.computed_fields:
        return False
    for name, info in model.model_fields.items():
        if info.alias not in (None, name) or info.serialization_alias not in (None, name) or info.exclude:
            return False
        if not all(isinstance(meta, BaseMetadata) for meta in info.metadata):
            return False
    return True


def _dump_plain(model: type[BaseModel], kwargs: dict[str, Any]) -> dict[str, Any]:
    """:func:`_dump_fields` of a model that serializes plainly: the values themselves when all are JSON scalars."""
    for value in kwargs.values():
        if type(value) not in _PLAIN:
            return _dump_fields(model, kwargs)
    return kwargs.copy()


def _dumper(model: type[BaseModel]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return partial(_dump_plain if _serializes_plainly(model) else _dump_fields, model)


def _dump_fields(model: type[BaseModel], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The judged JSON form of validated fields, exactly as ``model`` dumps it (its serializers, aliases).

    The fields go into a bare instance (what ``model_construct`` does, without re-checking defaults and
    extras, which validation did), which the model's own serializer then dumps.
    """
    instance = object.__new__(model)
    _set(instance, "__dict__", kwargs)
    _set(instance, "__pydantic_fields_set__", set(kwargs))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    dumped: dict[str, Any] = model.__pydantic_serializer__.to_python(instance, mode="json", by_alias=True)
    return dumped


class _FunctionTool(AlephTool[BaseModel]):
    """An :class:`AlephTool` made by :func:`tool` from a typed function."""

    _fn: ClassVar[Callable[..., Any]]
    _is_async: ClassVar[bool]
    _fields: ClassVar[tuple[SchemaValidator | None, Callable[[dict[str, Any]], dict[str, Any]]] | None] = None

    def prepare(self, input: dict[str, Any]) -> Prepared:
        """Validate ``input`` once into the function's keyword arguments (coerced, defaults filled in)."""
        fields = type(self)._fields
        if fields is None:
            try:
                model = self.Args
                fields = type(self)._fields = (_fields_validator(model), _dumper(model))
            except Exception:  # an Args model that cannot be built: the model path words the error
                return super().prepare(input)
        validator = fields[0]
        if validator is None:
            return super().prepare(input)
        try:
            kwargs = validator.validate_python(input)[0]
        except Exception as exc:
            raise refused(self.NAME, exc) from None
        return Prepared.checked(input, kwargs, fields[1])

    async def call(self, args: BaseModel | dict[str, Any]) -> Any:
        """Call the wrapped function with the validated arguments (the model, or its fields)."""
        kwargs = args if type(args) is dict else args.__dict__
        if self._is_async:
            return await self._fn(**kwargs)
        if self.FACTS.inline:
            return self._fn(**kwargs)
        return await anyio.to_thread.run_sync(partial(self._fn, **kwargs))

    async def run_prepared(self, prepared: Prepared) -> ToolOutput:
        """Run the function on the arguments :meth:`prepare` validated (one coroutine less than ``call``)."""
        if self._is_async:
            value = prepared.value
            result = await self._fn(**(value if type(value) is dict else value.__dict__))
            # A plain scalar is JSON already (the common read): no call to check it.
            return ToolOutput(result if type(result) in _PLAIN else jsonable(self.NAME, result))
        return ToolOutput(jsonable(self.NAME, await self.call(prepared.value)))

    def run_sync(self, prepared: Prepared) -> ToolOutput:
        """Run a sync function on the calling thread (the chokepoint's synchronous core calls it)."""
        value = prepared.value
        return ToolOutput(jsonable(self.NAME, self._fn(**(value if type(value) is dict else value.__dict__))))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, bypassing validation (handy in tests)."""
        return self._fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> AlephTool[BaseModel]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    requires_approval: bool = False,
    concurrent_safe: bool = False,
    max_duration_ms: int | None = None,
    tags: tuple[str, ...] | list[str] = (),
    inline: bool = False,
    requires_role: Literal["operator", "member", "guest"] | None = None,
    sink: bool = False,
    untrusted_output: str | None = None,
) -> Callable[[Callable[..., Any]], AlephTool[BaseModel]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    requires_approval: bool = False,
    concurrent_safe: bool = False,
    max_duration_ms: int | None = None,
    tags: tuple[str, ...] | list[str] = (),
    inline: bool = False,
    requires_role: Literal["operator", "member", "guest"] | None = None,
    sink: bool = False,
    untrusted_output: str | None = None,
) -> AlephTool[BaseModel] | Callable[[Callable[..., Any]], AlephTool[BaseModel]]:
    """Turn a typed function (sync or async) into an :class:`AlephTool`.

    The name defaults to the function's name, the description to its docstring's summary;
    ``Args:`` / ``:param:`` docstring entries become parameter descriptions. A sync function
    runs in a worker thread unless ``inline=True`` declares it cheap enough for the event loop.
    """
    facts = ToolFacts(
        idempotent=idempotent,
        requires_approval=requires_approval,
        concurrent_safe=concurrent_safe,
        max_duration_ms=max_duration_ms,
        tags=tuple(tags),
        inline=inline,
        requires_role=requires_role,
        sink=sink,
        untrusted_output=untrusted_output,
    )

    def build(func: Callable[..., Any]) -> AlephTool[BaseModel]:
        tool_name = check_tool_name(name or func.__name__)
        doc = func.__doc__
        if description:  # the docstring's parameter sections are read only when the Args model is built
            text = description
            param_docs: Callable[[], dict[str, str]] = lambda: _parse_docstring(doc)[1]  # noqa: E731
        else:
            text, params = _parse_docstring(doc)
            param_docs = lambda: params  # noqa: E731
        is_async = inspect.iscoroutinefunction(func)
        if inline and is_async:
            raise TypeError(f"tool {tool_name}: inline=True is for sync functions; async ones already run inline")
        hints = get_type_hints(func, include_extras=True)
        attrs = {
            "NAME": tool_name,
            "DESCRIPTION": text,
            "Args": _args_model(func, tool_name, hints, param_docs),
            # The output type as written, without Annotated extras (as the output schema always was).
            "Output": get_type_hints(func).get("return", Any) if "return" in hints else Any,
            "FACTS": facts,
            "_fn": staticmethod(func),
            "_is_async": is_async,
            "runs_sync": not is_async,
            "__doc__": func.__doc__,
            "__module__": func.__module__,
        }
        cls = cast("type[_FunctionTool]", type(f"{tool_name}_tool", (_FunctionTool,), attrs))
        if not text:  # held by the registry like any tool that breaks the contract
            cls._contract_problem = f"tool {tool_name}: give it a docstring or a description"
        instance: AlephTool[BaseModel] = cls()
        return instance

    if fn is not None:
        return build(fn)
    return build
