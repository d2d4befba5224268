"""The judging half of the chokepoint: one call's verdict from what the call will do.

Everything here judges the call's *validated* arguments (:class:`~aleph._contract._tool.Prepared`), never its
spelling: path rules see the paths the tool will open with symlinks resolved, field rules compare typed
values, plugins vote on a frozen copy, and a composite tool's declared actions are each judged under
their own name.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._boundary import InputProblem, json_input
from aleph._chokepoint._call import MAX_SUBCALL_DEPTH
from aleph._chokepoint._permissions import CallSubjects, PermissionPolicy, stricter
from aleph._chokepoint._shared import NEEDS_ARGUMENTS, NEEDS_COMMAND, NEEDS_NOTHING, Explanation
from aleph._chokepoint._tiers import ExecTier
from aleph._chokepoint._verdict import PolicyVote, Verdict, decide_call, malformed_vote
from aleph._contract._tool import Prepared
from aleph._errors import ToolError, ValidationFailed

if TYPE_CHECKING:
    from aleph._chokepoint._shared import Chokepoint, CommandSplitter
    from aleph._contract._registry import RegisteredTool
    from aleph._turn import TurnContext

__all__ = [
    "NEEDS_ARGUMENTS",
    "NEEDS_COMMAND",
    "NEEDS_NOTHING",
    "Judging",
    "check_name",
    "frozen",
    "prepare_input",
    "resolve_workspace_path",
]

log = logging.getLogger("aleph")


def frozen(value: Any) -> Any:
    """A read-only deep view of JSON data: dicts become mapping proxies, lists tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    return value


def prepare_input(entry: RegisteredTool, input: Any, max_bytes: int) -> Prepared:
    """The boundary check and the tool's own validation: what every gate and the tool then see."""
    try:
        data = json_input(input, max_bytes=max_bytes)
    except InputProblem as exc:
        error = {"field": exc.field or "(input)", "message": str(exc)}
        raise ValidationFailed(entry.name, str(exc), errors=[error]) from None
    prepare = getattr(entry.tool, "prepare", None)
    if prepare is not None:
        prepared = prepare(data)
        if type(prepared) is Prepared:
            return prepared
    return Prepared(data, data, arguments=data)


def resolve_workspace_path(workspace: str, value: str, base: str | None = None) -> str | None:
    """The path a tool would open for ``value``: symlinks resolved, workspace-relative when inside it.

    Relative values resolve against ``base`` (default: the workspace). Returns None for ``~`` paths and
    anything that cannot be resolved (the lexical form is judged alone then).
    """
    if not value or value.startswith("~") or "\x00" in value:
        return None
    try:
        full = value if os.path.isabs(value) else os.path.join(base or workspace, value)
        real = os.path.realpath(full)
    except (OSError, ValueError):
        return None
    if workspace and (real == workspace or real.startswith(workspace.rstrip("/") + "/")):
        rel = os.path.relpath(real, workspace)
        return "." if rel == "." else rel
    return real


class Judging:
    """The judging half of :class:`~aleph.ScopedToolService` (a mixin: it reads the service's fields)."""

    _cp: Chokepoint
    policy: PermissionPolicy
    tier: ExecTier
    agent: str | None
    channel: str | None
    turn: TurnContext | None

    def _entry(self, name: str) -> RegisteredTool | None:
        raise NotImplementedError

    def _is_allowed(self, name: str) -> bool:
        raise NotImplementedError

    # -- one call's verdict ---------------------------------------------------------------------

    def _verdict(
        self,
        entry: RegisteredTool,
        prepared: Prepared | None,
        *,
        depth: int = 0,
        static: tuple[Verdict, int] | None = None,
    ) -> Verdict:
        """The verdict for a call of ``entry``; ``prepared`` None judges the name alone."""
        by_name, needs = (
            static if static is not None else self._cp.static_verdict(self.policy, self.tier, entry, self.turn)
        )
        if prepared is None or not needs or self._denied_whatever_the_input(entry, by_name):
            return by_name
        arguments = prepared.arguments
        shell = getattr(entry.tool, "shell_command", None)
        exec_class = callable(shell)
        command_text = shell(arguments) if callable(shell) else None
        command = None
        cwd: str | _Default | None = _DEFAULT
        uncontained = _uncontained(entry, arguments) if exec_class and self.tier is ExecTier.AUTO else None
        if command_text is not None:
            cwd = _shell_cwd(entry, arguments)
            checker = self._cp.command_checker
            command = (
                (checker(command_text) if isinstance(cwd, _Default) else checker(command_text, cwd))
                if checker is not None
                else ("ask", "no command policy is loaded, so no shell command can be proven safe", ())
            )
            if needs == NEEDS_COMMAND:
                return self._cp.command_verdict(self.policy, self.tier, entry, self.turn, command, uncontained)

        seen: list[CallSubjects] = []

        def subjects() -> CallSubjects:  # collected once, for however many layers have rules for the tool
            if not seen:
                seen.append(self._subjects(entry, arguments, command_text, cwd))
            return seen[0]

        decision = self.policy.decide(entry.name, entry.source, subjects)
        verdict = decide_call(
            tool=entry.name,
            facts=entry.facts,
            decision=decision,
            tier=self.tier,
            turn=self.turn,
            input=arguments,
            names_exactly=self.policy.names_exactly(entry.name),
            command=command,
            votes=self._votes(entry, arguments),
            exec_class=exec_class,
            uncontained=uncontained,
        )
        if verdict.action != "deny" and callable(getattr(entry.tool, "sub_calls", None)):
            verdict = self._with_actions(entry, arguments, verdict, depth)
        return verdict

    def _by_name(self, entry: RegisteredTool, static: tuple[Verdict, int]) -> str | None:
        """The action for every call of ``entry`` when no input can change it (``static``: its name-level verdict)."""
        verdict, needs = static
        if not needs or self._denied_whatever_the_input(entry, verdict):
            return verdict.action
        return None

    def _denied_whatever_the_input(self, entry: RegisteredTool, static: Verdict) -> bool:
        return (
            static.action == "deny"
            and static.rule_id in ("policy_deny", "plan_mode", "side_question")
            and not self.policy.has_specs_for(entry.name, entry.source)
        )

    def _subjects(
        self,
        entry: RegisteredTool,
        arguments: Mapping[str, Any],
        command_text: str | None,
        cwd: str | _Default | None,
    ) -> CallSubjects:
        tool = entry.tool
        named = getattr(tool, "subject_paths", None)
        resolve = getattr(tool, "resolve_subjects", None)
        judged: Mapping[str, Any] = arguments
        if callable(resolve):
            try:
                resolved = dict(resolve(arguments))
            except Exception as exc:  # what cannot be resolved is never covered by an allow
                resolved = {"unresolved": f"{type(exc).__name__}: {exc}"}
            judged = {**resolved, **arguments}  # a resolved fact never shadows an argument
        workspace = self._cp.workspace
        return self.policy.subjects_for(
            judged,
            workspace=workspace,
            shell_command=command_text,
            split_commands=_bound_splitter(self._cp.command_splitter, cwd),
            tool_paths=named(arguments) if callable(named) else (),
            resolve_path=lambda value: resolve_workspace_path(workspace, value),
        )

    def _votes(self, entry: RegisteredTool, arguments: Mapping[str, Any]) -> tuple[tuple[str, PolicyVote], ...]:
        if not self._cp.voters:
            return ()
        view = frozen(dict(arguments))  # a vote can never change what was judged or what runs
        votes = []
        for plugin, fn in self._cp.voters:
            try:
                vote = fn(
                    tool=entry.name,
                    input=view,
                    facts=entry.facts,
                    source=entry.source,
                    turn=self.turn,
                    agent=self.agent,
                    channel=self.channel,
                )
            except Exception as exc:  # a broken voter fails closed for this call
                log.exception("policy plugin %r failed", plugin)
                vote = PolicyVote("ask", f"the policy plugin failed ({type(exc).__name__}), so a human must decide")
            if vote is None:
                continue
            problem = malformed_vote(vote)
            if problem is not None:  # a vote core cannot read refuses the call: a typo must not fail open
                log.error("policy plugin %r: aleph_tool_policy %s", plugin, problem)
                vote = PolicyVote("deny", f"its aleph_tool_policy hook {problem}, so the call is refused")
            votes.append((plugin, vote))
        return tuple(votes)

    # -- composite tools ------------------------------------------------------------------------

    def _declared_actions(self, entry: RegisteredTool, arguments: Mapping[str, Any]) -> Sequence[tuple[str, Any]]:
        try:
            actions = entry.tool.sub_calls(arguments)  # type: ignore[attr-defined]
        except ToolError:
            raise
        except Exception as exc:
            raise ValidationFailed(entry.name, f"its actions cannot be listed: {exc}") from None
        return list(actions or ())

    def action_verdicts(
        self, entry: RegisteredTool, arguments: Mapping[str, Any], depth: int = 0
    ) -> list[tuple[str, Verdict]]:
        """(action name, verdict) for each action a composite call declares it will submit."""
        out = []
        for name, input in self._declared_actions(entry, arguments):
            sub = self._entry(name) if isinstance(name, str) else None
            if sub is None or not self._is_allowed(sub.name):
                out.append((str(name), Verdict("deny", "action_denied", f"its action `{name}` is not available here.")))
                continue
            if depth + 1 >= MAX_SUBCALL_DEPTH:
                out.append((sub.name, Verdict("deny", "action_denied", "its actions nest too deep.")))
                continue
            try:
                prepared = prepare_input(sub, input, self._cp.max_input_bytes)
            except ValidationFailed as exc:
                out.append((sub.name, Verdict("deny", "action_denied", f"its action `{sub.name}` is invalid: {exc}")))
                continue
            out.append((sub.name, self._verdict(sub, prepared, depth=depth + 1)))
        return out

    def _with_actions(
        self, entry: RegisteredTool, arguments: Mapping[str, Any], verdict: Verdict, depth: int
    ) -> Verdict:
        """A composite call is refused up front when any action it declares would be refused.

        It asks when one of its actions would ask, unless the tool submits each action through the
        chokepoint as it runs it (``SUBMITS_ACTIONS``), where that action asks under its own name.
        """
        notes = list(verdict.notes)
        asking: tuple[int, str, Verdict] | None = None
        for i, (name, sub) in enumerate(self.action_verdicts(entry, arguments, depth), 1):
            notes.append(f"action {i} `{name}`: {sub.action} ({sub.rule_id})")
            if sub.action == "deny":
                reason = sub.reason if sub.rule_id == "action_denied" else sub.refusal()
                return Verdict(
                    "deny",
                    "action_denied",
                    f"`{entry.name}` was not run: its action {i} (`{name}`) would be refused — {reason}",
                    sub.rule,
                    sub.layer,
                    sub.decided_by,
                    tuple(notes),
                )
            if sub.action == "ask" and asking is None:
                asking = (i, name, sub)
        if asking is not None and verdict.action == "allow" and not getattr(entry.tool, "SUBMITS_ACTIONS", False):
            i, name, sub = asking
            return Verdict(
                "ask",
                "action_asks",
                f"`{entry.name}` would run its action {i} (`{name}`), which needs approval: {sub.reason}",
                sub.rule,
                sub.layer,
                sub.decided_by,
                tuple(notes),
            )
        return dataclasses.replace(verdict, notes=tuple(notes))

    # -- what a running call may show --------------------------------------------------------------

    def decide(self, entry: RegisteredTool, input: Mapping[str, Any]) -> str:
        """The action for a call of ``entry`` with ``input`` (``deny`` for input that does not validate)."""
        static = self._cp.static_verdict(self.policy, self.tier, entry, self.turn)
        by_name = self._by_name(entry, static)
        if by_name is not None:
            return by_name
        try:
            prepared = prepare_input(entry, input, self._cp.max_input_bytes)
        except ValidationFailed:
            return "deny"
        return self._verdict(entry, prepared, static=static).action

    # -- explain --------------------------------------------------------------------------------

    def explain(self, name: str, input: Mapping[str, Any] | None = None) -> Explanation:
        """The decision for a call without running it: decision, rule, layer, reason, and each action's."""
        tier = self.tier.id
        entry = self._entry(name) if isinstance(name, str) else None
        if entry is None:
            return Explanation("deny", "not_found", None, None, f"tool not found: {name}", tier, "registry")
        if not self._is_allowed(entry.name):
            why = f"`{entry.name}` is not in this agent's allowed_tools."
            return Explanation("deny", "not_allowed", None, "agent", why, tier, "allow-set")
        static, _ = self._cp.static_verdict(self.policy, self.tier, entry, self.turn)
        prepared = None
        if input is None or self._denied_whatever_the_input(entry, static):
            verdict = static  # by name alone: what argument rules would say needs an input
        else:
            try:
                prepared = prepare_input(entry, input, self._cp.max_input_bytes)
                verdict = self._verdict(entry, prepared)
            except ValidationFailed as exc:
                return Explanation("deny", "invalid_input", None, None, str(exc), tier, "boundary")
        if verdict.action == "deny":
            reason = verdict.refusal()
        elif verdict.reason:
            reason = verdict.reason
        else:
            by = f"`{verdict.rule}` in the {verdict.layer} layer" if verdict.rule else "the default"
            reason = f"`{entry.name}` is allowed by {by} under the `{tier}` tier."
        action = verdict.action
        if action != "deny" and prepared is not None and callable(getattr(entry.tool, "sub_calls", None)):
            for sub_name, sub in self.action_verdicts(entry, prepared.arguments):
                if stricter(sub.action, action) != action:
                    action = sub.action
                    reason = f"{reason} Its action `{sub_name}` asks: {sub.reason}"
        return Explanation(
            action, verdict.rule_id, verdict.rule, verdict.layer, reason, tier, verdict.decided_by, verdict.notes
        )


def _opaque(_text: str) -> tuple[tuple[tuple[str, ...], ...], bool]:
    """Without a shell analyser nothing can be seen, so no allow rule covers a command."""
    return (), True


def _bound_splitter(
    splitter: CommandSplitter | None, cwd: str | _Default | None
) -> Callable[[str], tuple[tuple[tuple[str, ...], ...], bool]]:
    if splitter is None:
        return _opaque
    if isinstance(cwd, _Default):
        return splitter
    return lambda text: splitter(text, cwd)


class _Default:
    """The type of "the tool does not say where its command starts" (the floor's own default: the workspace)."""


_DEFAULT = _Default()


def _shell_cwd(entry: RegisteredTool, arguments: Mapping[str, Any]) -> str | _Default | None:
    """Where the tool's command starts: its ``shell_cwd(input)``, else the floor's default (the workspace root).

    A tool that has the method and cannot say (returns None, raises, returns a relative path) gives
    None: then nothing relative in the command is proven safe.
    """
    method = getattr(entry.tool, "shell_cwd", None)
    if not callable(method):
        return _DEFAULT
    try:
        cwd = method(arguments)
    except Exception:  # an unresolvable working directory fails closed
        return None
    return os.path.normpath(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else None


def _uncontained(entry: RegisteredTool, arguments: Mapping[str, Any]) -> str | None:
    """Why an exec-class call cannot be held back as a transaction, or None when it will be."""
    method = getattr(entry.tool, "uncontained", None)
    if not callable(method):
        return "the tool does not say whether its calls run as transactions (it has no `uncontained` method)"
    try:
        reason = method(arguments)
    except Exception as exc:  # cannot tell: not contained
        return f"its containment could not be determined ({type(exc).__name__}: {exc})"
    if reason is None:
        return None
    return str(reason) or "the tool reports its call is not contained"


def check_name(name: object) -> str:
    """A tool name as the chokepoint accepts it: a string, or a clear error."""
    if isinstance(name, str):
        return name
    raise ValidationFailed(repr(name)[:80], f"a tool name must be a string, got {type(name).__name__}")
