"""A function tool's judged arguments are what pydantic's serializer dumps, also on the shortcut for plain models.

The chokepoint judges, fingerprints and records ``prepared.arguments`` (the validated fields dumped in JSON mode,
by alias). A model nothing of which changes how a field is dumped takes a shortcut (the values themselves);
every model here is dumped both ways and compared, including the ones the shortcut must decline.
"""

from __future__ import annotations

import enum
from datetime import date
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, PlainSerializer, computed_field, field_serializer, model_serializer

from aleph._contract._function import _dump_fields, _dumper, _serializes_plainly


class Color(enum.Enum):
    RED = "red"


class Plain(BaseModel):
    path: str
    count: int = 3
    force: bool = False
    note: str | None = None
    mode: Literal["a", "b"] = "a"
    size: Annotated[int, Field(ge=0, le=10)] = 1
    anything: Any = None


class Aliased(BaseModel):
    path: str = Field(alias="filePath")


class SerialAliased(BaseModel):
    path: str = Field(serialization_alias="p")


class Excluded(BaseModel):
    path: str
    secret: str = Field("", exclude=True)


class FieldSerialized(BaseModel):
    path: str

    @field_serializer("path")
    def _upper(self, value: str) -> str:
        return value.upper()


class ModelSerialized(BaseModel):
    path: str

    @model_serializer
    def _only(self) -> dict[str, Any]:
        return {"only": self.path}


class Computed(BaseModel):
    path: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def length(self) -> int:
        return len(self.path)


class Hidden(BaseModel):
    path: Annotated[str, PlainSerializer(lambda v: v[::-1])]


class Rich(BaseModel):
    when: date | None = None
    color: Color | None = None
    ratio: float = 0.5


@pytest.mark.parametrize(
    "model, plain",
    [
        (Plain, True),
        (Rich, True),
        (Aliased, False),
        (SerialAliased, False),
        (Excluded, False),
        (FieldSerialized, False),
        (ModelSerialized, False),
        (Computed, False),
        (Hidden, False),
    ],
)
def test_only_models_that_dump_values_as_they_are_take_the_shortcut(model: type[BaseModel], plain: bool) -> None:
    assert _serializes_plainly(model) is plain


@pytest.mark.parametrize(
    "model, kwargs",
    [
        (Plain, {"path": "a", "count": 2, "force": True, "note": None, "mode": "b", "size": 0, "anything": "x"}),
        (Plain, {"path": "é\n", "count": -1, "force": False, "note": "n", "mode": "a", "size": 9, "anything": [1]}),
        (Plain, {"path": "a", "count": 2, "force": True, "note": None, "mode": "b", "size": 0, "anything": {"k": 1}}),
        (Rich, {"when": date(2026, 12, 6), "color": Color.RED, "ratio": float("inf")}),
        (Rich, {"when": None, "color": None, "ratio": 1.0}),
        (Aliased, {"path": "a"}),
        (Excluded, {"path": "a", "secret": "s"}),
        (FieldSerialized, {"path": "a"}),
        (ModelSerialized, {"path": "a"}),
        (Computed, {"path": "abc"}),
        (Hidden, {"path": "abc"}),
    ],
)
def test_the_dump_is_the_serializers_on_both_paths(model: type[BaseModel], kwargs: dict[str, Any]) -> None:
    expected = _dump_fields(model, dict(kwargs))
    got = _dumper(model)(kwargs)
    assert got == expected
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
    assert got is not kwargs  # a copy: judging never shares the function's own arguments
