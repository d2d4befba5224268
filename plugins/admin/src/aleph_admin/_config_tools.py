"""``self_config``, ``config_audit`` and ``read_config_guide``.

``self_config`` writes the managed configuration. Core's floor asks a human for a rollback and for any
write under ``policies.tool_permissions`` / ``exec_tier`` / ``terminal`` (every tier); this family's
policy vote (see ``plugin.py``) asks for every other change :func:`~aleph_admin._managed.loosening`
cannot show to only tighten, with the permission diff as the reason. Every change is stored with the
text before and after, annotated on its ledger row (``config_change``), and can be rolled back.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_admin._agents import apply_managed
from aleph_admin._guide import config_guide
from aleph_admin._managed import get_path, leaves
from aleph_admin._state import AdminState, caller

__all__ = ["ConfigAudit", "ReadConfigGuide", "SelfConfig", "audit", "hide_credentials"]

_PATH = re.compile(r"[A-Za-z0-9_*()/:.<>-]{1,200}(\.[A-Za-z0-9_*()/:.<>-]{1,200}){0,12}")
_SECTIONS = frozenset(
    ("policies", "agents", "channels", "sandbox", "tools", "mcp", "ledger", "approval", "plugins", "models")
)


class SelfConfigArgs(ToolArgs):
    action: Literal["read", "update_config", "rollback_config"]
    """read a value in force (and where it came from); update_config sets one; rollback_config undoes a change."""
    config_path: str | None = Field(default=None, max_length=400)
    """Dotted key, e.g. ``agents.helper.tool_permissions.overrides.bash`` (read, update_config)."""
    value: Any = None
    """The new value (update_config); null removes the key from the managed file."""
    change_id: int | None = None
    """The change to undo (rollback_config): the configuration returns to what it was before it."""


class SelfConfig(AlephTool[SelfConfigArgs]):
    NAME = "self_config"
    DESCRIPTION = (
        "Read or change Aleph's own configuration. A change that only tightens applies at once; one that loosens "
        "a permission, or touches policies.*, is shown to a human as a permission diff first. Every change is "
        "ledgered and can be rolled back (rollback_config with its change_id)."
    )
    Args = SelfConfigArgs
    FACTS = ToolFacts(tags=("admin", "config"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: SelfConfigArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        config = self.state.context.current_config()
        if args.action == "read":
            if not args.config_path:
                return {"files": config.files, "in_force": hide_credentials(config.model_dump(mode="json"))}
            value = get_path(
                hide_credentials(config.model_dump(mode="json") | config.plugin_sections()), args.config_path
            )
            return {"config_path": args.config_path, "value": value, "origin": config.origin(args.config_path)}
        call = aleph.current_call()
        if args.action == "rollback_config":
            if args.change_id is None:
                raise aleph.ExecutionFailed(self.NAME, "change_id: name the change to undo (config_audit lists them)")
            change = self.state.store.change(args.change_id)
            if change is None:
                raise aleph.ExecutionFailed(self.NAME, f"no configuration change {args.change_id}")
            managed = self.state.managed
            with managed.locked():
                before = managed.text()
                managed.write(change["before"])
                try:
                    self.state.context.reload_config()
                except aleph.ConfigError as exc:
                    managed.write(before)
                    self.state.context.reload_config()
                    raise aleph.ExecutionFailed(self.NAME, f"the earlier configuration does not load: {exc}") from None
            new_id = self.state.store.add_change(
                who.describe(),
                "rollback",
                change["path"],
                before,
                change["before"],
                f"rolled back change {change['id']}",
            )
            if call is not None:
                call.annotate(config_change=new_id, rolled_back=change["id"])
            return {"rolled_back": change["id"], "config_change": new_id}
        path = args.config_path or ""
        if not _PATH.fullmatch(path) or path.split(".", 1)[0] not in _SECTIONS:
            raise aleph.ExecutionFailed(
                self.NAME, f"config_path {path!r}: a dotted key under one of {', '.join(sorted(_SECTIONS))}"
            )
        if path.split(".", 1)[0] == "workspace":
            raise aleph.ExecutionFailed(self.NAME, "workspace settings cannot be changed from a tool")
        old = get_path(hide_credentials(config.model_dump(mode="json") | config.plugin_sections()), path)
        before, after = apply_managed(self.state, self.NAME, path, args.value)
        change = self.state.store.add_change(
            who.describe(), "update", path, before, after, f"{path}: {old!r} -> {_shown(path, args.value)!r}"
        )
        if call is not None:
            call.annotate(config_change=change, config_path=path)
        return {"config_path": path, "before": old, "value": args.value, "config_change": change}


_CREDENTIAL_MAPS = frozenset({"env", "headers"})
HIDDEN = "***"


def hide_credentials(tree: Any) -> Any:
    """``tree`` with every value of an ``env`` or ``headers`` table shown as ``***`` (its names kept).

    Those tables hand a child process or an HTTP server its credentials (``[mcp.servers.<id>] env``
    often holds an API token written out); reading the configuration is open to every caller, so what is
    in them is never part of what it returns.
    """
    if isinstance(tree, dict):
        return {
            key: {name: HIDDEN for name in value}
            if key in _CREDENTIAL_MAPS and isinstance(value, dict)
            else hide_credentials(value)
            for key, value in tree.items()
        }
    if isinstance(tree, list):
        return [hide_credentials(item) for item in tree]
    return tree


def _shown(dotted: str, value: Any) -> Any:
    """``value`` as it may be shown at ``dotted`` (a credential table's values hidden), for change summaries."""
    tree: Any = value
    for part in reversed(dotted.split(".")):
        tree = {part: tree}
    return get_path(hide_credentials(tree), dotted)


def _risky(config: aleph.AlephConfig) -> list[str]:
    out = []
    if config.policies.exec_tier == "full":
        out.append("policies.exec_tier = full: nothing asks except floors")
    if config.policies.tool_permissions.default == "allow" and not config.policies.tool_permissions.overrides:
        out.append("policies.tool_permissions: default allow with no overrides")
    for name, agent in config.agents.items():
        if "*" in agent.accepts_delegation_from:
            out.append(f"agents.{name}.accepts_delegation_from = ['*']: any agent may have it act for them")
        if agent.exec_tier == "full":
            out.append(f"agents.{name}.exec_tier = full")
    for name, channel in config.channels.items():
        if channel.role == "operator":
            out.append(f"channels.{name}.role = operator: every caller on it is an operator")
    if not config.ledger.enabled:
        out.append("ledger.enabled = false: nothing is recorded")
    for rule, action in config.policies.tool_permissions.overrides.items():
        if action == "allow" and "*" in rule:
            out.append(f"policies.tool_permissions.overrides.{rule} = allow: a glob allow")
    return out


def audit(state: AdminState, config: aleph.AlephConfig, *, limit: int = 50) -> dict[str, Any]:
    """What is in force, where each value came from, the recent changes and the risky settings."""
    dumped = config.model_dump(mode="json", exclude_defaults=True)
    settings = []
    for key, value in leaves("", dumped).items():
        if key.split(".", 1)[0] in ("policies", "agents", "channels", "sandbox", "plugins", "ledger", "tools"):
            settings.append({"key": key, "value": value, "origin": config.origin(key)})
    report = state.context.plugins_report()
    voters = sorted(p["name"] for p in report.get("loaded", []) if "aleph_tool_policy" in p.get("hooks", ()))
    changes = [{k: c[k] for k in ("id", "at", "by", "kind", "path", "summary")} for c in state.store.changes(limit)]
    return {
        "files": config.files,
        "settings": settings,
        "policy_plugins": voters,
        "changes": changes,
        "risky": _risky(config),
    }


class AuditArgs(ToolArgs):
    changes: int = Field(default=50, ge=0, le=1000)
    """How many recent configuration changes to list."""


class ConfigAudit(AlephTool[AuditArgs]):
    NAME = "config_audit"
    DESCRIPTION = (
        "Audit the configuration in force: every permission-relevant value and the file (or environment "
        "variable) it came from, the plugins that vote on calls, recent changes (when, by whom) and risky settings."
    )
    Args = AuditArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("admin", "read"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: AuditArgs) -> dict[str, Any]:
        return audit(self.state, self.state.context.current_config(), limit=args.changes)


class GuideArgs(ToolArgs):
    section: str | None = Field(default=None, max_length=64)
    """One top-level section (``policies``, ``agents``, ...); default all."""


class ReadConfigGuide(AlephTool[GuideArgs]):
    NAME = "read_config_guide"
    DESCRIPTION = "Read the configuration reference (every section and key with its type, default and meaning)."
    Args = GuideArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, inline=True, tags=("admin", "read"))

    async def call(self, args: GuideArgs) -> str:
        return config_guide(args.section)
