"""The ``[flow]`` configuration: which tools are sinks or untrusted sources, and what an untrusted flow gets.

::

    [flow]
    untrusted_to_sink = "ask"       # a sink argument carrying an untrusted value: allow | ask | deny
    tainted_session = "allow"       # every sink call once the session has read untrusted content
    named_sources = false           # values from a source the user's request names count as the user's
    sinks = ["slack__post_*"]       # more sinks than tools declare (names or globs)
    untrusted = ["notes_import"]    # more untrusted sources than tools declare
    trusted = ["github__*"]         # MCP tools whose output is trusted (MCP tools are untrusted by default)

    [flow.rules]                    # refinements per tool and argument: the most specific rule decides
    "send_money(recipient)" = "deny"
    "send_money(subject)" = "allow" # this argument may carry untrusted text
    "update_password" = "ask"

    [flow.tainted]                  # sinks that get stricter once the session read untrusted content
    "update_password" = "ask"

    [flow.agents.<name>]            # the same keys (not sinks/untrusted/trusted) for one agent
    [flow.channels.<name>]          # ... or one channel

Layers merge like the permission layers: global → agent (each agent of a delegation chain) → channel,
and the most restrictive decision wins, so an agent or channel can only tighten. Plugins tighten
through their tools' facts (declaring more sinks and untrusted outputs) and ``aleph_tool_policy``
votes; only the operator's configuration can trust an MCP server. A workspace's untrusted
``aleph.toml`` cannot set ``[flow]`` at all.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aleph._contract._registry import fold_tool_name
from aleph._contract._types import ToolFacts, ToolSource

__all__ = ["FlowConfig", "FlowLayerConfig", "FlowPolicy", "SinkRules", "ToolMatcher"]

Action = Literal["allow", "ask", "deny"]
_RANK = {"allow": 0, "ask": 1, "deny": 2}
_RULE = re.compile(r"^(?P<name>[A-Za-z0-9_\-*?]{1,128})(?:\((?P<args>[A-Za-z0-9_.\[\]*, ]*)\))?$")


def _check_rule(key: str) -> str:
    if not _RULE.match(key):
        raise ValueError(f"{key!r} is not a flow rule: use a tool name or glob, optionally with (argument, ...)")
    return key


class FlowLayerConfig(BaseModel):
    """One layer of data-flow settings (global, an agent, a channel)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    untrusted_to_sink: Action | None = None
    """What a sink call gets when an argument carries a value first seen in untrusted content (default ``ask``)."""
    tainted_session: Action | None = None
    """What every sink call gets once the session has read untrusted content (default ``allow``)."""
    rules: dict[str, Action] = Field(default_factory=dict)
    """``tool`` or ``tool(arg, ...)`` → the action for an untrusted value in those arguments."""
    tainted: dict[str, Literal["ask", "deny"]] = Field(default_factory=dict)
    """``tool`` (name or glob) → the action when an argument holds a value untrusted content *mentioned*.

    Stricter than ``untrusted_to_sink``: it counts dates, names, codes and quoted values too, and a value
    a trusted tool also returned (an attacker names a hotel from the catalogue). Only the user's request
    clears such a value. For sinks whose arguments carry no identifier (a booking, a new password).
    """

    @field_validator("rules", "tainted")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            _check_rule(key)
        return value


class FlowConfig(FlowLayerConfig):
    """``[flow]``: data-flow rules (see ``docs/dataflow.md``)."""

    named_sources: bool = False
    """Values from an untrusted source the user's request names (a file, a link, an address) count as the user's.

    Off by default: such a source can direct a sink ("pay the bill in bill.txt" pays whatever bill.txt
    says). On, it vouches for an identifier only when it is the one value of its kind in that source,
    and never for a code or password.
    """
    sinks: list[str] = Field(default_factory=list)
    """Tools (names or globs) that are sinks beyond those whose facts say so."""
    untrusted: list[str] = Field(default_factory=list)
    """Tools (names or globs) whose output is untrusted beyond those whose facts say so."""
    trusted: list[str] = Field(default_factory=list)
    """MCP tools (names or globs such as ``github__*``) whose output is trusted."""
    max_values: int = Field(default=10_000, ge=100, le=1_000_000)
    """Untrusted value fingerprints one session keeps (least recently used dropped; then it fails closed)."""
    agents: dict[str, FlowLayerConfig] = Field(default_factory=dict)
    """Per-agent layers."""
    channels: dict[str, FlowLayerConfig] = Field(default_factory=dict)
    """Per-channel layers."""

    @field_validator("sinks", "untrusted", "trusted")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for key in value:
            if "(" in _check_rule(key):
                raise ValueError(f"{key!r}: a tool list takes names or globs, not arguments")
        return value


class ToolMatcher:
    """Names and globs of tools; an MCP pattern ``server__*`` matches the tool's recorded server id only."""

    __slots__ = ("_patterns",)

    def __init__(self, patterns: list[str]) -> None:
        self._patterns = tuple(fold_tool_name(p) if "*" not in p and "?" not in p else p for p in patterns)

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def matches(self, name: str, source: ToolSource) -> bool:
        """Whether a pattern covers tool ``name`` from ``source``."""
        return any(_name_matches(p, name, source) for p in self._patterns)


def _name_matches(pattern: str, name: str, source: ToolSource) -> bool:
    if "__" in pattern:
        server, _, rest = pattern.partition("__")
        if source.type != "mcp" or source.server_id != server or not name.startswith(f"{server}__"):
            return False
        return fnmatchcase(name[len(server) + 2 :], rest)
    return fnmatchcase(fold_tool_name(name), pattern)


@dataclass(frozen=True, slots=True)
class _Rule:
    key: str
    name: str
    args: tuple[str, ...]
    action: str

    @property
    def exact(self) -> bool:
        return "*" not in self.name and "?" not in self.name


def _parse(rules: Mapping[str, str]) -> tuple[_Rule, ...]:
    out = []
    for key, action in rules.items():
        match = _RULE.match(key)
        assert match is not None  # validated with the configuration
        args = tuple(a.strip() for a in (match.group("args") or "").split(",") if a.strip())
        out.append(_Rule(key, match.group("name"), args, action))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SinkRules:
    """What one sink tool gets, per argument, in one merged policy."""

    tool: str
    layers: tuple[tuple[str, str | None, tuple[_Rule, ...]], ...]
    """(layer name, its untrusted_to_sink, the rules that name this tool)."""
    tainted: tuple[tuple[str, str, str], ...]
    """(layer name, rule key, action) of the session-level rules for this tool."""
    session: tuple[str, str | None, str] = ("allow", None, "default")
    """:meth:`when_tainted`, computed once."""
    mentions: tuple[str, str | None, str] = ("allow", None, "default")
    """:meth:`strict`, computed once."""

    def for_argument(self, path: str) -> tuple[str, str | None, str]:
        """(action, rule key, layer) for an untrusted value in argument ``path``; the most restrictive layer wins."""
        top = path.split(".", 1)[0].split("[", 1)[0]
        best: tuple[str, str | None, str] | None = None
        for layer, default, rules in self.layers:
            decided = _most_specific(rules, path, top)
            if decided is not None:
                action, key = decided
            elif default is not None:
                action, key = default, None
            else:
                continue
            if best is None or _RANK[action] > _RANK[best[0]]:
                best = (action, key, layer)
        return best if best is not None else ("ask", None, "default")

    def when_tainted(self) -> tuple[str, str | None, str]:
        """(action, rule key, layer) for any call of the sink once the session read untrusted content."""
        return _worst((layer, key, action) for layer, key, action in self.tainted if key == "tainted_session")

    def strict(self) -> tuple[str, str | None, str]:
        """(action, rule key, layer) of the ``[flow.tainted]`` rules: arguments untrusted content mentioned."""
        return _worst((layer, key, action) for layer, key, action in self.tainted if key != "tainted_session")


def _worst(found: Iterable[tuple[str, str, str]]) -> tuple[str, str | None, str]:
    best: tuple[str, str | None, str] = ("allow", None, "default")
    for layer, key, action in found:
        if _RANK[action] > _RANK[best[0]]:
            best = (action, f"tainted.{key}" if key != "tainted_session" else key, layer)
    return best


def _most_specific(rules: tuple[_Rule, ...], path: str, top: str) -> tuple[str, str] | None:
    """The action of the most specific rule for argument ``path``: argument rules, then exact names, then globs."""
    for tiers in (
        [r for r in rules if r.args and any(fnmatchcase(path, a) or fnmatchcase(top, a) for a in r.args)],
        [r for r in rules if not r.args and r.exact],
        [r for r in rules if not r.args and not r.exact],
    ):
        if tiers:
            worst = max(tiers, key=lambda r: (_RANK[r.action], r.key))
            return worst.action, worst.key
    return None


class FlowPolicy:
    """The configured ``[flow]`` settings, resolved per tool and per principal (cached)."""

    def __init__(self, config: FlowConfig) -> None:
        self.config = config
        self.sinks = ToolMatcher(config.sinks)
        self.untrusted = ToolMatcher(config.untrusted)
        self.trusted = ToolMatcher(config.trusted)
        self._layers = {"global": config, **{f"agent:{a}": c for a, c in config.agents.items()}}
        self._layers.update({f"channel:{c}": v for c, v in config.channels.items()})
        self._rules = {name: _parse(layer.rules) for name, layer in self._layers.items()}
        self._tainted = {name: _parse(dict(layer.tainted)) for name, layer in self._layers.items()}
        self._cache: dict[tuple[str, tuple[str, ...], str | None, int], SinkRules] = {}

    def is_sink(self, name: str, source: ToolSource, facts: ToolFacts) -> bool:
        """Whether calls of the tool are judged as sinks."""
        return facts.sink or (bool(self.sinks) and self.sinks.matches(name, source))

    def output_source(self, name: str, source: ToolSource, facts: ToolFacts) -> str | None:
        """The untrusted-source label of the tool's output, or None when it is trusted."""
        if facts.untrusted_output:
            return facts.untrusted_output
        if self.untrusted and self.untrusted.matches(name, source):
            return "configured untrusted"
        if source.type == "mcp" and not self.trusted.matches(name, source):
            return f"MCP server {source.server_id}"
        return None

    def rules_for(
        self, tool: str, source: ToolSource, agents: tuple[str, ...], channel: str | None, generation: int
    ) -> SinkRules:
        """The merged rules of ``tool`` for a principal acting as ``agents[0]`` for the rest, in ``channel``."""
        key = (tool, agents, channel, generation)  # one tool per name in a registry generation
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        names = ["global", *(f"agent:{a}" for a in dict.fromkeys(agents))]
        if channel is not None:
            names.append(f"channel:{channel}")
        layers: list[tuple[str, str | None, tuple[_Rule, ...]]] = []
        tainted: list[tuple[str, str, str]] = []
        for name in names:
            layer = self._layers.get(name)
            if layer is None:
                continue
            own = tuple(r for r in self._rules[name] if _name_matches(r.name, tool, source))
            layers.append((name, layer.untrusted_to_sink, own))
            if layer.tainted_session is not None:
                tainted.append((name, "tainted_session", layer.tainted_session))
            tainted.extend((name, r.key, r.action) for r in self._tainted[name] if _name_matches(r.name, tool, source))
        if len(self._cache) > 1024:
            self._cache.clear()
        merged = SinkRules(tool, tuple(layers), tuple(tainted))
        merged = dataclasses.replace(merged, session=merged.when_tainted(), mentions=merged.strict())
        self._cache[key] = merged
        return merged
