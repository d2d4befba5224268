"""What an ask's card shows the call would do, beyond its arguments.

- A changeset: an ask whose arguments carry ``created`` / ``modified`` / ``deleted`` counts is the
  approval of a transaction's changeset (what aleph-exec asks before committing a large one): the card
  shows the counts, the summary, where most changes are and whether the command used the network.
- A permission diff: ``self_config`` setting a value and ``agent_create`` making an agent with a layer
  change who may do what; the card shows each setting that changes, before and after, read against the
  configuration in force in the process that asks.

Everything else shows its (redacted) arguments only. The preview is plain JSON data, stored with the ask.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aleph._config import AlephConfig

__all__ = ["MAX_DIFF_LINES", "preview_for"]

MAX_DIFF_LINES = 200
"""Settings one permission diff lists (the rest is counted)."""
_MISSING = object()


def _leaves(prefix: str, value: Any, out: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    if isinstance(value, Mapping) and value and depth < 16:
        for key, inner in value.items():
            _leaves(f"{prefix}.{key}" if prefix else str(key), inner, out, depth + 1)
    else:
        out[prefix] = value
    return out


def _get(tree: Any, dotted: str) -> Any:
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _show(value: Any) -> str:
    if value is _MISSING or value is None:
        return "(unset)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)[:500]


def _diff(path: str, old: Any, new: Any) -> dict[str, Any]:
    before = _leaves(path, old, {}) if isinstance(old, Mapping) else {path: old}
    after = _leaves(path, new, {}) if isinstance(new, Mapping) else {path: new}
    changes = [
        {"key": key, "before": _show(before.get(key, _MISSING)), "after": _show(after.get(key, _MISSING))}
        for key in sorted(set(before) | set(after))
        if before.get(key, _MISSING) != after.get(key, _MISSING)
    ]
    return {
        "kind": "permission_diff",
        "path": path,
        "changes": changes[:MAX_DIFF_LINES],
        "more": max(0, len(changes) - MAX_DIFF_LINES),
    }


def _changeset(arguments: Mapping[str, Any]) -> dict[str, Any]:
    top = arguments.get("top_dirs")
    network = arguments.get("network")
    return {
        "kind": "changeset",
        "tool": str(arguments.get("tool") or "")[:64],
        "about": str(arguments.get("about") or "")[:2000],
        "created": arguments["created"],
        "modified": arguments["modified"],
        "deleted": arguments["deleted"],
        "top_dirs": [str(d)[:256] for d in top[:10]] if isinstance(top, list) else [],
        "network": network if isinstance(network, bool | str) else None,
    }


def preview_for(tool: str, arguments: Mapping[str, Any], config: AlephConfig | None) -> dict[str, Any] | None:
    """The changeset or permission diff the card of an ask about ``tool(arguments)`` shows, if any."""
    if all(type(arguments.get(k)) is int for k in ("created", "modified", "deleted")):
        return _changeset(arguments)
    if config is None:
        return None
    if tool == "self_config" and arguments.get("action") == "update_config":
        path = str(arguments.get("config_path") or "")
        if not path:
            return None
        in_force = config.model_dump(mode="json") | config.plugin_sections()
        return _diff(path, _get(in_force, path), arguments.get("value"))
    if tool == "agent_create" and isinstance(arguments.get("name"), str):
        path = f"agents.{arguments['name']}"
        layer = {k: arguments[k] for k in ("tool_permissions", "allowed_tools", "exec_tier") if arguments.get(k)}
        in_force = config.model_dump(mode="json")
        return _diff(path, _get(in_force, path), layer or None)
    return None
