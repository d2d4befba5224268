"""Registering and listing thousands of tools builds no model, schema or validator until one is needed (issue 34).

What is cheap to check still fails at once (a bad name, a duplicate, a missing annotation, a malformed
MCP schema); a model or schema that cannot be built fails, naming the tool, the first time it is needed.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import PydanticUserError

import aleph
from aleph import ToolRegistry
from aleph._contract._schema import _plainly_valid, schema_problems
from aleph._contract._tool import LazyArgs, ToolContractError

pytestmark = pytest.mark.anyio


def many_tools(n: int) -> list[aleph.AlephTool[Any]]:
    async def add(a: int, b: int = 1) -> int:
        return a + b

    return [aleph.tool(name=f"t_{i:04d}", description=f"Tool {i}.", idempotent=True)(add) for i in range(n)]


def test_decorating_and_registering_builds_no_model_and_listing_no_schema() -> None:
    tools = many_tools(50)
    registry = ToolRegistry()
    for tool in tools:
        registry.register(tool)
    definitions = registry.definitions()
    assert [d.name for d in definitions] == [f"t_{i:04d}" for i in range(50)]
    assert not any(d.schema_built for d in definitions)
    assert not any(vars(type(t))["Args"].built for t in tools)


async def test_a_tool_builds_its_model_and_schema_when_first_needed_and_keeps_them() -> None:
    [tool] = many_tools(1)
    registry = ToolRegistry()
    registry.register(tool)
    definition = registry.definitions()[0]
    assert definition.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert definition.schema_built
    assert definition.input_schema is definition.input_schema
    assert (await aleph.UnscopedToolService(registry).execute("t_0000", {"a": 2})).value == 3
    assert type(tool).Args is type(tool).Args


async def test_a_model_that_cannot_be_built_fails_naming_the_tool_when_first_needed() -> None:
    def connect(sock: socket.socket) -> str:
        """Use a socket (a type with no JSON Schema)."""
        return "never"

    tool = aleph.tool(connect)
    registry = ToolRegistry()
    registry.register(tool)  # registering stays cheap: nothing about the model is known yet
    with pytest.raises(ToolContractError, match=r"tool connect: its input model cannot be built"):
        registry.definitions()[0].input_schema  # noqa: B018 - the first read builds it
    result = await aleph.UnscopedToolService(registry).call("connect", {"sock": 1})
    assert not result.success
    assert result.error is not None and "tool connect: its input model cannot be built" in result.error


def test_what_is_cheap_to_check_still_fails_at_once() -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        aleph.tool(name="bad name", description="x")(lambda: 1)

    def untyped(a):  # type: ignore[no-untyped-def]
        """No annotation."""

    with pytest.raises(TypeError, match="needs a type annotation"):
        aleph.tool(untyped)
    registry = ToolRegistry()
    [tool] = many_tools(1)
    registry.register(tool)
    with pytest.raises(aleph.DuplicateTool):
        registry.register(tool)
    with pytest.raises(ValueError, match="not a valid Draft 2020-12 schema"):
        aleph.LoopTool("loop", "x", {"type": "object", "properties": {"a": {"type": "integr"}}})


def test_a_parameter_name_pydantic_treats_specially_is_built_and_refused_at_once() -> None:
    def private(_hidden: int) -> int:
        """A leading underscore pydantic refuses."""
        return _hidden

    with pytest.raises(PydanticUserError, match="leading underscores"):
        aleph.tool(private)


async def test_a_loop_tool_compiles_its_validator_on_its_first_call_and_still_refuses_bad_input() -> None:
    tool = aleph.LoopTool(
        "echo",
        "Echo.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        handler=lambda data: _echo(data),
    )
    assert tool._compiled is None
    registry = ToolRegistry()
    registry.register(tool)
    service = aleph.UnscopedToolService(registry)
    assert (await service.execute("echo", {"n": 4})).value == {"n": 4}
    assert tool._compiled is not None
    with pytest.raises(aleph.ValidationFailed, match="n: 'x' is not of type 'integer'"):
        await service.execute("echo", {"n": "x"})


async def _echo(data: dict[str, Any]) -> dict[str, Any]:
    return data


SCHEMAS: list[Any] = [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": ["string", "null"], "maxLength": 3}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["x", 1]}, "uniqueItems": True}}},
    {"type": "object", "additionalProperties": {"type": "number", "multipleOf": 0.5}},
    {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"const": 3}]}}, "x-extra": 1},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "description": "d", "title": "t"},
    # each of these is wrong somewhere: the fast path must leave it to the metaschema
    {"type": "object", "properties": {"a": {"type": "integr"}}},
    {"type": "object", "properties": {"a": {"type": []}}},
    {"type": "object", "properties": {"a": {"type": ["string", "string"]}}},
    {"type": "object", "required": ["a", "a"]},
    {"type": "object", "required": "a"},
    {"type": "object", "properties": {"a": {"minLength": -1}}},
    {"type": "object", "properties": {"a": {"minLength": 1.5}}},
    {"type": "object", "properties": {"a": {"minimum": "0"}}},
    {"type": "object", "properties": {"a": {"multipleOf": 0}}},
    {"type": "object", "properties": {"a": {"anyOf": []}}},
    {"type": "object", "properties": {"a": {"pattern": "("}}},
    {"type": "object", "properties": {"a": {"items": [{"type": "string"}]}}},
    {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}},
    {"type": "object", "properties": {"a": {"description": 3}}},
    {"type": "object", "properties": {"a": {"enum": "x"}}},
    {"type": "object", "properties": {"a": {"deprecated": "yes"}}},
    {"type": "object", "properties": {"a": {"uniqueItems": 1}}},
    {"type": "object", "properties": "a"},
    {"type": "object", "properties": {"a": 3}},
    {"type": "object", "additionalProperties": "no"},
    {"$schema": 3, "type": "object"},
    {"type": "object", "properties": {"a": {"minItems": True}}},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s)[:60] for s in SCHEMAS])
def test_the_fast_schema_check_only_ever_vouches_for_what_the_metaschema_accepts(schema: Any) -> None:
    try:
        Draft202012Validator.check_schema(schema)
        valid = True
    except SchemaError:
        valid = False
    if _plainly_valid(schema):
        assert valid
    assert (schema_problems(schema) == []) is valid


def test_the_common_tool_schemas_take_the_fast_path() -> None:
    assert all(_plainly_valid(s) for s in SCHEMAS[:6])
    assert all(_plainly_valid(t.input_schema()) for t in many_tools(1))  # what @aleph.tool generates


def test_lazy_args_is_what_a_decorated_function_gets() -> None:
    [tool] = many_tools(1)
    assert isinstance(vars(type(tool))["Args"], LazyArgs)
