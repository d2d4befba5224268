"""The chokepoint's data-flow half: outputs feed provenance in, sinks are judged against it.

Two points of the call path touch it. After a tool ran, :meth:`Provenance._flow_observe` files its
output as trusted or untrusted content of the calling principal's session (cheap for trusted output
while the session has read nothing untrusted: the text is only queued). Before a *sink* runs,
:meth:`Provenance._flow_verdict` looks for identifiers in its arguments that first entered from an
untrusted source and turns the verdict into the ``[flow]`` rule's action, with a reason that names
the flow: "the IBAN in `send_money.recipient` came from `read_email` (call 17), an untrusted source".
A call of a tool that is not a sink pays one attribute test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._verdict import Verdict
from aleph._flow._policy import FlowConfig, FlowPolicy
from aleph._flow._roles import argument_fits
from aleph._flow._state import FlowState, FlowTracker, Origin, StateKey, flat_strings
from aleph._flow._values import MAX_SCAN_CHARS, candidate_values, kind_label

if TYPE_CHECKING:
    from aleph._chokepoint._call import CallContext
    from aleph._contract._registry import RegisteredTool
    from aleph._contract._tool import Prepared
    from aleph._contract._types import ToolOutput
    from aleph._principal import Principal

__all__ = ["DataFlow", "Provenance"]

_RANK = {"allow": 0, "ask": 1, "deny": 2}
_SHOWN_FLOWS = 3
MAX_STEPS = 256
"""Steps of one composite call judged one by one (a longer batch is judged as one sink call)."""


@dataclass(slots=True)
class DataFlow:
    """The runtime's data-flow state: the ``[flow]`` policy and every session's provenance."""

    policy: FlowPolicy = field(default_factory=lambda: FlowPolicy(FlowConfig()))
    tracker: FlowTracker = field(default_factory=FlowTracker)
    _composite: dict[int, tuple[object, bool]] = field(default_factory=dict)
    """id(tool) → (the tool, whether it lists sub-calls): a missing attribute is slow to look up per call."""

    @classmethod
    def from_config(cls, config: FlowConfig) -> DataFlow:
        """The data flow of a validated ``[flow]`` section."""
        return cls(FlowPolicy(config), FlowTracker(max_values=config.max_values))

    def is_sink(self, entry: RegisteredTool) -> bool:
        """Whether calls of ``entry`` are judged (the one check on the hot path): a sink, or a composite.

        A composite tool (one with ``sub_calls``, such as a browser batch) is judged by the steps it
        would take that are sinks themselves (its ``type`` step as ``browser_type``).
        """
        if entry.facts.sink or (bool(self.policy.sinks) and self.policy.sinks.matches(entry.name, entry.source)):
            return True
        tool = entry.tool
        hit = self._composite.get(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        composite = callable(getattr(tool, "sub_calls", None))
        if len(self._composite) >= 4096:
            self._composite.clear()
        self._composite[id(tool)] = (tool, composite)
        return composite

    def is_plain_sink(self, entry: RegisteredTool) -> bool:
        """Whether ``entry`` itself is a sink (its facts or ``[flow] sinks``)."""
        return entry.facts.sink or (bool(self.policy.sinks) and self.policy.sinks.matches(entry.name, entry.source))


def state_key(principal: Principal) -> StateKey:
    """The provenance state a principal's calls read and write."""
    return (principal.agent, principal.channel or "", principal.session or "")


@dataclass(frozen=True, slots=True)
class Flow:
    """One untrusted value found in a sink's arguments, with what the rules say about it."""

    path: str
    kind: str
    origin: Origin
    action: str
    rule: str | None
    layer: str

    def describe(self, tool: str) -> str:
        """The IBAN in `send_money.recipient` came from `read_email` (call 17), an untrusted source (e-mail)."""
        what = "the text" if self.kind == "text" else f"the {kind_label(self.kind)}"
        return f"{what} in `{tool}.{self.path}` came from {self.origin.describe()}"


class Provenance:
    """The data-flow half of :class:`~aleph.ScopedToolService` (a mixin: it reads the service's fields)."""

    principal: Principal

    if TYPE_CHECKING:

        @property
        def _cp(self) -> Any: ...

    def trust(self, text: str) -> None:
        """Pass trusted context for this principal's session: the user's own request, typically.

        Identifiers in ``text`` are trusted in sinks whatever their history, and an untrusted source
        it names (a file, a link, a subject the request mentions) counts as the user's chosen source
        (``[flow] named_sources``). Only the host calls it; no tool can (a tool's text is not the user's).
        """
        if not isinstance(text, str):
            raise TypeError(f"trusted context must be text, not {type(text).__name__}")
        flow: DataFlow | None = self._cp.flow
        if flow is not None:
            flow.tracker.state(state_key(self.principal)).endorse(text)

    def _flow_states(self, flow: DataFlow) -> list[FlowState]:
        """The principal's own state, then those of every principal it acts for (their taint travels along)."""
        principal = self.principal
        own = flow.tracker.state(state_key(principal))
        if not principal.chain:
            return [own]
        return [own, *flow.tracker.states(state_key(p) for p in principal.chain)]

    def _flow_verdict(
        self, entry: RegisteredTool, arguments: Mapping[str, Any], verdict: Verdict, *, whole: bool = False
    ) -> Verdict:
        """The verdict of a sink call once its arguments' provenance is judged (never looser than ``verdict``)."""
        if verdict.action == "deny":
            return verdict
        flow: DataFlow = self._cp.flow
        if not whole and not flow.is_plain_sink(entry):  # a composite: judged by its steps that are sinks
            return self._flow_steps(flow, entry, arguments, verdict)
        states = self._flow_states(flow)
        tainted_by = states[0].tainted_by
        for state in states[1:]:
            tainted_by = tainted_by or state.tainted_by
        if tainted_by is None:
            return verdict  # nothing untrusted entered this session: nothing can flow
        principal = self.principal
        rules = flow.policy.rules_for(
            entry.name, entry.source, principal.agents, principal.channel, self._cp.registry.generation
        )
        config = flow.policy.config
        flows: list[Flow] = []
        named: list[Flow] = []
        for path, text in flat_strings(arguments):
            seen = []
            identifiers = False
            for kind, value in candidate_values(text):
                identifiers = True
                origin = _first(states, kind, value)
                if origin is not None:
                    seen.append((kind, origin))
            if not identifiers:  # a copied line (a command, a sentence) when the text holds no identifier
                for state in states:
                    origin = state.origin_of_text(text)
                    if origin is not None:
                        seen.append(("text", origin))
                        break
            for kind, origin in seen:
                found = Flow(path, kind, origin, *rules.for_argument(path))
                (named if _chosen(config, path, text, origin) else flows).append(found)
        session_action, session_rule, session_layer = rules.session
        strict_action, strict_rule, strict_layer = rules.mentions
        if strict_action != "allow":
            for path, text in flat_strings(arguments):
                for state in states:
                    hit = state.mention_of(text)
                    if hit is not None:
                        found = Flow(path, hit[0], hit[1], strict_action, strict_rule, strict_layer)
                        (named if _chosen(config, path, text, hit[1]) else flows).append(found)
                        break
        if not flows and not named and session_action == "allow":
            return verdict  # the common case: nothing untrusted in the arguments
        worst = max(flows, key=lambda f: _RANK[f.action], default=None)
        notes = [*verdict.notes, *(f"flow: {f.describe(entry.name)}, a source the user's request named" for f in named)]
        action, reason, rule, layer = "allow", "", None, None
        if worst is not None and worst.action != "allow":
            shown = [f.describe(entry.name) for f in flows if f.action != "allow"]
            more = f" (and {len(shown) - _SHOWN_FLOWS} more)" if len(shown) > _SHOWN_FLOWS else ""
            text = "; ".join(shown[:_SHOWN_FLOWS]) + more
            action, rule, layer = worst.action, worst.rule or "untrusted_to_sink", worst.layer
            reason = f"Data flow: {text[0].upper()}{text[1:]}. `{entry.name}` sends data out or acts for the user"
            reason += ", so a human must confirm this value is wanted." if action == "ask" else ", so it is refused."
        if _RANK[session_action] > _RANK[action]:
            action, rule, layer = session_action, session_rule, session_layer
            reason = (
                f"Data flow: this session has read untrusted content (first from {tainted_by.describe()}), and "
                f"`[flow] {session_rule}` makes every `{entry.name}` call {'ask' if action == 'ask' else 'refused'}."
            )
        notes.extend(f"flow: {f.describe(entry.name)}" for f in flows)
        if action == "allow" or _RANK[action] < _RANK[verdict.action]:
            return _with_notes(verdict, notes)
        return Verdict(action, "data_flow", reason, rule, f"flow {layer}", "flow", tuple(notes))  # type: ignore[arg-type]

    def _flow_steps(
        self, flow: DataFlow, entry: RegisteredTool, arguments: Mapping[str, Any], verdict: Verdict
    ) -> Verdict:
        """A composite call's verdict: each of its steps that is a sink judged as that tool's own call."""
        try:
            steps = list(entry.tool.sub_calls(arguments))  # type: ignore[attr-defined]
        except Exception:  # steps that cannot be listed: all of its arguments are judged as one sink call
            return self._flow_verdict(entry, arguments, verdict, whole=True)
        if len(steps) > MAX_STEPS:  # too many to judge one by one: all of its arguments as one sink call
            return self._flow_verdict(entry, arguments, verdict, whole=True)
        for name, step_arguments in steps:
            step = self._cp.registry.get(name) if isinstance(name, str) else None
            if step is None or not flow.is_plain_sink(step) or not isinstance(step_arguments, Mapping):
                continue
            verdict = self._flow_verdict(step, step_arguments, verdict, whole=True)
            if verdict.action == "deny":
                break
        return verdict

    def _flow_observe(self, entry: RegisteredTool, prepared: Prepared, output: ToolOutput, call: CallContext) -> None:
        """File a finished call's output as trusted or untrusted content of this principal's session.

        The call's arguments (``prepared.arguments``) are read only for untrusted output, which they may name.
        """
        flow: DataFlow = self._cp.flow
        state = flow.tracker.state(state_key(self.principal))
        state.calls += 1
        label = flow.policy.output_source(entry.name, entry.source, entry.facts)
        parts = call.untrusted_parts
        if label is None and not parts:
            state.saw_trusted(output.text)
            return
        call_id = call.call_id if call.turn is not None and call.turn.call_id else str(state.calls)
        named_by = [text for _, text in flat_strings(prepared.arguments)]
        if label is not None or any(not text for text, _ in parts):
            origin = Origin("text", entry.name, call_id, label or parts[-1][1])
            state.saw_untrusted(leaf_text(output.value), origin, named_by)
            return
        for text, source in parts:
            state.saw_untrusted(text, Origin("text", entry.name, call_id, source), named_by)
        state.saw_trusted(output.text)


def leaf_text(value: Any) -> str:
    """The texts of a JSON output (keys and strings, one per line): judged as written, not as JSON-quoted."""
    if isinstance(value, str):
        return value
    parts: list[str] = []
    size = 0
    stack = [value]
    while stack and size < MAX_SCAN_CHARS:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            size += len(item) + 1
        elif isinstance(item, Mapping):
            for key, inner in reversed(list(item.items())):
                stack.append(inner)
                stack.append(str(key))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
        elif item is not None and not isinstance(item, bool):
            parts.append(str(item))
    return "\n".join(parts)


def _chosen(config: FlowConfig, path: str, text: str, origin: Origin) -> bool:
    """Whether the user's request chose this value: its named source, or the role it asked that source for."""
    if origin.named and config.named_sources:
        return True
    return origin.role and config.named_roles and argument_fits(path, text, origin.kind)


def _first(states: list[FlowState], kind: str, value: str) -> Origin | None:
    for state in states:
        origin = state.origin_of(kind, value)
        if origin is not None:
            return origin
    return None


def _with_notes(verdict: Verdict, notes: list[str]) -> Verdict:
    if len(notes) == len(verdict.notes):
        return verdict
    return dataclasses.replace(verdict, notes=tuple(notes))
