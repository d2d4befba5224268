"""State every scoped service of one runtime shares: the :class:`Chokepoint` and its verdict caches.

Everything that depends only on the registry generation, the policy and the tier is computed once
here and shared by every :class:`~aleph.ScopedToolService` built over it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aleph._chokepoint._approval import ApprovalRequester
from aleph._chokepoint._gate import ApprovalGate
from aleph._chokepoint._owners import SessionOwners
from aleph._chokepoint._permissions import PermissionPolicy
from aleph._chokepoint._secrets import SecretResolvers
from aleph._chokepoint._tiers import ARGUMENT_FLOOR_TOOLS, ExecTier
from aleph._chokepoint._verdict import PolicyVote, Verdict, decide_call
from aleph._contract._registry import RegisteredTool, ToolRegistry
from aleph._contract._types import ToolDefinition
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from aleph._flow._gate import DataFlow
    from aleph._ledger import Ledger
    from aleph._ledger._events import EventLog

__all__ = [
    "NEEDS_ARGUMENTS",
    "NEEDS_COMMAND",
    "NEEDS_NOTHING",
    "Chokepoint",
    "CommandChecker",
    "CommandSplitter",
    "DefinitionRewriter",
    "Explanation",
]

NEEDS_NOTHING, NEEDS_COMMAND, NEEDS_ARGUMENTS = 0, 1, 2
"""What a concrete input may change in a tool's name-level verdict (:meth:`Chokepoint.static_verdict`)."""

_BY_COMMAND_ENTRIES = 1024

DefinitionRewriter = Callable[[ToolDefinition], ToolDefinition]
"""Rewrites a definition shown to the model (progressive disclosure); runs after all gating."""


class CommandSplitter(Protocol):
    """Shell text → (argv of every analysed sub-command, whether part of it was opaque)."""

    def __call__(self, command: str, cwd: str | None = ...) -> tuple[tuple[tuple[str, ...], ...], bool]:
        """``cwd``: where the command starts (``None``: not known, nothing relative is proven)."""
        ...


class CommandChecker(Protocol):
    """The command-policy floor as the chokepoint uses it."""

    def __call__(self, command: str, cwd: str | None = ...) -> tuple[str, str, tuple[str, ...]]:
        """(action, reason, rules) for one shell command starting in ``cwd`` (``None``: not known)."""
        ...


@dataclass(frozen=True, slots=True)
class Explanation:
    """What ``explain`` reports: the decision and everything that led to it."""

    decision: str
    rule_id: str
    rule: str | None
    layer: str | None
    reason: str
    tier: str
    decided_by: str
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph policy explain --json``."""
        return {
            "decision": self.decision,
            "rule_id": self.rule_id,
            "rule": self.rule,
            "layer": self.layer,
            "reason": self.reason,
            "tier": self.tier,
            "decided_by": self.decided_by,
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class Chokepoint:
    """State shared by every scoped service of one runtime: registry, gate, ledger, caches."""

    registry: ToolRegistry
    gate: ApprovalGate = field(default_factory=ApprovalGate)
    workspace: str = ""
    data_dir: Path | None = None
    ledger: Ledger | None = None
    events: EventLog | None = None
    command_checker: CommandChecker | None = None
    command_splitter: CommandSplitter | None = None
    voters: Sequence[tuple[str, Callable[..., PolicyVote | None]]] = ()
    default_requester: ApprovalRequester | None = None
    max_input_bytes: int = 1_000_000
    max_output_chars: int = 100_000
    owners: SessionOwners = field(default_factory=lambda: SessionOwners(None))
    """Which agent owns each session key."""
    delegator: Callable[..., Awaitable[Any]] | None = None
    secrets: SecretResolvers = field(default_factory=SecretResolvers)
    """Resolvers of secret handles (``{{scheme:name}}``), put into a call after its verdict."""
    """The delegation door (set by the runtime): ``(service, agent, *, purpose, budget, turn) -> service``."""
    flow: DataFlow | None = None
    """Data-flow rules and every session's provenance (``[flow]``); None: no flow is tracked."""
    _static: dict[tuple[int, int, int], dict[str, tuple[Verdict, int]]] = field(default_factory=dict)
    # (static key, tool, command-policy verdict) -> the call's verdict, for NEEDS_COMMAND tools.
    _by_command: dict[tuple[Any, ...], Verdict] = field(default_factory=dict)
    # Keys hold the policy, rewriters and deferred set themselves (not ids), so no key outlives its object.
    _lists: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def static_verdict(
        self, policy: PermissionPolicy, tier: ExecTier, entry: RegisteredTool, turn: TurnContext | None
    ) -> tuple[Verdict, int]:
        """The name-level verdict (no arguments), cached per policy, tier, turn mode and registry generation.

        Returns (verdict, needs): what a concrete input may change. ``NEEDS_NOTHING``; ``NEEDS_COMMAND``
        when only the command policy's verdict on the tool's shell text can; ``NEEDS_ARGUMENTS`` when an
        argument rule, an argument floor or a plugin vote may too.
        """
        cache = self._static.get(key := self._static_key(policy, tier, turn))
        if cache is None:
            if len(self._static) > 64:
                self._static.clear()
            cache = self._static[key] = {}
        hit = cache.get(entry.name)
        if hit is not None:
            return hit
        verdict = _decide_by_name(policy, tier, entry, turn, None)
        if (
            policy.has_specs_for(entry.name, entry.source)
            or self.voters
            or entry.name in ARGUMENT_FLOOR_TOOLS
            or callable(getattr(entry.tool, "sub_calls", None))
        ):
            needs = NEEDS_ARGUMENTS
        elif callable(getattr(entry.tool, "shell_command", None)):
            needs = NEEDS_COMMAND
        else:
            needs = NEEDS_NOTHING
        cache[entry.name] = (verdict, needs)
        return verdict, needs

    def command_verdict(
        self,
        policy: PermissionPolicy,
        tier: ExecTier,
        entry: RegisteredTool,
        turn: TurnContext | None,
        command: tuple[str, str, tuple[str, ...]],
        uncontained: str | None = None,
    ) -> Verdict:
        """The verdict of a ``NEEDS_COMMAND`` tool's call, given the command policy's verdict on its text.

        Nothing else of the input can change it (no argument rule, floor or vote applies to the tool),
        so it is decided once per command-policy verdict (and containment reason) and remembered (bounded).
        """
        key = (self._static_key(policy, tier, turn), entry.name, command, uncontained)
        verdict = self._by_command.get(key)
        if verdict is None:
            if len(self._by_command) >= _BY_COMMAND_ENTRIES:
                self._by_command.clear()
            verdict = self._by_command[key] = _decide_by_name(policy, tier, entry, turn, command, uncontained)
        return verdict

    def _static_key(self, policy: PermissionPolicy, tier: ExecTier, turn: TurnContext | None) -> tuple[int, int, int]:
        # A side question and plan mode deny with different rule ids: each has its own key.
        mode = 0 if turn is None else 20 if turn.side_question else 10 if turn.plan_mode else 0
        return (policy.token, int(tier) + mode, self.registry.generation)


def _decide_by_name(
    policy: PermissionPolicy,
    tier: ExecTier,
    entry: RegisteredTool,
    turn: TurnContext | None,
    command: tuple[str, str, tuple[str, ...]] | None,
    uncontained: str | None = None,
) -> Verdict:
    """A call's verdict from the tool's name alone, and the command policy's verdict on its text if given."""
    return decide_call(
        tool=entry.name,
        facts=entry.facts,
        decision=policy.decide(entry.name, entry.source),
        tier=tier,
        turn=turn,
        input=None,
        names_exactly=policy.names_exactly(entry.name),
        command=command,
        exec_class=command is not None,
        uncontained=uncontained,
    )
