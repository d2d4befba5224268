"""The gate chain: one call's verdict (allow / ask / deny), the rule that decided it and why.

Order: policy + tier (plan outranks everything, an explicit rule beats other tier rules) → deny
rules → floors that ask under every tier (the tool's own confirmation, the self-config floor, the
command policy, plugin votes) → argument rules of the auto tier → the policy's or the tier's ask.
Rule ids are stable tokens used in prompts, the ledger and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aleph._chokepoint._permissions import Action, PolicyDecision
from aleph._chokepoint._tiers import ExecTier, asks_for_arguments, effective_permission, is_destructive
from aleph._contract._types import ToolFacts
from aleph._turn import TurnContext

__all__ = ["DENY_ADVICE", "PolicyVote", "Verdict", "decide_call", "malformed_vote"]

RuleId = Literal[
    "allowed",
    "policy_deny",
    "plan_mode",
    "side_question",
    "command_blocked",
    "plugin_deny",
    "tool_declared",
    "gate_removal",
    "command_policy",
    "uncontained_exec",
    "plugin_requested",
    "destructive_arguments",
    "policy_ask",
    "tier_raised",
    "action_denied",
    "action_asks",
    "invalid_input",
    "data_flow",
]

DENY_ADVICE = {
    "plan_mode": " Do not retry this call before the plan is approved — request approval first.",
    "side_question": " Do not retry this call — nothing that mutates runs during a side question.",
    "data_flow": " Do not retry with the same value and do not pass it on by other means; ask the user whether "
    "this value should be used.",
}
DEFAULT_ADVICE = " Do not retry; ask the user to adjust `[policies.tool_permissions]` if this tool is needed."


@dataclass(frozen=True, slots=True)
class PolicyVote:
    """A plugin's vote on a call: it can only tighten (``deny`` or ``ask``), with a reason."""

    action: Literal["deny", "ask"]
    reason: str


_VOTE_SHAPE = 'None or PolicyVote("deny" | "ask", reason)'
_MAX_SHOWN = 120


def malformed_vote(vote: object) -> str | None:
    """What is wrong with a non-None ``aleph_tool_policy`` result, or None for a well-formed vote.

    Votes are checked where core receives them: a wrong type, a tuple, an action other than exactly
    ``"deny"`` or ``"ask"`` (``"Deny"`` included) or a reason that is not text is malformed.
    """
    if not isinstance(vote, PolicyVote):
        return f"returned {_shown(vote)}, not {_VOTE_SHAPE}"
    action: object = vote.action  # typed, but a plugin's value is whatever it passed
    reason: object = vote.reason
    if not isinstance(action, str) or action not in ("deny", "ask"):
        return f"voted action {_shown(action)}, not exactly 'deny' or 'ask'"
    if not isinstance(reason, str):
        return f"gave the reason {_shown(reason)}, not text"
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The chokepoint's decision for one call before any human is asked."""

    action: Action
    rule_id: RuleId
    reason: str
    rule: str | None = None
    layer: str | None = None
    decided_by: str = "policy"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_floor(self) -> bool:
        """Floors never offer "allow always"."""
        return self.rule_id in ("tool_declared", "gate_removal")

    def refusal(self) -> str:
        """The reason plus the advice a model needs on the deny path."""
        return self.reason + DENY_ADVICE.get(self.rule_id, DEFAULT_ADVICE)


def _policy_reason(tool: str, decision: PolicyDecision) -> str:
    pattern = decision.rule or "default"
    return (
        f"`{tool}` is denied by `{pattern}` in the {decision.layer} layer of the merged tool permission policy "
        "(`[policies.tool_permissions]`, global → agent → channel, most restrictive wins)."
    )


def decide_call(
    *,
    tool: str,
    facts: ToolFacts,
    decision: PolicyDecision,
    tier: ExecTier,
    turn: TurnContext | None,
    input: Mapping[str, Any] | None,
    names_exactly: bool,
    command: tuple[str, str, tuple[str, ...]] | None = None,
    votes: tuple[tuple[str, PolicyVote], ...] = (),
    exec_class: bool = False,
    uncontained: str | None = None,
) -> Verdict:
    """Decide one call.

    :param decision: the merged permission policy's decision (with argument rules when ``input`` is given).
    :param names_exactly: an exact, argument-free rule names this tool (stands argument floors down).
    :param command: the command-policy verdict as (action, reason, rules) for shell tools, else None.
    :param votes: (plugin, vote) pairs from ``aleph_tool_policy``.
    :param exec_class: the tool runs shell commands or code (it has ``shell_command``).
    :param uncontained: for an exec-class call under ``auto``, why it cannot run as a transaction
        (None: it will; its changeset is judged before anything lands in the workspace).
    """
    effective_tier = ExecTier.PLAN if turn is not None and (turn.plan_mode or turn.side_question) else tier
    action, decided_by = effective_permission(decision, effective_tier, tool, facts)
    notes = []
    if action == "deny":
        if decided_by == "plan":
            rule_id: RuleId = "side_question" if turn is not None and turn.side_question else "plan_mode"
            what = "a side question is being answered" if rule_id == "side_question" else "the session is in plan mode"
            return Verdict("deny", rule_id, f"`{tool}` is not declared read-only and {what}.", decided_by="tier")
        return Verdict(
            "deny", "policy_deny", _policy_reason(tool, decision), decision.rule or "default", decision.layer, "policy"
        )
    if command is not None and command[0] == "block":
        return Verdict(
            "deny",
            "command_blocked",
            f"`{tool}`: {command[1].rstrip('.')}.",
            ", ".join(command[2]) or None,
            "sandbox.command_policy",
            "floor",
        )
    for plugin, vote in votes:
        if vote.action == "deny":
            return Verdict(
                "deny",
                "plugin_deny",
                f"`{tool}` is refused by the plugin `{plugin}`: {vote.reason}",
                plugin,
                f"plugin:{plugin}",
                "plugin",
            )
    if command is not None and command[0] == "warn":
        notes.append(f"command policy warning: {command[1]}")
    if facts.requires_approval:
        return Verdict(
            "ask",
            "tool_declared",
            f"`{tool}` declares its own confirmation gate, so it asks under every execution tier — "
            "including `full` — and an `allow` entry does not switch it off.",
            decided_by="floor",
            notes=tuple(notes),
        )
    arg_rule = asks_for_arguments(effective_tier, tool, input or {}) if input is not None else None
    if arg_rule == "gate_removal" and not names_exactly:
        return Verdict(
            "ask",
            "gate_removal",
            f"`{tool}` would change Aleph's permission or execution settings, which always needs a human's approval.",
            decided_by="floor",
            notes=tuple(notes),
        )
    auto_exec = exec_class and effective_tier is ExecTier.AUTO
    if auto_exec:
        notes.append(f"uncontained: {uncontained}" if uncontained is not None else "contained: runs as a transaction")
    if command is not None and command[0] == "ask":
        return Verdict(
            "ask",
            "command_policy",
            f"The command-policy floor cannot prove this `{tool}` command safe: {command[1]}",
            ", ".join(command[2]) or None,
            "sandbox.command_policy",
            "floor",
            tuple(notes),
        )
    for plugin, vote in votes:
        if vote.action == "ask":
            return Verdict(
                "ask",
                "plugin_requested",
                f"The plugin `{plugin}` asks for confirmation of `{tool}`: {vote.reason}",
                plugin,
                f"plugin:{plugin}",
                "plugin",
                tuple(notes),
            )
    if auto_exec and uncontained is not None:
        return Verdict(
            "ask",
            "uncontained_exec",
            f"`{tool}` cannot run as a transaction here ({uncontained.rstrip('.')}), so its effects could not be "
            "held back and judged: the `auto` tier asks before it runs.",
            decided_by="tier",
            notes=tuple(notes),
        )
    if arg_rule == "destructive_arguments" and not names_exactly:
        operation = (input or {}).get("operation")
        return Verdict(
            "ask",
            "destructive_arguments",
            f"`{tool}` with operation `{operation}` moves or removes files, so the `auto` tier asks first.",
            decided_by="tier",
            notes=tuple(notes),
        )
    if action == "ask":
        if decided_by == "policy" and decision.rule is not None:
            if decision.rule == tool:
                reason = f"`[policies.tool_permissions]` sets `{decision.rule}` = ask ({decision.layer} layer)."
            else:
                reason = (
                    f"`[policies.tool_permissions]` sets the pattern `{decision.rule}` = ask "
                    f"({decision.layer} layer), which matches `{tool}`."
                )
            return Verdict("ask", "policy_ask", reason, decision.rule, decision.layer, "policy", tuple(notes))
        if decided_by == "policy":
            return Verdict(
                "ask",
                "policy_ask",
                f"`[policies.tool_permissions]` sets `default` = ask ({decision.layer} layer), which "
                f"applies to `{tool}`.",
                "default",
                decision.layer,
                "policy",
                tuple(notes),
            )
        why = "is destructive" if is_destructive(tool, facts) else "does not declare itself read-only"
        return Verdict(
            "ask",
            "tier_raised",
            f"The execution tier `{effective_tier.id}` stops for `{tool}` because the tool {why}.",
            decided_by="tier",
            notes=tuple(notes),
        )
    return Verdict(
        "allow", "allowed", "", decision.rule, decision.layer if decision.rule else None, decided_by, tuple(notes)
    )
