"""The command-policy floor: what a shell command may never do, whatever tier or rule allows the tool.

:class:`CommandPolicy` parses the command with a real shell grammar (:mod:`aleph._floor._parse`),
lists every command it would run (:mod:`aleph._floor._analysis`) and judges each one:

* **hardline** rules block under every enforcement mode, even with ``enabled = false``
  (device wipes, fork bombs, recursive delete of ``/`` or home, writes into protected files);
* **guards** ask a person when the command cannot be proven safe (dynamic program names, ``eval``
  of computed text, unparseable input, loader/hook variables, builtins that change later
  execution, flags that make a harmless program run another one);
* **tunable** rules (the defaults, ``custom_rules`` and plugin rules) warn, ask or block as declared;
  ``enforcement = "warn"`` turns their block/ask into warn, ``"off"`` skips them.

The verdict is the most severe outcome: block > ask > warn > allow. Running out of the analysis
budget is a block ("too complex to analyse"), never an ask. See docs/command-policy.md.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from aleph._errors import ConfigError
from aleph._floor._analysis import Analysis, Command, Limits, analyse
from aleph._floor._rules import DEFAULT_RULES, GUARDS, HARDLINE, Builtin, Env
from aleph._floor._written import scripts_written

if TYPE_CHECKING:
    from aleph._config import CommandPolicyConfig

__all__ = ["CommandAction", "CommandPolicy", "CommandRule", "CommandVerdict", "SubcommandVerdict"]

CommandAction = Literal["allow", "warn", "ask", "block"]
_SEVERITY: dict[str, int] = {"allow": 0, "warn": 1, "ask": 2, "block": 3}


_MEMO_ENTRIES = 512
_MEMO_MAX_CHARS = 4096


@dataclass(frozen=True, slots=True)
class CommandRule:
    """A tunable rule, from ``custom_rules``, a plugin's ``aleph_command_policy_rules`` hook, or the defaults.

    A rule matches a sub-command when its ``regex`` matches the normalised text (case-insensitive)
    and, if ``program`` is set, the program basename equals it and every item of ``args`` is one of
    its arguments. Set at least one of ``regex`` and ``program``. A bad rule raises ``ValueError``
    naming it: ``rule '<name>': ...``.
    """

    name: str
    action: Literal["block", "warn", "ask"] = "block"
    description: str = ""
    regex: str | None = None
    program: str | None = None
    args: tuple[str, ...] = ()
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", self.name):
            raise ValueError(f"rule {self.name!r}: name must be 1-64 letters, digits, '_', '.', ':' or '-'")
        if self.action not in ("block", "warn", "ask"):
            raise ValueError(f"rule '{self.name}': action must be block, warn or ask (got {self.action!r})")
        if self.regex is None and self.program is None:
            raise ValueError(f"rule '{self.name}': set regex or program")
        if self.program is not None and (not self.program or "/" in self.program):
            raise ValueError(f"rule '{self.name}': program must be a basename such as 'git'")
        given: object = self.args
        if not isinstance(given, tuple):  # a list from a plugin or config
            object.__setattr__(self, "args", tuple(self.args))
        if self.args and self.program is None:
            raise ValueError(f"rule '{self.name}': args needs program")
        if not self.description:
            object.__setattr__(self, "description", f"custom rule '{self.name}'")
        if self.regex is not None:
            try:
                compiled = re.compile(self.regex, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"rule '{self.name}': bad regex {self.regex!r}: {exc}") from None
            object.__setattr__(self, "_compiled", compiled)

    def matches(self, command: Command) -> bool:
        """True when this rule matches one analysed sub-command."""
        if self.program is not None:
            if command.program != self.program:
                return False
            present = {a.text for a in command.args}
            if any(arg not in present for arg in self.args):
                return False
        return self._compiled is None or self._compiled.search(command.text) is not None


@dataclass(frozen=True, slots=True)
class SubcommandVerdict:
    """The decision on one analysed sub-command, for ``aleph policy explain`` and audit."""

    text: str
    program: str
    action: CommandAction
    rules: tuple[str, ...]
    via: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommandVerdict:
    """The floor's decision on one command.

    :ivar action: ``allow``, ``warn`` (log and run), ``ask`` (a person must approve, under every tier)
        or ``block``.
    :ivar rules: every rule that fired, in order.
    :ivar reason: for block ``blocked by command policy [r1, r2]: <description>``; for ask, why the
        command cannot be proven safe; for warn, the warning; ``""`` for allow.
    :ivar programs: basenames of every program found, in order.
    :ivar commands: each analysed sub-command with its own decision.
    :ivar argv: every command it runs as written (program word first, not reduced to its basename),
        for permission rules such as ``bash(git status)``; ``None`` when part of it cannot be known.
    """

    action: CommandAction
    rules: tuple[str, ...]
    reason: str
    programs: tuple[str, ...]
    commands: tuple[SubcommandVerdict, ...] = ()
    argv: tuple[tuple[str, ...], ...] | None = None

    @property
    def allowed(self) -> bool:
        """True for ``allow`` and ``warn``."""
        return self.action in ("allow", "warn")

    def to_json(self) -> dict[str, object]:
        """JSON form for ``aleph policy explain --json`` and the ledger (never includes the command text)."""
        return {
            "action": self.action,
            "rules": list(self.rules),
            "reason": self.reason,
            "programs": list(self.programs),
        }


# -- the policy -------------------------------------------------------------------------------

_BUDGET_RULE = "analysis_budget"


class CommandPolicy:
    """The command-policy floor. Build it once per runtime (:meth:`from_config`); :meth:`check` is pure and cheap.

    :param rules: extra tunable rules (custom and plugin rules).
    :param use_default_rules: include the built-in tunable rules.
    :param enabled: ``False`` keeps only the hardline rules and the cannot-prove-safe guards.
    :param enforcement: ``block`` applies each tunable rule's action, ``warn`` turns them into warnings,
        ``off`` skips them. Hardline rules and guards are not affected.
    :param protected_paths: files and directories no command may write (config files, the data directory).
    :param home: the home directory ``~`` and ``$HOME`` mean (default: the current user's).
    :param limits: the analysis budget.
    """

    def __init__(
        self,
        *,
        rules: Sequence[CommandRule] = (),
        use_default_rules: bool = True,
        enabled: bool = True,
        enforcement: Literal["block", "warn", "off"] = "block",
        protected_paths: Sequence[str | os.PathLike[str]] = (),
        home: Path | str | None = None,
        limits: Limits | None = None,
    ) -> None:
        home_text = os.path.normpath(str(home if home is not None else Path.home()))
        protected = tuple(sorted({_absolute(p, home_text) for p in protected_paths}))
        basenames = tuple(sorted({os.path.basename(p) or p for p in protected}))
        self._env = Env(home=home_text, protected=protected, protected_names=basenames)
        self._limits = limits or Limits()
        self.enforcement = enforcement if enabled else "off"
        _check_names(rules)
        builtins: list[Builtin] = [*HARDLINE, *GUARDS]
        custom: list[CommandRule] = []
        if self.enforcement != "off":
            if use_default_rules:
                builtins.extend(_downgrade(b, self.enforcement) for b in DEFAULT_RULES)
            custom = [_downgrade_rule(r, self.enforcement) for r in rules]
        self._any = tuple(b for b in builtins if b.programs is None)
        # program -> the rules to run on it (its own, then the ones that look at every command)
        self._by_program: dict[str, tuple[Builtin, ...]] = {}
        for b in builtins:
            for program in b.programs or ():
                self._by_program[program] = (*self._by_program.get(program, ()), b)
        self._by_program = {program: (*own, *self._any) for program, own in self._by_program.items()}
        self._custom = tuple(custom)
        # The verdict is a pure function of the text, stdin and cwd (the analysis reads no files, rules are
        # frozen): an agent repeats its commands, so short ones are judged once. Bounded in entries and size.
        self._memo = functools.lru_cache(maxsize=_MEMO_ENTRIES)(self._check)

    @classmethod
    def from_config(
        cls,
        config: CommandPolicyConfig,
        *,
        extra_rules: Sequence[CommandRule] = (),
        protected_paths: Sequence[str | os.PathLike[str]] = (),
        home: Path | None = None,
    ) -> CommandPolicy:
        """Build the policy from ``[sandbox.command_policy]`` plus plugin rules.

        Raises :class:`~aleph.ConfigError` naming a bad custom rule:
        ``sandbox.command_policy.custom_rules: rule 'x': ...``.
        """
        key = "sandbox.command_policy.custom_rules"
        rules: list[CommandRule] = []
        for item in config.custom_rules:
            try:
                rules.append(
                    CommandRule(
                        name=item.name,
                        action=item.action,
                        description=item.description,
                        regex=item.regex,
                        program=item.program,
                        args=tuple(item.args or ()),
                    )
                )
            except ValueError as exc:
                raise ConfigError(str(exc), key=key) from None
        try:
            _check_names(rules)
        except ValueError as exc:
            raise ConfigError(str(exc), key=key) from None
        return cls(
            rules=[*rules, *extra_rules],
            use_default_rules=config.use_default_rules,
            enabled=config.enabled,
            enforcement=config.enforcement,
            protected_paths=protected_paths,
            home=home,
        )

    def simple_commands(self, command: str, *, cwd: Path | None = None) -> tuple[tuple[str, ...], ...] | None:
        """Every command ``command`` would run, as argument tuples (program basename first).

        For permission rules such as ``bash(git status)``.

        ``None`` when the text cannot be fully known (unparseable, dynamic words, computed shell code,
        budget exhausted): an allow rule must never cover what the analyser cannot see.
        """
        analysis = analyse(
            command,
            home=self._env.home,
            cwd=os.path.abspath(cwd) if cwd is not None else None,
            limits=self._limits,
        )
        scripts_written(analysis, self._reanalyse)
        if analysis.budget_exceeded is not None:
            return None
        return _argv(analysis, program_first=True)

    def _reanalyse(self, text: str, cwd: str | None) -> Analysis:
        """Analyse a script's text given inline (see :mod:`aleph._floor._written`)."""
        return analyse(text, home=self._env.home, cwd=cwd, limits=self._limits)

    def check(self, command: str, *, stdin: str | None = None, cwd: Path | None = None) -> CommandVerdict:
        """Judge one shell command.

        ``stdin`` is what it reads (analysed if a shell reads it as a script); ``cwd`` is where it runs
        (relative redirection targets are resolved against it).
        """
        where = os.path.abspath(cwd) if cwd is not None else None
        if len(command) + len(stdin or "") <= _MEMO_MAX_CHARS:
            return self._memo(command, stdin, where)
        return self._check(command, stdin, where)

    def _check(self, command: str, stdin: str | None, cwd: str | None) -> CommandVerdict:
        analysis = analyse(command, home=self._env.home, cwd=cwd, stdin=stdin, limits=self._limits)
        scripts_written(analysis, self._reanalyse)
        if analysis.budget_exceeded is not None:
            return CommandVerdict(
                "block",
                (_BUDGET_RULE,),
                f"blocked by command policy [{_BUDGET_RULE}]: too complex to analyse ({analysis.budget_exceeded})",
                (),
            )
        hits: list[tuple[str, CommandAction, str]] = []
        subs: list[SubcommandVerdict] = []
        programs: dict[str, None] = {}
        for what in analysis.fork_bombs:
            hits.append(("fork_bomb", "block", f"fork bomb: {what}"))
        env = self._env
        for cmd in analysis.commands:
            if cmd.program and not cmd.speculative:
                programs.setdefault(cmd.program)
            mine: list[tuple[str, CommandAction, str]] = []
            for rule in self._by_program.get(cmd.program, self._any):
                if cmd.speculative and rule.tier == "guard":
                    continue
                if rule.check(cmd, env):
                    label = f"{rule.description} ({cmd.program})" if cmd.program else rule.description
                    mine.append((rule.name, rule.action, label))
            for custom in self._custom:
                if custom.matches(cmd):
                    mine.append((custom.name, custom.action, custom.description))
            hits.extend(mine)
            if mine or not cmd.speculative:
                action = _most_severe([a for _, a, _ in mine])
                subs.append(SubcommandVerdict(cmd.text, cmd.program, action, tuple(n for n, _, _ in mine), cmd.via))
        for unknown in analysis.unknowns:
            hits.append((unknown.rule, "ask", unknown.reason))
        return _verdict(hits, tuple(programs), tuple(subs), _argv(analysis))


def _check_names(rules: Sequence[CommandRule]) -> None:
    """Rule names are unique and never shadow a built-in rule (a plugin cannot replace a hardline rule)."""
    names = {b.name for b in (*HARDLINE, *GUARDS, *DEFAULT_RULES)} | {_BUDGET_RULE, "fork_bomb"}
    names |= {"unparseable", "dynamic_program", "dynamic_shell_code", "commands_from_input", "unresolved_cwd"}
    seen: set[str] = set()
    for rule in rules:
        if not isinstance(rule, CommandRule):
            raise TypeError(f"command-policy rules must be aleph.CommandRule instances, got {type(rule).__name__}")
        if rule.name in seen:
            raise ValueError(f"rule '{rule.name}': defined twice")
        if rule.name in names:
            raise ValueError(f"rule '{rule.name}': the name is already used by a built-in rule")
        seen.add(rule.name)


def _most_severe(actions: Sequence[CommandAction]) -> CommandAction:
    best: CommandAction = "allow"
    for action in actions:
        if _SEVERITY[action] > _SEVERITY[best]:
            best = action
    return best


def _argv(analysis: Analysis, *, program_first: bool = False) -> tuple[tuple[str, ...], ...] | None:
    """What the text runs, word for word, or None when any of it is only known at run time.

    ``program_first``: each command's program as its basename (for permission rules) instead of as spelled.
    """
    if analysis.unknowns:
        return None
    out: list[tuple[str, ...]] = []
    for cmd in analysis.commands:
        if cmd.speculative:
            continue
        if any(not a.literal for a in cmd.argv):
            return None
        if cmd.argv:
            out.append((cmd.program, *(a.text for a in cmd.args)) if program_first else tuple(a.text for a in cmd.argv))
    return tuple(out)


def _verdict(
    hits: list[tuple[str, CommandAction, str]],
    programs: tuple[str, ...],
    subs: tuple[SubcommandVerdict, ...],
    argv: tuple[tuple[str, ...], ...] | None = None,
) -> CommandVerdict:
    names = tuple(dict.fromkeys(name for name, _, _ in hits))
    if not hits:
        return CommandVerdict("allow", (), "", programs, subs, argv)
    action = _most_severe([a for _, a, _ in hits])
    chosen = [(n, d) for n, a, d in hits if a == action]
    chosen_names = ", ".join(dict.fromkeys(n for n, _ in chosen))
    first = chosen[0][1]
    if action == "block":
        reason = f"blocked by command policy [{chosen_names}]: {first}"
    elif action == "ask":
        reason = f"command policy needs approval [{chosen_names}]: {first}"
    else:
        reason = f"command policy warning [{chosen_names}]: {first}"
    return CommandVerdict(action, names, reason, programs, subs, argv)


def _absolute(path: str | os.PathLike[str], home: str) -> str:
    text = os.fspath(path)
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    return os.path.normpath(os.path.abspath(text))


def _downgrade(rule: Builtin, enforcement: str) -> Builtin:
    if enforcement == "warn" and rule.action != "warn":
        return Builtin(rule.name, rule.tier, "warn", rule.description, rule.check, rule.programs)
    return rule


def _downgrade_rule(rule: CommandRule, enforcement: str) -> CommandRule:
    if enforcement == "warn" and rule.action != "warn":
        return CommandRule(rule.name, "warn", rule.description, rule.regex, rule.program, rule.args)
    return rule
