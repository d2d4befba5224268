"""A workspace's own ``aleph.toml`` may tighten the operator's policy, never loosen it, unless trusted.

Configuration comes from two kinds of source. The *operator's* are chosen by the person running Aleph:
the user file, an explicit ``--config`` / ``load(config_path)`` / ``$ALEPH_CONFIG``, and ``ALEPH__*``
environment overrides. The *workspace's* is the ``aleph.toml`` found in the workspace itself: it arrives
with the project (a cloned repository, a folder an MCP client names as its root), so whoever wrote the
project chose it. Until the operator trusts that file (``aleph config trust``, bound to its path and its
bytes) it is read as a list of restrictions on top of the operator's configuration:

- permission tables (global, per agent, per channel) become extra layers holding only their ``deny`` and
  ``ask`` rules and a ``deny``/``ask`` default; across layers the most restrictive decision wins, so they
  can refuse or ask for what the operator allows, never allow (or mark as explicitly allowed) anything;
- tiers take the stricter of the two; an agent's allow-set is intersected; a channel may only become
  ``guest``; command-policy rules that block or ask are added, and its switches only move towards
  enforcing; size limits and the approval timeout take the smaller value; plugins may only be disabled;
- everything whose effect cannot be judged here or that would run or load code, move Aleph's data, or
  widen the workspace (``[mcp]``, ``[ledger]``, ``[workspace]``, ``[plugins] paths``, ``[tools]`` other
  than its limits, and every plugin's own section) is ignored, and listed in :attr:`Tightened.ignored`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Tightened", "tighten"]

_TIERS = {"plan": 0, "ask": 1, "auto": 2, "full": 3}
_ENFORCEMENT = {"off": 0, "warn": 1, "block": 2}
_RESTRICTING = ("ask", "deny")


@dataclass(slots=True)
class Tightened:
    """The operator's settings with the workspace's restrictions applied."""

    config: dict[str, Any]
    """The merged raw configuration to validate."""
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra permission layers, by ``global`` / ``agent:<name>`` / ``channel:<name>``: restricting rules only."""
    ignored: list[str] = field(default_factory=list)
    """Dotted keys of the workspace file that were not applied, with why."""


def _table(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _restricting(table: Any, where: str, ignored: list[str]) -> dict[str, Any] | None:
    """A permission table reduced to what restricts: ``ask``/``deny`` rules and default."""
    if not isinstance(table, Mapping):
        return None
    out: dict[str, Any] = {}
    default = table.get("default")
    if default in _RESTRICTING:
        out["default"] = default
    elif default is not None and default != "allow":
        out["default"] = "deny"  # not a valid action: the layer fails closed
    overrides = table.get("overrides")
    if isinstance(overrides, Mapping):
        kept = {str(k): v for k, v in overrides.items() if v != "allow"}  # an invalid action: validation names it
        dropped = sorted(str(k) for k, v in overrides.items() if v == "allow")
        if dropped:
            ignored.append(f"{where}.overrides: allow rules {dropped} (a workspace may only restrict)")
        if kept:
            out["overrides"] = kept
    for key in sorted(set(table) - {"default", "overrides"}):
        out[key] = table[key]  # unknown keys: validation names them
    return out or None


def _stricter_tier(operator: Any, workspace: Any) -> Any:
    if workspace not in _TIERS:
        return operator if workspace is None else workspace  # an invalid value: validation reports it
    if operator not in _TIERS:
        return workspace
    return workspace if _TIERS[workspace] < _TIERS[operator] else operator


def _smaller(operator: Any, workspace: Any) -> Any:
    if not isinstance(workspace, int | float) or isinstance(workspace, bool):
        return workspace  # not a number: validation names it
    if not isinstance(operator, int | float) or workspace < operator:
        return workspace
    return operator


def tighten(operator: Mapping[str, Any], workspace: Mapping[str, Any], defaults: Mapping[str, Any]) -> Tightened:
    """Apply the restrictions of an untrusted ``workspace`` table to the ``operator``'s merged table.

    ``defaults`` are the built-in values the operator's table falls back to (for tiers and limits).
    """
    out: dict[str, Any] = {
        key: (dict(value) if isinstance(value, Mapping) else value) for key, value in operator.items()
    }
    result = Tightened(out)
    ignored = result.ignored

    for section in sorted(workspace):
        value = workspace[section]
        if section == "policies":
            _policies(out, _table(value), defaults, result)
        elif section == "agents":
            _agents(out, _table(value), defaults, result)
        elif section == "channels":
            _channels(out, _table(value), result)
        elif section == "sandbox":
            _sandbox(out, _table(value), result)
        elif not isinstance(value, Mapping) and section in defaults:
            out[section] = value  # not a table: validation names it
        elif section == "tools":
            tools = _table(out.get("tools"))
            for key in sorted(_table(value)):
                if key in ("max_input_bytes", "max_output_chars"):
                    tools[key] = _smaller(tools.get(key, defaults["tools"][key]), value[key])
                elif _known(defaults, "tools", key, tools, value[key]):
                    ignored.append(f"tools.{key} (only size limits are taken from an untrusted workspace)")
            out["tools"] = tools
        elif section == "approval":
            approval = _table(out.get("approval"))
            for key in sorted(_table(value)):
                if key == "timeout":
                    approval[key] = _smaller(approval.get(key, defaults["approval"]["timeout"]), value[key])
                elif _known(defaults, "approval", key, approval, value[key]):
                    ignored.append(f"approval.{key}")
            out["approval"] = approval
        elif section == "plugins":
            plugins = _table(out.get("plugins"))
            for key in sorted(_table(value)):
                item = value[key]
                if key == "disable":
                    have = plugins.get("disable", [])
                    plugins["disable"] = sorted({*have, *item}) if isinstance(item, list) else item
                elif key == "require_trust" and item is not False:
                    plugins["require_trust"] = item
                elif _known(defaults, "plugins", key, plugins, item):
                    ignored.append(f"plugins.{key} (it could load code or lift a hold)")
            out["plugins"] = plugins
        else:
            why = {
                "mcp": "it starts programs on this machine",
                "ledger": "it decides what is recorded",
                "workspace": "it moves the workspace or Aleph's data",
            }.get(section, "a plugin's settings, whose effect core cannot judge")
            ignored.append(f"[{section}] ({why})")
    return result


def _known(defaults: Mapping[str, Any], section: str, key: str, target: dict[str, Any], value: Any) -> bool:
    """True for a known key (the caller ignores it); an unknown one is passed on for validation to name."""
    if key in _table(defaults.get(section)):
        return True
    target[key] = value
    return False


def _policies(out: dict[str, Any], table: dict[str, Any], defaults: Mapping[str, Any], result: Tightened) -> None:
    policies = _table(out.get("policies"))
    for key in sorted(table):
        if key == "exec_tier":
            policies[key] = _stricter_tier(policies.get(key, defaults["policies"]["exec_tier"]), table[key])
        elif key == "tool_permissions":
            layer = _restricting(table[key], "policies.tool_permissions", result.ignored)
            if layer:
                result.layers["global"] = layer
        elif _known(defaults, "policies", key, policies, table[key]):
            result.ignored.append(f"policies.{key}")
    out["policies"] = policies


def _agents(out: dict[str, Any], table: dict[str, Any], defaults: Mapping[str, Any], result: Tightened) -> None:
    agents = {name: _table(a) for name, a in _table(out.get("agents")).items()}
    fallback = _table(out.get("policies")).get("exec_tier", defaults["policies"]["exec_tier"])
    for name in sorted(table):
        theirs = _table(table[name])
        mine = agents.get(name, {})
        for key in sorted(theirs):
            value = theirs[key]
            if key == "tool_permissions":
                layer = _restricting(value, f"agents.{name}.tool_permissions", result.ignored)
                if layer:
                    result.layers[f"agent:{name}"] = layer
            elif key == "allowed_tools":
                have = mine.get("allowed_tools")
                if isinstance(value, list) and isinstance(have, list):
                    mine[key] = [t for t in have if t in value]
                else:
                    mine[key] = value  # the operator set none (or it is invalid: validation names it)
            elif key == "exec_tier":
                tier = _stricter_tier(mine.get(key) or fallback, value)
                if tier != (mine.get(key) or fallback):
                    mine[key] = tier
            else:
                mine[key] = value  # no other key exists: validation names it
        if mine:
            agents[name] = mine
    out["agents"] = agents


def _channels(out: dict[str, Any], table: dict[str, Any], result: Tightened) -> None:
    channels = {name: _table(c) for name, c in _table(out.get("channels")).items()}
    for name in sorted(table):
        theirs = _table(table[name])
        mine = channels.get(name, {})
        for key in sorted(theirs):
            value = theirs[key]
            if key == "tool_permissions":
                layer = _restricting(value, f"channels.{name}.tool_permissions", result.ignored)
                if layer:
                    result.layers[f"channel:{name}"] = layer
            elif key == "role" and value in ("operator", "member"):
                result.ignored.append(f"channels.{name}.role={value!r} (a workspace may only make a channel guest)")
            else:
                mine[key] = value  # "guest", or something validation names
        if mine:
            channels[name] = mine
    out["channels"] = channels


def _sandbox(out: dict[str, Any], table: dict[str, Any], result: Tightened) -> None:
    sandbox = _table(out.get("sandbox"))
    policy = _table(sandbox.get("command_policy"))
    for key in sorted(table):
        if key != "command_policy":
            sandbox[key] = table[key]  # no other key exists: validation names it
    theirs = _table(table.get("command_policy"))
    for key in sorted(theirs):
        value = theirs[key]
        if key in ("enabled", "use_default_rules") and value is not False:
            policy[key] = value
        elif key == "enforcement" and value in _ENFORCEMENT:
            if _ENFORCEMENT[value] > _ENFORCEMENT.get(policy.get(key, "block"), 2):
                policy[key] = value
            elif value != policy.get(key, "block"):
                result.ignored.append(f"sandbox.command_policy.enforcement={value!r} (it would relax the floor)")
        elif key == "custom_rules" and isinstance(value, list):
            kept = [r for r in value if not (isinstance(r, Mapping) and r.get("action") == "warn")]
            if len(kept) < len(value):
                result.ignored.append("sandbox.command_policy.custom_rules that only warn")
            policy[key] = [*policy.get(key, []), *kept]
        elif key in ("enabled", "use_default_rules"):
            result.ignored.append(f"sandbox.command_policy.{key}=false (it would relax the command floor)")
        else:
            policy[key] = value  # an invalid value or key: validation names it
    sandbox["command_policy"] = policy
    out["sandbox"] = sandbox
