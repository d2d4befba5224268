"""The rules in force for an agent on a channel, each with where it came from (the explain page's table).

A call is judged by every layer at once and the most restrictive decision wins: the global table, the
agent's, the channel's, an untrusted workspace file's restricting copies of those, and a per-request
table a host passes. Each configured rule is traced to the place that set it (``AlephConfig.origin``):
the user file, the project file, the managed file Aleph's own tools write, an ``ALEPH__*`` variable.
Plugins that vote on calls (``aleph_tool_policy``) or add command-policy rules can only tighten; they are
listed as such.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aleph._chokepoint._permissions import PermissionLayer
    from aleph._config import AlephConfig
    from aleph._runtime import Aleph

__all__ = ["RuleView", "active_rules", "origin_kind"]


@dataclass(frozen=True, slots=True)
class RuleView:
    """One row of the table: a rule (or a layer's default, or a plugin that votes) and its origin."""

    layer: str
    rule: str
    action: str
    kind: str
    """What set it: ``user file``, ``project file``, ``managed config``, ``environment``, ``workspace file
    (restricts only)``, ``plugin``, ``per-request``, ``built-in default``, ``config file``."""
    origin: str
    """The file, variable or plugin that set it."""


def _user_file() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return str(Path(base) / "aleph" / "config.toml")


def origin_kind(config: AlephConfig, origin: str) -> str:
    """Which kind of source ``origin`` (an ``AlephConfig.origin`` answer) is."""
    if origin == "default":
        return "built-in default"
    if origin.startswith("env"):
        return "environment"
    if origin == str(config.managed_file):
        return "managed config"
    if origin == _user_file():
        return "user file"
    workspace = config.workspace_file
    if workspace is not None and origin == workspace.get("file"):
        return "project file"
    return "config file"


def _configured(config: AlephConfig, layer: PermissionLayer, label: str, prefix: str) -> list[RuleView]:
    out = []
    where = config.origin(f"{prefix}.default")
    out.append(RuleView(label, "(default)", layer.default, origin_kind(config, where), where))
    for rule in layer.rules:
        where = config.origin(f"{prefix}.overrides.{rule.key}")
        out.append(RuleView(label, rule.key, rule.action, origin_kind(config, where), where))
    return out


def _plain(layer: PermissionLayer, label: str, kind: str, origin: str) -> list[RuleView]:
    rows = [RuleView(label, "(default)", layer.default, kind, origin)]
    return rows + [RuleView(label, r.key, r.action, kind, origin) for r in layer.rules]


def active_rules(
    rt: Aleph, agent: str | None, channel: str | None, request: PermissionLayer | None = None
) -> list[RuleView]:
    """Every rule that judges a call of ``agent`` on ``channel`` (with ``request``'s layer), with its origin."""
    config, access = rt.config, rt.access
    rows = _configured(config, access.global_layer, "global", "policies.tool_permissions")
    if agent is not None and agent in access.agent_layers:
        rows += _configured(config, access.agent_layers[agent], f"agent:{agent}", f"agents.{agent}.tool_permissions")
    if channel is not None and channel in access.channel_layers:
        rows += _configured(
            config, access.channel_layers[channel], f"channel:{channel}", f"channels.{channel}.tool_permissions"
        )
    source = str((config.workspace_file or {}).get("file") or "the workspace's aleph.toml")
    keys = ["global", *([f"agent:{agent}"] if agent else []), *([f"channel:{channel}"] if channel else [])]
    for key in keys:
        layer = access.workspace_layers.get(key)
        if layer is not None:
            rows += _plain(layer, f"workspace {key}", "workspace file (restricts only)", source)
    if request is not None:
        rows += _plain(request, "request", "per-request", "the host's channel_permissions for this request")
    rows += _plugins(rt.plugins.report())
    return rows


def _plugins(report: Mapping[str, Any]) -> list[RuleView]:
    out = []
    for plugin in report.get("loaded", ()):
        hooks = set(plugin.get("hooks", ()))
        name = str(plugin.get("name", "?"))
        if "aleph_tool_policy" in hooks:
            out.append(RuleView("plugin", "(votes on every call)", "ask/deny only", "plugin", name))
        if "aleph_command_policy_rules" in hooks:
            out.append(RuleView("plugin", "(command-policy rules)", "ask/deny only", "plugin", name))
    return out
