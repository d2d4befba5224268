"""Execution tiers (plan / ask / auto / full) and the argument-level floors.

Tiers read only a tool's declared :class:`ToolFacts`; a tool that declares nothing is treated as
mutating, so the ``ask`` tier asks and the ``plan`` tier refuses it. Tiers can only tighten the
permission policy; an explicit rule beats every tier rule except a plan-mode deny.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from aleph._chokepoint._permissions import Action, PolicyDecision, stricter
from aleph._contract._types import ToolFacts

__all__ = [
    "HUMAN_CONTACT_TOOLS",
    "TIER_PROMPTS",
    "ExecTier",
    "asks_for_arguments",
    "effective_permission",
    "is_destructive",
    "resolve_exec_tier",
    "rule_for",
]

HUMAN_CONTACT_TOOLS = frozenset({"ask_user"})
"""Asking the human never needs permission."""
PLAN_SAFE_TOOLS = frozenset({"scratchpad", "subagent"})
GATED_CONFIG_PATHS = ("policies.tool_permissions", "policies.exec_tier", "policies.terminal")
DESTRUCTIVE_FILE_OPS = frozenset({"delete", "move", "batch_move", "organize"})


class ExecTier(IntEnum):
    """How much runs without asking, from least (plan) to most (full) permissive."""

    PLAN = 0
    ASK = 1
    AUTO = 2
    FULL = 3

    @classmethod
    def parse(cls, value: str | ExecTier | None, default: ExecTier | None = None) -> ExecTier:
        """``"plan"|"ask"|"auto"|"full"`` → tier; anything else raises ValueError (or returns ``default``)."""
        if isinstance(value, ExecTier):
            return value
        if isinstance(value, str) and value.lower() in _BY_NAME:
            return _BY_NAME[value.lower()]
        if default is not None:
            return default
        raise ValueError(f"unknown exec tier {value!r}: use plan, ask, auto or full")

    @property
    def id(self) -> str:
        """The tier's config spelling."""
        return self.name.lower()

    @property
    def prompt_line(self) -> str:
        """The fixed model-facing line that tells the model how this tier treats its calls."""
        return TIER_PROMPTS[self]


_BY_NAME = {t.name.lower(): t for t in ExecTier}

TIER_PROMPTS = {
    ExecTier.PLAN: "Approval mode: plan — only read-only tools run; propose the plan and request approval "
    "before anything that changes state.",
    ExecTier.ASK: "Approval mode: ask — every tool that is not declared read-only asks the user first.",
    ExecTier.AUTO: "Approval mode: auto — tools run without asking unless they are destructive or a policy asks.",
    ExecTier.FULL: "Approval mode: full — tools run without asking; a tool's own confirmation gate and the "
    "command-policy floor still apply.",
}
"""One fixed model-facing line per tier."""


def is_destructive(name: str, facts: ToolFacts) -> bool:
    """Declared confirmation, a ``*_delete`` name, ``team_disband``, ``vault_*`` or the ``destructive`` tag."""
    return (
        facts.requires_approval
        or name.endswith("_delete")
        or name == "team_disband"
        or name.startswith("vault_")
        or "destructive" in facts.tags
    )


def rule_for(tier: ExecTier, name: str, facts: ToolFacts) -> Action | None:
    """The tier's own verdict for a tool, or None when the tier has nothing to say."""
    if name in HUMAN_CONTACT_TOOLS:
        return None
    if tier is ExecTier.PLAN:
        if name in PLAN_SAFE_TOOLS:
            return None
        return None if facts.idempotent else "deny"
    if tier is ExecTier.ASK:
        return "ask" if (not facts.idempotent or is_destructive(name, facts)) else None
    if tier is ExecTier.AUTO:
        return "ask" if is_destructive(name, facts) else None
    return None


def effective_permission(decision: PolicyDecision, tier: ExecTier, name: str, facts: ToolFacts) -> tuple[Action, str]:
    """Combine the policy and the tier; returns the action and what decided it (``policy``/``tier``/``plan``).

    A plan-mode deny outranks everything; an explicit rule beats every other tier rule; otherwise the
    stricter of the layers' default and the tier's rule applies.
    """
    tier_rule = rule_for(tier, name, facts)
    if tier_rule == "deny":
        return "deny", "plan"
    if decision.explicit or tier_rule is None:
        return decision.action, "policy"
    combined = stricter(decision.action, tier_rule)
    return combined, ("policy" if combined == decision.action else "tier")


def _paths_intersect(a: str, b: str) -> bool:
    if not a or not b or a == b:
        return True
    return a.startswith(b + ".") or b.startswith(a + ".")


ARGUMENT_FLOOR_TOOLS = frozenset(("self_config", "file_ops"))
"""The tools whose arguments :func:`asks_for_arguments` looks at; it finds nothing for any other."""


def asks_for_arguments(tier: ExecTier, name: str, input: Mapping[str, Any]) -> str | None:
    """An argument-level floor id (``gate_removal`` / ``destructive_arguments``) or None.

    ``gate_removal`` applies under every tier: ``self_config`` rolling back configuration or writing a
    permission/tier/terminal key. ``destructive_arguments`` applies under ``auto`` only: ``file_ops``
    delete/move/batch_move/organize and a copy that overwrites (under ``ask`` the whole tool asks; under
    ``full`` nothing does).
    """
    if name == "self_config":
        action = input.get("action")
        if action == "rollback_config":
            return "gate_removal"
        if action == "update_config":
            path = input.get("config_path")
            path = path if isinstance(path, str) else ""
            if any(_paths_intersect(path, gated) for gated in GATED_CONFIG_PATHS):
                return "gate_removal"
    if tier is ExecTier.AUTO and name == "file_ops":
        operation = input.get("operation")
        if operation in DESTRUCTIVE_FILE_OPS or (operation == "copy" and input.get("overwrite") is True):
            return "destructive_arguments"
    return None


def resolve_exec_tier(
    configured: ExecTier,
    requested: ExecTier | None = None,
    stored: ExecTier | None = None,
    caller_role: str | None = None,
) -> ExecTier:
    """Request > session > configured (a member falls back to ``ask``); guests are clamped to ``auto``."""
    fallback = ExecTier.ASK if caller_role == "member" else configured
    tier = requested if requested is not None else stored if stored is not None else fallback
    if caller_role == "guest" and tier > ExecTier.AUTO:
        tier = ExecTier.AUTO
    return tier
