"""Tool permission rules: parsing, validation, matching and the layered decision.

A *layer* is one ``tool_permissions`` table (global, an agent, a channel): a default action and
rules. A rule key is a tool name, a name glob, or either with an argument specifier::

    bash                      exact tool name
    "*_delete"                name glob (* and ? only; never crosses into another server's tools)
    "github__*"               every tool of the MCP server whose recorded id is "github"
    "bash(git status)"        a shell command (each analysed sub-command is matched)
    "bash(git log *)"         a command prefix: a final "*" word matches any further words
    "file_read(src/**)"       a workspace-relative path glob: "*" stays inside one segment, "**" crosses
    "web_fetch(domain:example.com)"   a URL host (or "*.example.com")
    "file_ops(operation=delete)"      an argument value (glob)

Inside one layer the most specific rules decide: argument rules, then the exact name, then name
globs (most restrictive wins among globs; ties go to the smallest key). Across layers the most
restrictive decision wins: deny > ask > allow. An allow argument rule applies only when it covers
*every* subject of the call (every sub-command, every path, every URL); deny and ask rules apply
when they match *any*. A command the shell analyser cannot prove safe is never covered by an allow.
"""

from __future__ import annotations

import ipaddress
import itertools
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aleph._chokepoint._ruleindex import RulePlan
from aleph._chokepoint._subjects import UNKNOWN_HOST, Glob, canonical_host, glob_regex, normalise_path
from aleph._config import ToolPermissionsConfig
from aleph._contract._registry import fold_tool_name
from aleph._contract._types import ToolSource
from aleph._errors import ConfigError

__all__ = [
    "Action",
    "CallSubjects",
    "LayerDecision",
    "PermissionLayer",
    "PermissionPolicy",
    "PermissionRule",
    "PolicyDecision",
    "stricter",
]

Action = Literal["allow", "ask", "deny"]
_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}

SHELL_TOOLS = frozenset({"bash", "code_exec", "node_invoke", "node_invoke_many"})
"""Tools whose unprefixed argument specifier is a command pattern (others: a path glob)."""

PATH_KEYS = (
    "path",
    "file_path",
    "paths",
    "source",
    "destination",
    "dest",
    "directory",
    "working_dir",
    "cwd",
    "files",
    "target_path",
    "output_path",
)
URL_KEYS = ("url", "uri", "href", "endpoint", "urls")
_SUBJECT_KEYS = frozenset(PATH_KEYS + URL_KEYS)

_PLANS_PER_LAYER = 4096
"""Compiled argument-rule plans a layer keeps (one per tool called); past it they are built again."""
_NAME_PATTERN = re.compile(r"[A-Za-z0-9_\-*?]{1,128}", re.ASCII)
_RULE = re.compile(r"^(?P<name>[^()\s]+)(?:\((?P<spec>.*)\))?$", re.DOTALL)


def stricter(a: Action, b: Action) -> Action:
    """The more restrictive of two actions (deny > ask > allow)."""
    return a if _RANK[a] >= _RANK[b] else b


@dataclass(frozen=True, slots=True)
class CallSubjects:
    """What argument rules look at in one call.

    ``commands`` holds the argv of every sub-command the shell analyser could see; ``opaque`` is true when
    part of the text could not be analysed, so no allow rule may cover the call (deny and ask rules still
    match the parts that were seen).
    """

    commands: tuple[tuple[str, ...], ...] = ()
    opaque: bool = False
    paths: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    arguments: Mapping[str, Any] = field(default_factory=dict)
    is_shell: bool = False


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One parsed rule key with its action."""

    key: str
    action: Action
    name_pattern: str
    spec_kind: Literal["none", "command", "path", "domain", "field"]
    spec: str = ""
    _name: Glob | None = None
    _server: Glob | None = None
    _spec: Any = None

    @property
    def is_exact(self) -> bool:
        """The name part names one tool (no ``*``/``?``)."""
        return "*" not in self.name_pattern and "?" not in self.name_pattern

    def matches_name(self, name: str, source: ToolSource | None) -> bool:
        """Whether the name part covers tool ``name`` from ``source`` (both folded like the registry folds)."""
        name = fold_tool_name(name)
        if "__" in self.name_pattern:
            # Server-level patterns match the tool's recorded MCP server id, never the raw string.
            if source is None or source.type != "mcp" or source.server_id is None or "__" not in name:
                return False
            server = fold_tool_name(source.server_id)
            if not name.startswith(server + "__"):
                return False
            server_part, _, tool_part = self.name_pattern.partition("__")
            inner = name[len(server) + 2 :]
            if self._server is not None:
                if not self._server.fullmatch(server):
                    return False
            elif server_part != server:
                return False
            if self._name is not None:  # compiled from the tool part at parse time
                return self._name.fullmatch(inner) is not None
            return tool_part == inner
        if self._name is None:
            return self.name_pattern == name
        return self._name.fullmatch(name) is not None

    def subjects_of(self, call: CallSubjects) -> list[Any] | None:
        """The call's subjects this rule judges; None when they cannot be known (opaque shell text)."""
        kind = self.spec_kind
        if kind == "command":
            return list(call.commands)
        if kind == "path":
            return list(call.paths)
        if kind == "domain":
            return list(call.hosts)
        return [call.arguments]

    def matches_subject(self, subject: Any) -> bool:
        """Whether one subject (argv, path, host or the argument map) matches the specifier."""
        kind = self.spec_kind
        if kind == "command":
            # an allow covers only the program the analyser proved (a path-qualified or workspace
            # program word stays a path); a deny or ask also catches it by its basename
            return _command_matches(self._spec, subject, by_basename=self.action != "allow")
        if kind == "domain" and subject == UNKNOWN_HOST:
            return self.action != "allow"  # a host no parser agrees on: a deny or ask may apply, an allow never
        if kind in ("path", "domain"):
            return bool(self._spec.fullmatch(subject))
        key, text, value_re = self._spec
        value = subject.get(key)
        if isinstance(value, (list, tuple)):  # any listed value for deny/ask; every one for an allow
            if not value:
                return False
            results = (_field_matches(text, value_re, item) for item in value)
            return all(results) if self.action == "allow" else any(results)
        return _field_matches(text, value_re, value)


def _field_matches(text: str, pattern: Glob, value: Any) -> bool:
    """A field rule's value against a validated argument, compared by type.

    Booleans match only ``true``/``false`` and null only ``null`` (any case); a number matches a
    numeric rule value by value (``1`` matches ``1.0``) and otherwise by its JSON text; strings by glob.
    """
    if isinstance(value, bool):
        return text.lower() == ("true" if value else "false")
    if value is None:
        return text.lower() == "null"
    if isinstance(value, (int, float)):
        try:  # compared exactly: an int too large for a float (or not one exactly) equals no float
            return float(text) == value
        except ValueError:
            return pattern.fullmatch(str(value)) is not None
    if isinstance(value, str):
        return pattern.fullmatch(value) is not None
    return False


def _command_matches(pattern: tuple[str | Glob, ...], argv: tuple[str, ...], *, by_basename: bool = True) -> bool:
    words = list(argv)
    head = pattern[0] if pattern else None
    if words and isinstance(head, str) and "/" in head:
        # a rule spelling a path (`./scripts/check.sh`) matches that path, deny and allow alike
        if posixpath.normpath(words[0]) != posixpath.normpath(head):
            return False
        words[0] = head
    elif words and by_basename:
        words[0] = posixpath.basename(words[0])
    for i, part in enumerate(pattern):
        if part == "*" and i == len(pattern) - 1:
            return True
        if i >= len(words):
            return False
        if isinstance(part, str):
            if part != words[i]:
                return False
        elif not part.fullmatch(words[i]):
            return False
    return len(words) == len(pattern)


def parse_rule(key: str, action: Action, *, workspace: str = "") -> PermissionRule:
    """Parse and validate a rule key; a malformed or never-matchable rule raises ValueError saying why."""
    if not isinstance(key, str) or not key.strip():
        raise ValueError("empty rule")
    match = _RULE.fullmatch(key.strip())
    if match is None:
        raise ValueError("expected NAME or NAME(SPECIFIER) with balanced parentheses")
    name = match.group("name")
    spec = match.group("spec")
    if not _NAME_PATTERN.fullmatch(name):
        raise ValueError(f"tool part {name!r} may only use ASCII letters, digits, '_', '-', '*' and '?'")
    # Rules name tools the way calls reach them: case and separators fold exactly as the registry folds.
    name = fold_tool_name(name)
    if name.startswith("__") or name.endswith("__"):
        raise ValueError(f"{name!r}: MCP rules are '<server>__<tool>'")
    # For '<server>__<tool>' rules the pattern compiles the tool part; the server part is matched separately.
    tool_part = name.partition("__")[2] if "__" in name else name
    name_re = glob_regex(tool_part, path=False) if "*" in tool_part or "?" in tool_part else None
    server_re = None
    if "__" in name:
        server_part = name.partition("__")[0]
        if not server_part:
            raise ValueError(f"{name!r}: missing server id before '__'")
        if "*" in server_part or "?" in server_part:
            server_re = glob_regex(server_part, path=False)
    if spec is None:
        return PermissionRule(key, action, name, "none", "", name_re, server_re)
    spec = spec.strip()
    if not spec:
        raise ValueError("empty argument specifier '()' never matches; drop the parentheses")
    kind: Literal["command", "path", "domain", "field"]
    compiled: Any
    if spec.startswith("domain:"):
        host = spec[len("domain:") :].strip().lower().rstrip(".")
        if host and "*" not in host:
            try:
                host = str(ipaddress.ip_address(host.strip("[]")))
            except ValueError:
                host = canonical_host(f"//{host}") or host
        if not host or "/" in host or not re.fullmatch(r"[a-z0-9.*\-\[\]:]+", host):
            raise ValueError(f"domain specifier {spec!r} needs a host such as example.com or *.example.com")
        kind, compiled = "domain", glob_regex(host, path=True)
    elif spec.startswith(("cmd:", "command:")):
        kind, compiled = "command", _command_pattern(spec.partition(":")[2])
    elif spec.startswith("path:"):
        kind, compiled = "path", _path_pattern(spec[len("path:") :], workspace)
    elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", spec, re.DOTALL):
        arg, _, value = spec.partition("=")
        kind, compiled = "field", (arg, value.strip(), glob_regex(value.strip(), path=False))
    elif name in SHELL_TOOLS or (
        "__" not in name and name_re is not None and any(name_re.fullmatch(t) for t in SHELL_TOOLS)
    ):
        kind, compiled = "command", _command_pattern(spec)
    else:
        kind, compiled = "path", _path_pattern(spec, workspace)
    return PermissionRule(key, action, name, kind, spec, name_re, server_re, compiled)


def _command_pattern(text: str) -> tuple[str | Glob, ...]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"command specifier {text!r} does not parse: {exc}") from None
    if not words:
        raise ValueError("empty command specifier never matches")
    if words[0] == "*" and len(words) == 1:
        raise ValueError("'(*)' covers every command; write the bare tool name instead")
    out: list[str | Glob] = []
    for i, word in enumerate(words):
        if word == "*" and i == len(words) - 1:
            out.append("*")
        elif "*" in word or "?" in word:
            out.append(glob_regex(word, path=False))
        else:
            # an absolute program names the system's program (`/usr/bin/git` is `git`); a relative
            # path (`./scripts/check.sh`) names exactly that workspace file
            out.append(posixpath.basename(word) if i == 0 and word.startswith("/") else word)
    return tuple(out)


def _path_pattern(text: str, workspace: str) -> Glob:
    text = text.strip()
    if not text:
        raise ValueError("empty path specifier never matches")
    if "\x00" in text:
        raise ValueError("path specifier contains a NUL byte")
    normal = normalise_path(text, workspace)
    if normal == ".." or normal.startswith("../"):
        raise ValueError(
            f"path {text!r} points outside the workspace and can never match a workspace-relative path; "
            "use an absolute path"
        )
    return glob_regex(normal, path=True)


@dataclass(frozen=True, slots=True)
class LayerDecision:
    """One layer's verdict: the action, the rule key that decided (None = the layer default)."""

    action: Action
    rule: str | None
    explicit: bool


class PermissionLayer:
    """One validated ``tool_permissions`` table."""

    def __init__(self, name: str, default: Action, rules: Sequence[PermissionRule]) -> None:
        self.name = name
        self.default: Action = default
        self.rules = list(rules)
        self.exact = {r.name_pattern: r for r in self.rules if r.spec_kind == "none" and r.is_exact}
        exact_ids = {id(r) for r in self.exact.values()}  # by identity: `in dict.values()` made this quadratic
        self.globs = sorted(
            (r for r in self.rules if r.spec_kind == "none" and id(r) not in exact_ids), key=lambda r: r.key
        )
        self.specs = [r for r in self.rules if r.spec_kind != "none"]
        # Argument rules indexed by the one tool they name, so a call tries only its own; rules naming a
        # pattern or a server's tools stay in a list tried one by one. Positions keep the table's order.
        self._spec_by_name: dict[str, list[tuple[int, PermissionRule]]] = {}
        self._spec_wild: list[tuple[int, PermissionRule]] = []
        for position, rule in enumerate(self.specs):
            if rule.is_exact and "__" not in rule.name_pattern:
                self._spec_by_name.setdefault(rule.name_pattern, []).append((position, rule))
            else:
                self._spec_wild.append((position, rule))

        self._plans: dict[tuple[str, ToolSource | None], RulePlan[PermissionRule]] = {}

    def specs_for(self, name: str, source: ToolSource | None) -> list[PermissionRule]:
        """The argument rules whose name part covers tool ``name``, in the table's order."""
        return [rule for _, rule in self._positioned_specs(name, source)]

    def _positioned_specs(self, name: str, source: ToolSource | None) -> list[tuple[int, PermissionRule]]:
        named = self._spec_by_name.get(fold_tool_name(name), [])
        wild = [entry for entry in self._spec_wild if entry[1].matches_name(name, source)]
        if not wild:
            return list(named)
        return sorted([*named, *wild], key=lambda entry: entry[0])

    def plan_for(self, name: str, source: ToolSource | None) -> RulePlan[PermissionRule]:
        """Tool ``name``'s argument rules compiled for lookup (built on its first call, then kept; bounded)."""
        key = (fold_tool_name(name), source)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _PLANS_PER_LAYER:
                self._plans.clear()
            plan = self._plans[key] = RulePlan(self._positioned_specs(name, source))
        return plan

    @classmethod
    def from_config(
        cls,
        name: str,
        config: ToolPermissionsConfig | Mapping[str, Any],
        *,
        workspace: str = "",
        origin: str | None = None,
        key_prefix: str = "",
    ) -> PermissionLayer:
        """Validate a table; a bad rule is a :class:`ConfigError` naming the rule (the layer fails closed)."""
        if not isinstance(config, ToolPermissionsConfig):
            try:
                config = ToolPermissionsConfig.model_validate(config)
            except Exception as exc:
                raise ConfigError(f"malformed permission layer: {exc}", file=origin, key=key_prefix or name) from None
        rules = []
        for key, action in config.overrides.items():
            try:
                rules.append(parse_rule(key, action, workspace=workspace))
            except ValueError as exc:
                raise ConfigError(
                    f"rule {key!r}: {exc}", file=origin, key=f"{key_prefix}.overrides" if key_prefix else name
                ) from None
        return cls(name, config.default, rules)

    @property
    def is_trivial(self) -> bool:
        """Default allow and no rules: the layer changes nothing."""
        return self.default == "allow" and not self.rules

    def has_specs_for(self, name: str, source: ToolSource | None) -> bool:
        """Whether any argument rule could apply to tool ``name``."""
        if fold_tool_name(name) in self._spec_by_name:
            return True
        return any(entry[1].matches_name(name, source) for entry in self._spec_wild)

    def decide_name(self, name: str, source: ToolSource | None) -> LayerDecision:
        """The decision from name rules only (exact, then globs), else the default."""
        exact = self.exact.get(fold_tool_name(name))
        if exact is not None and exact.matches_name(name, source):
            return LayerDecision(exact.action, exact.key, True)
        best: PermissionRule | None = None
        for rule in self.globs:
            if rule.matches_name(name, source) and (best is None or _RANK[rule.action] > _RANK[best.action]):
                best = rule
        if best is not None:
            return LayerDecision(best.action, best.key, True)
        return LayerDecision(self.default, None, False)

    def decide(
        self, name: str, source: ToolSource | None, subjects: Callable[[], CallSubjects] | None
    ) -> LayerDecision:
        """The layer's decision for one call; argument rules first when ``subjects`` is given."""
        if subjects is not None and self.specs:
            plan = self.plan_for(name, source)
            if plan.rules:
                call = subjects()
                for wanted in ("deny", "ask"):
                    rule = plan.refusal(call, wanted)
                    if rule is not None:
                        return LayerDecision(rule.action, rule.key, True)
                for kind, group in plan.allow_groups:
                    if kind == "command" and call.opaque:
                        continue  # what the analyser could not see is never covered by an allow
                    subs = group[0].subjects_of(call)
                    if subs and all(any(r.matches_subject(s) for r in group) for s in subs):
                        return LayerDecision(
                            "allow",
                            group[0].key
                            if len(group) == 1
                            else next(r.key for r in group if r.matches_subject(subs[0])),
                            True,
                        )
        return self.decide_name(name, source)


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """The merged verdict of every layer for one call."""

    action: Action
    rule: str | None
    layer: str
    explicit: bool

    def describe(self) -> str:
        """``rule `x` in layer y`` or ``the default of layer y``."""
        if self.rule is None:
            return f"the default `{self.action}` of the {self.layer} layer"
        return f"`{self.rule}` = {self.action} in the {self.layer} layer"


_TOKENS = itertools.count(1)


class PermissionPolicy:
    """Layers merged global → agent → channel; the most restrictive decision wins."""

    def __init__(self, layers: Sequence[PermissionLayer]) -> None:
        self.token = next(_TOKENS)
        """A process-unique id that caches key on (never reused, unlike ``id()``)."""
        self.layers = [layer for layer in layers if not layer.is_trivial]
        self.default: Action = "allow"
        for layer in self.layers:
            self.default = stricter(self.default, layer.default)

    @property
    def is_empty(self) -> bool:
        """No layer changes anything: every tool is allowed before tier tightening."""
        return not self.layers

    def has_specs_for(self, name: str, source: ToolSource | None) -> bool:
        """Whether any layer has an argument rule that could apply to ``name``."""
        return any(layer.has_specs_for(name, source) for layer in self.layers)

    def decide(
        self, name: str, source: ToolSource | None = None, subjects: Callable[[], CallSubjects] | None = None
    ) -> PolicyDecision:
        """Merge every layer's decision; explicit when any layer named the tool."""
        if not self.layers:
            return PolicyDecision("allow", None, "default", False)
        best: LayerDecision | None = None
        best_layer = ""
        explicit = False
        for layer in self.layers:
            d = layer.decide(name, source, subjects)
            explicit = explicit or d.explicit
            better = (
                best is None
                or _RANK[d.action] > _RANK[best.action]
                or (_RANK[d.action] == _RANK[best.action] and d.explicit and not best.explicit)
            )
            if better:
                best, best_layer = d, layer.name
        assert best is not None
        return PolicyDecision(best.action, best.rule, best_layer, explicit)

    def allowing_rules(self, name: str, source: ToolSource | None = None) -> list[str] | None:
        """For a tool denied by name: the argument rules under which some call of it is still allowed.

        None when no call can be allowed (a layer denies the name and has no allow or ask argument rule
        for it); then the tool is hidden. Used so a tool is listed exactly when some call of it could run.
        """
        keys: list[str] = []
        for layer in self.layers:
            if layer.decide_name(name, source).action != "deny":
                continue
            rescue = [r.key for r in layer.specs_for(name, source) if r.action != "deny"]
            if not rescue:
                return None
            keys.extend(rescue)
        return keys or None

    def names_exactly(self, name: str) -> bool:
        """Whether some layer has an exact, argument-free rule for ``name`` (stands down argument floors)."""
        folded = fold_tool_name(name)
        return any(folded in layer.exact for layer in self.layers)

    def subjects_for(
        self,
        input: Mapping[str, Any],
        *,
        workspace: str,
        shell_command: str | None,
        split_commands: Callable[[str], tuple[tuple[tuple[str, ...], ...], bool]],
        tool_paths: Sequence[str] = (),
        resolve_path: Callable[[str], str | None] | None = None,
    ) -> CallSubjects:
        """Collect the argument subjects of one call; ``tool_paths`` are paths the tool itself names (nested ones).

        With ``resolve_path``, each path is judged both as written and as the file it resolves to (symlinks
        followed), so a deny matches either and an allow must cover both.
        """
        paths: list[str] = []

        def add(item: str) -> None:
            normal = normalise_path(item, workspace)
            paths.append(normal)
            real = resolve_path(item) if resolve_path is not None else None
            if real is not None and real != normal:
                paths.append(real)

        for named in tool_paths:
            if isinstance(named, str) and named:
                add(named)
        hosts: list[str] = []
        if not _SUBJECT_KEYS.isdisjoint(input):  # most calls name no path or URL: skip both scans
            for key in PATH_KEYS:
                value = input.get(key)
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str) and item:
                        add(item)
            for key in URL_KEYS:
                value = input.get(key)
                for url in value if isinstance(value, list) else [value]:
                    if isinstance(url, str) and url:
                        hosts.append(canonical_host(url) or UNKNOWN_HOST)
        commands: tuple[tuple[str, ...], ...] = ()
        opaque = False
        if shell_command is not None:
            commands, opaque = split_commands(shell_command)
        return CallSubjects(commands, opaque, tuple(paths), tuple(hosts), input, shell_command is not None)
