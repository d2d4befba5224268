"""An approval of an MCP tool binds the definition it was given under.

A grant fingerprint covers a tool's name and canonical arguments. An MCP server can change what a name
means at any time (``tools/list_changed`` with a new description, schema or annotations: a "rug pull"),
and the manager then re-gates the tool; a session or standing grant keyed by name and arguments alone
still covered the changed tool, so the human who approved the old definition was never asked about the
new one. The approval fingerprint of a tool from an MCP server therefore also covers the definition the
registry holds for it (description, input schema and the facts its annotations gave), so a grant never
outlives the definition it was shown. Tools of core and of installed plugins change only with the
installed code and keep their fingerprints (and the standing grants on file).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aleph._contract._registry import RegisteredTool

__all__ = ["definition_bound"]


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
