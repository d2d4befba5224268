"""Access control set-up: the permission layers of every agent and channel, validated at load.

Layers come from ``[policies.tool_permissions]`` (global), ``[agents.<a>.tool_permissions]`` and
``[channels.<c>.tool_permissions]``. A malformed rule is a configuration error naming the rule, so a
present-but-broken layer never silently falls away. Request-time layers (a channel's permissions
stamped into a request) that do not validate fail closed: they deny everything.
"""

from __future__ import annotations

import inspect
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from itertools import chain
from pathlib import Path
from typing import Any

from aleph._chokepoint._approval import ApprovalRequester
from aleph._chokepoint._gate import ApprovalGate
from aleph._chokepoint._permissions import PermissionLayer, PermissionPolicy
from aleph._chokepoint._shared import Chokepoint, CommandChecker, CommandSplitter
from aleph._chokepoint._tiers import ExecTier, resolve_exec_tier
from aleph._config import AlephConfig, ToolPermissionsConfig
from aleph._contract._registry import ToolRegistry, fold_tool_name
from aleph._contract._types import ToolSource
from aleph._errors import ConfigError
from aleph._floor._policy import CommandPolicy, CommandRule
from aleph._floor._wrappers import BUILTINS
from aleph._flow._gate import DataFlow
from aleph._flow._policy import FlowConfig
from aleph._ledger import Ledger, ledger_directory
from aleph._ledger._events import EventLog
from aleph._plugins._loader import PluginManager
from aleph._seal import StateSeal
from aleph._turn import TurnContext

__all__ = ["REQUEST_POLICY_CACHE", "AccessControl", "build_chokepoint"]

REQUEST_POLICY_CACHE = 256
"""Distinct request-time permission tables (per agent and channel) kept parsed, least recently used dropped."""


def _workspace_key(layer: str) -> str:
    """The config key a workspace layer came from: ``global`` → ``policies.tool_permissions``."""
    kind, _, name = layer.partition(":")
    return f"{kind}s.{name}.tool_permissions" if name else "policies.tool_permissions"


class AccessControl:
    """Validated permission layers and tier settings, with one merged policy per (agent, channel)."""

    def __init__(self, config: AlephConfig) -> None:
        self.config = config
        workspace = str(config.workspace_root)
        self._workspace = workspace
        self.global_layer = self._layer("global", "policies.tool_permissions", config.policies.tool_permissions)
        self.agent_layers = {
            name: self._layer(f"agent:{name}", f"agents.{name}.tool_permissions", agent.tool_permissions)
            for name, agent in config.agents.items()
            if agent.tool_permissions is not None
        }
        self.channel_layers = {
            name: self._layer(f"channel:{name}", f"channels.{name}.tool_permissions", channel.tool_permissions)
            for name, channel in config.channels.items()
            if channel.tool_permissions is not None
        }
        # An untrusted workspace's own aleph.toml only restricts: each of its tables is one more layer.
        source = (config.workspace_file or {}).get("file")
        self.workspace_layers = {
            key: PermissionLayer.from_config(
                f"workspace {key} ({source}, untrusted: it may only restrict)",
                table,
                workspace=workspace,
                origin=source,
                key_prefix=_workspace_key(key),
            )
            for key, table in config.workspace_layers.items()
        }
        self._policies: dict[tuple[str | None, str | None], PermissionPolicy] = {}
        self._request_policies: OrderedDict[tuple[str | None, str | None, Hashable], PermissionPolicy] = OrderedDict()
        self._lock = threading.Lock()

    def _layer(self, name: str, key: str, table: ToolPermissionsConfig) -> PermissionLayer:
        """Validate one configured layer; a bad rule is a ConfigError naming the file, the key and the rule."""
        return PermissionLayer.from_config(
            name, table, workspace=self._workspace, origin=self.config.origin(key), key_prefix=key
        )

    def policy(
        self, agent: str | None = None, channel: str | None = None, channel_permissions: Mapping[str, Any] | None = None
    ) -> PermissionPolicy:
        """The merged policy global → agent → channel (cached); ``channel_permissions`` adds a request layer."""
        if channel_permissions is not None:
            return self._request_policy(agent, channel, channel_permissions)
        key = (agent, channel)
        policy = self._policies.get(key)
        if policy is None:
            with self._lock:
                policy = self._policies.get(key)
                if policy is None:
                    policy = self._policies[key] = PermissionPolicy(self._layers(agent, channel))
        return policy

    def chain_policy(
        self, agents: tuple[str, ...], channel: str | None, channel_permissions: Mapping[str, Any] | None = None
    ) -> PermissionPolicy:
        """The policy of a principal acting for others: every agent's layer of the chain, most restrictive wins."""
        base = self.policy(agents[0], channel, channel_permissions)
        extra = [self.agent_layers[a] for a in dict.fromkeys(agents[1:]) if a != agents[0] and a in self.agent_layers]
        return PermissionPolicy([*base.layers, *extra]) if extra else base

    def chain_allowed(self, agents: tuple[str, ...]) -> frozenset[str] | None:
        """The intersection of every chain agent's allow-set (None: every tool)."""
        out: frozenset[str] | None = None
        for agent in agents:
            own = self.allowed(agent)
            if own is not None:
                out = own if out is None else out & own
        return out

    def _layers(self, agent: str | None, channel: str | None) -> list[PermissionLayer]:
        layers = [self.global_layer]
        if agent is not None and agent in self.agent_layers:
            layers.append(self.agent_layers[agent])
        if channel is not None and channel in self.channel_layers:
            layers.append(self.channel_layers[channel])
        keys = ["global"]
        keys += [f"agent:{agent}"] if agent is not None else []
        keys += [f"channel:{channel}"] if channel is not None else []
        layers.extend(self.workspace_layers[k] for k in keys if k in self.workspace_layers)
        return layers

    def _request_policy(
        self, agent: str | None, channel: str | None, permissions: Mapping[str, Any]
    ) -> PermissionPolicy:
        """The merged policy with a request layer, cached by the rules' content (a gateway resends the same table).

        The key is the agent, the channel and a typed, ordered copy of the table (:func:`_frozen`), compared in
        full on a hit, so a changed rule, agent or channel never meets a cached policy. A table that is not
        plain JSON data is parsed afresh each time.
        """
        frozen = _frozen(permissions)
        if frozen is None:
            return PermissionPolicy([*self._layers(agent, channel), self._request_layer(permissions)])
        key = (agent, channel, frozen)
        with self._lock:
            policy = self._request_policies.get(key)
            if policy is not None:
                self._request_policies.move_to_end(key)
                return policy
        policy = PermissionPolicy([*self._layers(agent, channel), self._request_layer(permissions)])
        with self._lock:
            self._request_policies[key] = policy
            while len(self._request_policies) > REQUEST_POLICY_CACHE:
                self._request_policies.popitem(last=False)
        return policy

    def _request_layer(self, permissions: Mapping[str, Any]) -> PermissionLayer:
        try:
            return PermissionLayer.from_config("request", permissions, workspace=self._workspace)
        except ConfigError:
            # Present but malformed: fail closed; the layer's name says why in every refusal.
            return PermissionLayer("request (malformed, so it denies everything)", "deny", [])

    def allowed(self, agent: str | None) -> frozenset[str] | None:
        """The agent's allow-set (None = every tool; an empty list allows nothing)."""
        if agent is None or agent not in self.config.agents:
            return None
        names = self.config.agents[agent].allowed_tools
        return None if names is None else frozenset(fold_tool_name(n) for n in names)

    def bounds(self, agents: tuple[str, ...]) -> tuple[str, ...]:
        """``agents`` then every agent they are ``bounded_by`` (transitively, each once): whose layers all apply."""
        out = list(dict.fromkeys(agents))
        i = 0
        while i < len(out):
            settings = self.config.agents.get(out[i])
            for bound in settings.bounded_by if settings is not None else ():
                if bound not in out:
                    out.append(bound)
            i += 1
        return tuple(out)

    def accepts_delegation(self, agent: str, delegators: tuple[str, ...]) -> bool:
        """Whether ``agent`` accepts acting for every one of ``delegators`` (its ``accepts_delegation_from``)."""
        settings = self.config.agents.get(agent)
        if settings is None:
            return False
        accepted = set(settings.accepts_delegation_from)
        return "*" in accepted or all(name in accepted or name == agent for name in delegators)

    def role(self, channel: str | None, turn: TurnContext | None) -> str | None:
        """The caller role a request states: the turn's, else its channel's configured one (None: operator)."""
        if turn is not None and turn.caller_role:
            return turn.caller_role
        if channel is not None and channel in self.config.channels:
            return self.config.channels[channel].role
        return None

    def tier(
        self, agent: str | None, channel: str | None, requested: str | ExecTier | None, turn: TurnContext | None
    ) -> ExecTier:
        """Request > agent setting > install-wide setting, then the guest clamp."""
        configured = ExecTier.parse(self.config.policies.exec_tier)
        stored = None
        if agent is not None and agent in self.config.agents and self.config.agents[agent].exec_tier:
            stored = ExecTier.parse(self.config.agents[agent].exec_tier)
        role = turn.caller_role if turn is not None and turn.caller_role else None
        if role is None and channel is not None and channel in self.config.channels:
            role = self.config.channels[channel].role
        wanted = ExecTier.parse(requested) if requested is not None else None
        return resolve_exec_tier(configured, wanted, stored, role)


_STR = frozenset({str})
_FLAT = frozenset({str, bool, type(None)})


def _frozen(value: Any) -> Hashable | None:
    """A hashable copy of a JSON-shaped value that equals another only when they validate alike, else None.

    Order is kept (it picks which rule a refusal names) and every scalar carries its type: Python holds
    ``1 == 1.0 == True`` and would print ``{1: ...}`` like ``{"1": ...}``, yet each validates differently.
    Only dicts with string keys, lists, str, int, float, bool and None have such a copy.
    """
    kind = type(value)
    if kind is dict:
        if not set(map(type, value)) <= _STR:  # map/set run in C: a 10,000-rule table costs about a ms
            return None
        if set(map(type, value.values())) <= _STR:
            # keys and values alternate in one flat tuple: no tuple per rule for the collector to chase
            return ("str-dict", tuple(chain.from_iterable(value.items())))
        pairs = []
        for key, item in value.items():
            frozen = _frozen(item)
            if frozen is None:
                return None
            pairs.append((key, frozen))
        return ("dict", tuple(pairs))
    if kind is list:
        items = []
        for item in value:
            frozen = _frozen(item)
            if frozen is None:
                return None
            items.append(frozen)
        return ("list", tuple(items))
    if kind in _FLAT:
        return (kind.__name__, value)
    if kind in (int, float):
        return (kind.__name__, repr(value))  # repr keeps -0.0 apart from 0.0 and nan equal to nan
    return None


def build_chokepoint(config: AlephConfig, registry: ToolRegistry, plugins: PluginManager) -> Chokepoint:
    """The runtime's shared chokepoint state: gate, ledger, event log, command floor, plugin voters."""
    data_dir = config.data_dir
    ledger = None
    if config.ledger.enabled:
        ledger = Ledger(
            ledger_directory(config),
            checkpoint_every=config.ledger.checkpoint_every,
            on_failure=config.ledger.on_failure,
            sync=config.ledger.sync,
        )
    check, split = _command_floor(config, registry, plugins)

    return Chokepoint(
        registry,
        gate=ApprovalGate(
            data_dir / "approvals" / "always.json",
            timeout=config.approval.timeout,
            seal=StateSeal(config.key_dir, "approval-grants"),
        ),
        workspace=str(config.workspace_root),
        data_dir=data_dir,
        ledger=ledger,
        events=EventLog(data_dir / "events.sqlite3"),
        command_checker=check,
        command_splitter=split,
        voters=plugins.hook_functions("aleph_tool_policy"),
        default_requester=_default_requester(config, registry, plugins),
        max_input_bytes=config.tools.max_input_bytes,
        max_output_chars=config.tools.max_output_chars,
        flow=DataFlow.from_config(config.section("flow", FlowConfig)),
    )


def _default_requester(config: AlephConfig, registry: ToolRegistry, plugins: PluginManager) -> ApprovalRequester | None:
    """The first well-formed ``aleph_approval_requester`` result; a malformed one fails its plugin, named."""
    for plugin, requester in plugins.call_each("aleph_approval_requester", config=config):
        if isinstance(requester, ApprovalRequester) and inspect.iscoroutinefunction(requester.request_approval):
            return requester
        problem = TypeError(
            f"its aleph_approval_requester hook returned {type(requester).__name__}, not an ApprovalRequester "
            "(an object with `async def request_approval(request)`)"
        )
        plugins.record_failure(plugin, "register", problem)
        registry.unregister_source(ToolSource.plugin(plugin))
    return None


_UNRESOLVED_CWD = (
    "command policy needs approval [unresolved_cwd]: the working directory cannot be resolved, "
    "so no relative path in the command is proven safe"
)


class _ProgramIdentity:
    """Which program a command word names, for permission rules (``bash(git *)``).

    A rule naming ``git`` covers the ``git`` that PATH resolves outside the workspace: a bare name
    when no PATH entry is relative or inside the workspace (else the name is resolved on PATH), an
    absolute path outside the workspace. Anything else (``./tools/git``, ``tools/git``, a workspace
    file) keeps its path, so it matches only a rule that spells that path.
    """

    def __init__(self, workspace: str, path: str) -> None:
        self.workspace = workspace.rstrip("/") or "/"
        entries = path.split(os.pathsep)
        self.path = path
        self.safe = all(e and os.path.isabs(e) and not self._inside(os.path.normpath(e)) for e in entries)

    def _inside(self, path: str) -> bool:
        return path == self.workspace or path.startswith(self.workspace + "/")

    def of(self, word: str) -> str:
        if "/" not in word:
            if self.safe or word in BUILTINS:
                return word
            found = shutil.which(word, path=self.path)
            if found is None or not os.path.isabs(found) or self._inside(os.path.realpath(found)):
                return f"./{word}"  # not proven to be the system's program
            return word
        if word.startswith("/") and not self._inside(os.path.normpath(word)):
            return os.path.basename(word.rstrip("/")) or word
        return word


def _command_floor(
    config: AlephConfig, registry: ToolRegistry, plugins: PluginManager
) -> tuple[CommandChecker, CommandSplitter]:
    """The command-policy floor as (checker, splitter) for the chokepoint.

    Each plugin's extra rules are validated on their own: a plugin whose rules do not build (a bad regex,
    a name clash) is recorded as failed and its rules and tools are left out; the floor itself always loads.
    """
    protected = [
        *config.files,
        str(config.workspace_root / "aleph.toml"),
        str(config.data_dir),
        str(ledger_directory(config)),
    ]
    rules: list[CommandRule] = []
    for plugin, hook in plugins.hook_functions("aleph_command_policy_rules"):
        offered: list[CommandRule] = []
        try:
            hook(register=offered.append)
            for rule in offered:
                if not isinstance(rule, CommandRule):
                    raise TypeError(
                        f"its aleph_command_policy_rules hook registered {type(rule).__name__} {rule!r:.80}, "
                        "not a CommandRule"
                    )
            CommandPolicy.from_config(config.sandbox.command_policy, extra_rules=[*rules, *offered])
        except Exception as exc:
            plugins.record_failure(plugin, "register", exc)
            registry.unregister_source(ToolSource.plugin(plugin))
            continue
        rules.extend(offered)
    floor = CommandPolicy.from_config(config.sandbox.command_policy, extra_rules=rules, protected_paths=protected)

    root = config.workspace_root  # resolved once: resolving it costs a realpath walk per call
    root_text = str(root)
    identity = _ProgramIdentity(root_text, os.environ.get("PATH", os.defpath))

    def check(command: str, cwd: str | None = root_text) -> tuple[str, str, tuple[str, ...]]:
        verdict = floor.check(command, cwd=Path(cwd) if cwd is not None else None)
        if cwd is None and verdict.action in ("allow", "warn"):
            return ("ask", _UNRESOLVED_CWD, (*verdict.rules, "unresolved_cwd"))
        return verdict.action, verdict.reason, tuple(verdict.rules)

    def split(command: str, cwd: str | None = root_text) -> tuple[tuple[tuple[str, ...], ...], bool]:
        # An allow rule covers only what the floor proves harmless word for word: a command the floor
        # asks about (an option that runs code, an unknown wrapper, a dynamic word) is opaque to it.
        verdict = floor.check(command, cwd=Path(cwd) if cwd is not None else None)
        if verdict.argv is None:
            return (), True
        commands = tuple((identity.of(argv[0]), *argv[1:]) for argv in verdict.argv)
        return commands, cwd is None or verdict.action in ("ask", "block")

    return check, split
