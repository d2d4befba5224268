from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

import aleph
from aleph import AlephTool, LoopTool, ToolArgs, ToolFacts, ValidationFailed
from aleph.testing import strict_schema_problems


class Point(BaseModel):
    x: int
    y: int


class Shape(ToolArgs):
    name: str
    """Name of the shape."""
    points: list[Point] = Field(description="Vertices in order.")
    closed: bool = True


class ShapeTool(AlephTool[Shape]):
    NAME = "shape_area"
    DESCRIPTION = "Compute the area of a polygon."
    Args = Shape

    async def call(self, args: Shape) -> dict[str, Any]:
        pts = args.points
        area = abs(sum(a.x * b.y - b.x * a.y for a, b in zip(pts, pts[1:] + pts[:1], strict=True))) / 2
        return {"name": args.name, "area": area}


def test_schema_comes_from_args_with_docstrings_and_field_descriptions() -> None:
    schema = ShapeTool().definition().input_schema
    assert schema["properties"]["name"]["description"] == "Name of the shape."
    assert schema["properties"]["points"]["description"] == "Vertices in order."
    assert schema["required"] == ["name", "points"]


def test_nested_models_are_inlined_so_no_ref_dangles_and_objects_are_closed() -> None:
    schema = ShapeTool().definition().input_schema
    assert "$defs" not in schema
    assert "$ref" not in str(schema)
    assert schema["properties"]["points"]["items"]["additionalProperties"] is False
    assert strict_schema_problems(schema) == []
    Draft202012Validator.check_schema(schema)


def test_recursive_models_keep_a_resolvable_ref() -> None:
    class Node(BaseModel):
        label: str
        children: list[Node] = []

    class TreeArgs(ToolArgs):
        root: Node

    class TreeTool(AlephTool[TreeArgs]):
        NAME = "tree_size"
        DESCRIPTION = "Count nodes of a tree."
        Args = TreeArgs

    schema = TreeTool().definition().input_schema
    assert strict_schema_problems(schema) == []
    Draft202012Validator(schema).validate({"root": {"label": "a", "children": [{"label": "b"}]}})


def test_no_pydantic_titles_leak_into_the_schema_but_a_field_called_title_survives() -> None:
    class A(ToolArgs):
        title: str

    class T(AlephTool[A]):
        NAME = "doc_title"
        DESCRIPTION = "Set a title."
        Args = A

    schema = T().definition().input_schema
    assert "title" not in {k for k in schema if k != "properties"}
    assert "title" in schema["properties"]
    assert "title" not in schema["properties"]["title"]


@pytest.mark.anyio
async def test_validation_failure_names_each_bad_field_before_the_tool_runs() -> None:
    ran = []

    class A(ToolArgs):
        count: int
        label: str

    class T(AlephTool[A]):
        NAME = "count_it"
        DESCRIPTION = "Count."
        Args = A

        async def call(self, args: A) -> int:
            ran.append(args)
            return args.count

    with pytest.raises(ValidationFailed) as info:
        await T().call_json({"count": "many", "extra": 1})
    fields = {e["field"] for e in info.value.errors}
    assert fields == {"count", "label", "extra"}
    assert "count:" in str(info.value) and "label: Field required" in str(info.value)
    assert ran == []


@pytest.mark.anyio
async def test_non_object_input_is_refused() -> None:
    with pytest.raises(ValidationFailed, match="must be a JSON object"):
        await ShapeTool().call_json([1, 2])  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_output_is_serialised_deterministically() -> None:
    out = await ShapeTool().call_json({"name": "sq", "points": [{"x": 0, "y": 0}, {"x": 2, "y": 0}, {"x": 2, "y": 2}]})
    assert out.text == '{"area":2.0,"name":"sq"}'


def test_invalid_names_are_refused_at_definition() -> None:
    for bad in ("has space", "dot.name", "ｆｕｌｌ", "zero\u200bwidth", "", "x" * 65):
        with pytest.raises(ValueError, match="invalid tool name"):

            class Bad(AlephTool[ToolArgs]):
                NAME = bad
                DESCRIPTION = "Bad."
                Args = ToolArgs


def test_default_facts_fail_closed() -> None:
    facts = ToolFacts()
    assert (facts.idempotent, facts.concurrent_safe, facts.requires_approval, facts.max_duration_ms) == (
        False,
        False,
        False,
        None,
    )


# -- the decorator ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_decorator_builds_schema_from_signature_and_docstring() -> None:
    @aleph.tool(idempotent=True)
    async def greet(name: str, times: Annotated[int, Field(ge=1, le=5)] = 1) -> str:
        """Greet someone.

        Args:
            name: Who to greet.
            times: How many times.
        """
        return " ".join([f"hi {name}"] * times)

    d = greet.definition()
    assert d.description == "Greet someone."
    assert d.input_schema["properties"]["name"] == {"description": "Who to greet.", "type": "string"}
    assert d.input_schema["properties"]["times"]["maximum"] == 5
    assert d.input_schema["required"] == ["name"]
    assert d.facts.idempotent is True
    assert (await greet.call_json({"name": "bo", "times": 2})).value == "hi bo hi bo"
    with pytest.raises(ValidationFailed, match="times"):
        await greet.call_json({"name": "bo", "times": 9})


@pytest.mark.anyio
async def test_sync_tool_runs_in_a_worker_thread_unless_declared_inline() -> None:
    seen: dict[str, int] = {}

    @aleph.tool
    def slow(x: int) -> int:
        """Record the thread."""
        seen["slow"] = threading.get_ident()
        return x

    @aleph.tool(inline=True)
    def cheap(x: int) -> int:
        """Record the thread."""
        seen["cheap"] = threading.get_ident()
        return x

    loop_thread = threading.get_ident()
    assert (await slow.call_json({"x": 1})).value == 1
    assert (await cheap.call_json({"x": 2})).value == 2
    assert seen["cheap"] == loop_thread
    assert seen["slow"] != loop_thread


def test_decorator_requires_annotations_and_a_description() -> None:
    with pytest.raises(TypeError, match="needs a type annotation"):

        @aleph.tool
        def f(x) -> None:  # type: ignore[no-untyped-def]
            """Doc."""

    @aleph.tool
    def g(x: int) -> None:
        pass

    # Held where it is registered (a plugin's other tools still load), not where it is defined.
    with pytest.raises(TypeError, match="docstring or a description"):
        aleph.ToolRegistry().register(g)


def test_decorated_function_stays_callable() -> None:
    @aleph.tool
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    assert double(4) == 8


# -- LoopTool ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_loop_tool_validates_with_jsonschema_naming_fields() -> None:
    async def handler(data: dict[str, Any]) -> dict[str, Any]:
        return {"echo": data["msg"]}

    t = LoopTool(
        "echo_it",
        "Echo a message.",
        {
            "type": "object",
            "properties": {"msg": {"type": "string"}},
            "required": ["msg"],
            "additionalProperties": False,
        },
        handler,
        facts=ToolFacts(idempotent=True),
    )
    assert (await t.call_json({"msg": "x"})).value == {"echo": "x"}
    with pytest.raises(ValidationFailed) as info:
        await t.call_json({"msg": 3, "zz": 1})
    assert {e["field"] for e in info.value.errors} == {"msg", "(input)"}


def test_loop_tool_refuses_an_invalid_schema() -> None:
    with pytest.raises(ValueError, match="top-level schema"):
        LoopTool("bad_schema", "x", {"type": "string"})
    with pytest.raises(ValueError, match="Draft 2020-12"):
        LoopTool("bad_schema", "x", {"type": "object", "properties": 3})


def test_output_that_is_not_json_is_an_execution_failure() -> None:
    @aleph.tool(inline=True)
    def weird() -> object:
        """Return a set."""
        return object()

    with pytest.raises(aleph.ExecutionFailed, match="not JSON-serialisable"):
        asyncio.run(weird.call_json({}))


# -- LoopTool's fast acceptor never accepts what jsonschema refuses ------------------------------

_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"msg": {"type": "string", "minLength": 1, "maxLength": 5}},
        "required": ["msg"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
            "x": {"type": ["number", "null"]},
        },
        "additionalProperties": {"type": "boolean"},
    },
    {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2}
        },
    },
    {
        "type": "object",
        "properties": {"o": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}},
    },
    {"type": "object", "properties": {"p": {"pattern": "^a+$"}}},  # outside the fast subset: jsonschema decides
]
_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    9,
    10,
    3.0,
    2.5,
    float("nan"),
    "",
    "a",
    "aaa",
    "abcdef",
    "b",
    "c",
    [],
    ["a"],
    ["a", "b"],
    ["a", "b", "a"],
    ["c"],
    [1],
    {},
    {"k": "v"},
    {"k": 1},
    {"j": "v"},
    (1,),
]


def _inputs() -> list[dict[str, Any]]:
    keys = ["msg", "n", "x", "tags", "o", "p", "extra"]
    out: list[dict[str, Any]] = [{}]
    for key in keys:
        for value in _VALUES:
            out.append({key: value})
            out.append({key: value, "msg": "ok", "n": 1})
    return out


@pytest.mark.parametrize("schema", _SCHEMAS)
def test_loop_tool_validation_agrees_with_jsonschema(schema: dict[str, Any]) -> None:
    tool = LoopTool("check_me", "Check.", schema, facts=ToolFacts())
    reference = Draft202012Validator(schema)
    for data in _inputs():
        try:
            tool.validate(data)
            accepted = True
        except ValidationFailed:
            accepted = False
        assert accepted == reference.is_valid(data), (schema, data)
