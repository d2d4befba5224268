"""The configuration reference, generated from the configuration models' own field docstrings.

``read_config_guide`` returns it and ``docs/configuration.md`` is this text (a test holds them equal),
so the reference a model reads and the one a human reads have one source.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

import aleph
from aleph_admin._state import ModelsConfig

__all__ = ["config_guide", "sections"]

_HEADER = """# Configuration reference

Generated from the configuration models (`python -m aleph_admin guide > docs/configuration.md`); the
`read_config_guide` tool returns the same text. Files: the user file (`~/.config/aleph/config.toml`),
the project `aleph.toml`, then the managed file `<data_dir>/managed/config.toml` that Aleph's own tools
write (see docs/admin.md), then `ALEPH__SECTION__KEY` environment overrides.
"""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


def _type_text(annotation: Any) -> str:
    text = repr(annotation) if not isinstance(annotation, type) else annotation.__name__
    return text.replace("typing.", "").replace("aleph._config.", "")


def _table(prefix: str, model: type[BaseModel], out: list[str], depth: int = 0) -> None:
    out.append(f"\n{'#' * min(2 + depth, 4)} `[{prefix}]`\n")
    if model.__doc__:
        out.append(" ".join(model.__doc__.split()) + "\n")
    nested = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        inner = _model_of(annotation)
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is dict and len(args) == 2 and _model_of(args[1]) is not None:
            nested.append((f"{prefix}.{name}.<name>", _model_of(args[1])))
            continue
        if inner is not None:
            nested.append((f"{prefix}.{name}", inner))
            continue
        default = info.get_default(call_default_factory=True)
        doc = " ".join((info.description or "").split())
        out.append(f"- `{name}` ({_type_text(annotation)}, default `{default!r}`): {doc}")
    for sub_prefix, sub in nested:
        assert sub is not None
        _table(sub_prefix, sub, out, depth + 1)


def sections() -> dict[str, type[BaseModel]]:
    """Top-level section → model: core's sections, then this family's ``[models]``."""
    out: dict[str, type[BaseModel]] = {}
    for name, info in aleph.AlephConfig.model_fields.items():
        model = _model_of(info.annotation)
        args = typing.get_args(info.annotation)
        if model is None and typing.get_origin(info.annotation) is dict and len(args) == 2:
            model = _model_of(args[1])
            name = f"{name}.<name>"
        if model is not None:
            out[name] = model
    out["models"] = ModelsConfig
    return out


def config_guide(section: str | None = None) -> str:
    """The reference as markdown (one section's when ``section`` names one)."""
    out = [_HEADER]
    found = False
    for name, model in sections().items():
        if section is None or name.split(".", 1)[0] == section:
            _table(name, model, out)
            found = True
    if not found:
        names = ", ".join(sorted({n.split(".", 1)[0] for n in sections()}))
        raise aleph.ExecutionFailed("read_config_guide", f"no section {section!r}; sections: {names}")
    return "\n".join(out).rstrip() + "\n"
