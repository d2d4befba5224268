"""JSON Schema for tool inputs: generated from pydantic models, shaped for strict function calling.

Providers' strict function-calling modes accept a subset of JSON Schema: every
object closes with ``additionalProperties: false`` and every ``$ref`` must
resolve. We inline non-recursive ``$defs`` (so nothing dangles when a provider
strips ``$defs``), keep the ones recursion needs, and drop pydantic's
auto-generated ``title`` keywords, which only cost tokens.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema

__all__ = [
    "MAX_INPUT_DEPTH",
    "check_input_bounds",
    "model_input_schema",
    "schema_problems",
    "validation_errors",
]

# Keywords whose value is a single subschema / a list of subschemas / a map of subschemas.
_SUB_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SUB_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")

MAX_INPUT_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in a tool input."""


class _Generator(GenerateJsonSchema):
    """pydantic's generator, with its core-schema-type → method table named once per class, not per schema.

    pydantic rebuilds that table (by introspecting a large Literal) in every generator's ``__init__``; that
    was about 40% of a tool's schema and so of registering it. Methods are still bound to each instance.
    """

    _method_names: ClassVar[tuple[tuple[Any, str], ...] | None] = None

    def build_schema_type_to_method(self) -> dict[Any, Any]:
        """The same table pydantic builds, from names looked up once."""
        names = type(self)._method_names
        if names is None:
            table = super().build_schema_type_to_method()
            type(self)._method_names = tuple((key, method.__name__) for key, method in table.items())
            return table
        return {key: getattr(self, name) for key, name in names}


def model_input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict-subset JSON Schema of ``model``'s input, built with pydantic's public API."""
    raw = model.model_json_schema(mode="validation", schema_generator=_Generator)
    defs: dict[str, Any] = raw.pop("$defs", {})
    keep: dict[str, Any] = {}

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            if name in stack:  # recursive: keep a resolvable reference
                if name not in keep:
                    keep[name] = None
                    keep[name] = walk(copy.deepcopy(defs[name]), stack)
                return {k: walk(v, stack) for k, v in node.items()}
            inlined = walk(copy.deepcopy(defs[name]), (*stack, name))
            extra = {k: walk(v, stack) for k, v in node.items() if k != "$ref"}
            return {**inlined, **extra}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _SUB_MAP and isinstance(value, dict):
                out[key] = {name: walk(sub, stack) for name, sub in value.items()}
            elif key in _SUB_ONE or key in _SUB_LIST:
                out[key] = walk(value, stack)
            else:
                out[key] = value
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out

    schema: dict[str, Any] = walk(raw, ())
    if keep:
        schema["$defs"] = keep
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def schema_problems(schema: Any) -> list[str]:
    """Why ``schema`` is not a usable tool input schema (empty list when it is)."""
    if not isinstance(schema, dict):
        return ["the input schema must be a JSON object"]
    if not _plainly_valid(schema):  # checking against the metaschema costs about 1 ms: only when in doubt
        from jsonschema import Draft202012Validator  # imported on first use: `import aleph` stays light
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            return [f"not a valid Draft 2020-12 schema: {exc.message}"]
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append('the top-level schema must have "type": "object"')
    return problems


_SIMPLE_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
_KNOWN_SCHEMAS = frozenset(
    (
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
    )
)


def _is_count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _unique_strings(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v) and len(set(v)) == len(v)


def _is_type(v: Any) -> bool:
    if type(v) is str:
        return v in _SIMPLE_TYPES
    return type(v) is list and bool(v) and _unique_strings(v) and all(x in _SIMPLE_TYPES for x in v)


_PLAIN_KEYWORDS: dict[str, Any] = {
    "type": _is_type,
    "required": _unique_strings,
    "enum": lambda v: type(v) is list,
    "const": lambda v: True,
    "default": lambda v: True,
    "examples": lambda v: type(v) is list,
    "title": lambda v: type(v) is str,
    "description": lambda v: type(v) is str,
    "$comment": lambda v: type(v) is str,
    "format": lambda v: type(v) is str,
    "$schema": lambda v: v in _KNOWN_SCHEMAS,
    "deprecated": lambda v: type(v) is bool,
    "readOnly": lambda v: type(v) is bool,
    "writeOnly": lambda v: type(v) is bool,
    "minLength": _is_count,
    "maxLength": _is_count,
    "minItems": _is_count,
    "maxItems": _is_count,
    "minProperties": _is_count,
    "maxProperties": _is_count,
    "uniqueItems": lambda v: type(v) is bool,
    "minimum": _is_number,
    "maximum": _is_number,
    "exclusiveMinimum": _is_number,
    "exclusiveMaximum": _is_number,
    "multipleOf": lambda v: _is_number(v) and v > 0,
}


def _plainly_valid(schema: Any, depth: int = 0) -> bool:
    """True only when ``schema`` is certainly a valid Draft 2020-12 schema; False means "ask the metaschema".

    Covers what tool schemas mostly are (objects of typed properties, arrays, enums, bounds, annotations)
    with exact JSON types; any other keyword, ``$ref`` or ``pattern`` (a regex to check) leaves it to jsonschema.
    """
    if type(schema) is bool:
        return True
    if type(schema) is not dict or depth > MAX_INPUT_DEPTH:
        return False
    for key, value in schema.items():
        check = _PLAIN_KEYWORDS.get(key)
        if check is not None:
            if not check(value):
                return False
        elif key == "properties":
            if type(value) is not dict or not all(_plainly_valid(sub, depth + 1) for sub in value.values()):
                return False
        elif key in ("items", "additionalProperties", "not"):
            if not _plainly_valid(value, depth + 1):
                return False
        elif key in ("anyOf", "oneOf", "allOf"):
            if type(value) is not list or not value or not all(_plainly_valid(sub, depth + 1) for sub in value):
                return False
        elif not key.startswith("x-"):
            return False
    return True


def validation_errors(exc: ValidationError) -> list[dict[str, str]]:
    """One ``{field, message}`` entry per bad field of a pydantic validation error."""
    out = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(input)"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unexpected field"
        elif err["type"] != "missing" and "input" in err and not isinstance(err["input"], dict | list):
            shown = repr(err["input"])
            message += f" (got {shown[:60]}{'…' if len(shown) > 60 else ''})"
        out.append({"field": loc, "message": message})
    return out


def check_input_bounds(value: Any, *, max_depth: int = MAX_INPUT_DEPTH, max_bytes: int = 1_000_000) -> str | None:
    """A reason when ``value`` nests deeper than ``max_depth`` or carries more than about ``max_bytes``.

    Iterative (no recursion limit); strings count by length, keys included, scalars as 8. It runs on
    every call, so it checks exact types (JSON gives dict/list/str) and falls back to isinstance.
    """
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > max_depth:
            return f"input nests deeper than {max_depth} levels"
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            size += len(key) if type(key) is str else 8
            kind = type(child)
            if kind is str:
                size += len(child)
            elif kind is dict or kind is list or isinstance(child, dict | list | tuple):
                push((child, depth + 1))
            else:
                size += len(child) if isinstance(child, str) else 8
        if size > max_bytes:
            return f"input is larger than {max_bytes} bytes"
    return None
