"""Merging configuration tables: layers over layers with the origin of every key, ``ALEPH__`` overrides.

Pure functions over TOML tables (no validation here: :mod:`aleph._config` validates the result).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

__all__ = ["copy_table", "drop_invalid", "env_overrides", "merge", "record_changes", "with_env"]


def merge(
    base: dict[str, Any], over: Mapping[str, Any], origin: str, origins: dict[str, str], prefix: str = ""
) -> None:
    """Merge ``over`` into ``base`` (tables recursively, other values replaced), naming ``origin`` for each key."""
    for key, value in over.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value, origin, origins, dotted + ".")
        else:
            base[key] = dict(value) if isinstance(value, Mapping) else value
            origins[dotted] = origin
            if isinstance(value, Mapping):
                _record_leaves(value, origin, origins, dotted + ".")


def _record_leaves(table: Mapping[str, Any], origin: str, origins: dict[str, str], prefix: str) -> None:
    for key, value in table.items():
        origins[f"{prefix}{key}"] = origin
        if isinstance(value, Mapping):
            _record_leaves(value, origin, origins, f"{prefix}{key}.")


def env_overrides(env: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """(origin, table) for every ``ALEPH__SECTION__KEY`` variable, read as a TOML value when it parses as one."""
    out = []
    for name in sorted(env):
        if not name.startswith("ALEPH__"):
            continue
        path = [p.lower() for p in name[len("ALEPH__") :].split("__") if p]
        if not path:
            continue
        raw = env[name]
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        tree: dict[str, Any] = {path[-1]: value}
        for part in reversed(path[:-1]):
            tree = {part: tree}
        out.append((f"env {name}", tree))
    return out


def with_env(
    merged: dict[str, Any], origins: dict[str, str], overrides: list[tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """``merged`` with the environment's ``overrides`` merged over it (in place); returns it."""
    for origin, tree in overrides:
        merge(merged, tree, origin, origins)
    return merged


def drop_invalid(merged: dict[str, Any], exc: ValidationError) -> bool:
    """Remove every key a validation error points at from ``merged``; whether anything was removed."""
    dropped = False
    for err in exc.errors(include_url=False):
        node: Any = merged
        path = [str(p) for p in err["loc"]]
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and path and path[-1] in node:
            del node[path[-1]]
            dropped = True
        elif len(path) > 1:  # an error on a whole table (a model validator): drop the table
            parent: Any = merged
            for part in path[:-2]:
                parent = parent.get(part) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and path[-2] in parent:
                del parent[path[-2]]
                dropped = True
    return dropped


def copy_table(table: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a TOML table (tables and arrays copied, values shared)."""
    return {
        k: copy_table(v) if isinstance(v, dict) else (list(v) if isinstance(v, list) else v) for k, v in table.items()
    }


def record_changes(before: Mapping[str, Any], after: Mapping[str, Any], origin: str, origins: dict[str, str]) -> None:
    """Name ``origin`` for every leaf the workspace file changed (so errors and ``origin()`` point at it)."""
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            sub: dict[str, str] = {}
            record_changes(old, value, origin, sub)
            origins.update({f"{key}.{k}": v for k, v in sub.items()})
        elif value != old:
            origins[key] = origin
