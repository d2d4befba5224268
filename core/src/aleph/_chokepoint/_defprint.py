"""An approval of an MCP tool binds the definition it was given under.

A grant fingerprint covers a tool's name and canonical arguments. An MCP server can change what a name
means at any time (``tools/list_changed`` with a new description, schema or annotations: a "rug pull"),
and the manager then re-gates the tool; a session or standing grant keyed by name and arguments alone
still covered the changed tool, so the human who approved the old definition was never asked about the
new one. The approval fingerprint of a tool from an MCP server therefore also covers the definition the
registry holds for it (description, input schema and the facts its annotations gave), so a grant never
outlives the definition it was shown. Tools of core and of installed plugins change only with the
installed code and keep their fingerprints (and the standing grants on file).

For the same reason an untyped tool's approval also binds where its arguments hold an explicit ``null``
(:func:`nulls_bound`): the server, not Aleph, decides what a ``null`` means there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aleph._contract._tool import AlephTool

if TYPE_CHECKING:
    from aleph._contract._registry import RegisteredTool

__all__ = ["definition_bound", "nulls_bound"]


def definition_bound(fingerprint: str, entry: RegisteredTool | None) -> str:
    """``fingerprint`` bound to ``entry``'s current definition when the tool comes from an MCP server."""
    if entry is None or entry.source.type != "mcp":
        return fingerprint
    definition = entry.definition
    facts = entry.facts
    shape = {
        "description": definition.description,
        "input_schema": definition.input_schema,
        "facts": [facts.idempotent, facts.requires_approval, facts.concurrent_safe, sorted(facts.tags)],
    }
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(f"{fingerprint}\x1fdefinition\x1f{text}".encode()).hexdigest()[:32]


def _null_paths(node: Any, path: list[Any], out: list[list[Any]]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if value is None:
                out.append([*path, str(key)])
            else:
                _null_paths(value, [*path, str(key)], out)
    elif isinstance(node, list | tuple):
        for index, value in enumerate(node):
            _null_paths(value, [*path, index], out)


def nulls_bound(fingerprint: str, entry: RegisteredTool | None, arguments: Mapping[str, Any]) -> str:
    """``fingerprint`` bound to where ``arguments`` hold an explicit ``null``, for a tool that gets them as sent.

    A fingerprint leaves ``null`` fields out, which is right for a typed tool: its validated arguments already
    say what a missing field means (its default). An untyped tool (an MCP server's, a ``LoopTool``) gets the
    arguments as sent, and its server may read ``"dry_run": null`` otherwise than a missing ``dry_run``
    (``None`` where the default was ``True``): a grant for the one must not cover the other.
    """
    if entry is None or isinstance(entry.tool, AlephTool):
        return fingerprint
    paths: list[list[Any]] = []
    _null_paths(arguments, [], paths)  # the input boundary has bounded the depth (64) before any approval
    if not paths:
        return fingerprint
    text = json.dumps(sorted(paths, key=json.dumps), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{fingerprint}\x1fnulls\x1f{text}".encode()).hexdigest()[:32]
