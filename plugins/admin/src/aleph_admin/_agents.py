"""Agents as principals: create (bounded by the creator), list, inspect, switch to, delete.

An agent made with ``agent_create`` is an ``[agents.<name>]`` table in the managed configuration with
``bounded_by = [creator]`` (core judges its every call by the creator's layers too, so it never holds a
permission the creator lacks) and ``accepts_delegation_from = [creator]`` (so ``agent_switch``, which
goes through core's delegation door, needs nobody else's consent). Its metadata is owned by the creator.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_admin._managed import set_path
from aleph_admin._state import AGENT_NAME, AdminState, caller, missing_agent

HOST_AGENTS = frozenset({"default", "main"})
"""The agent a host binds when it names none: core calls it ``default``, and the families that keep objects
for it (teams, hub, browser profiles, media) own them as ``main``. Either name is that agent, always a
principal of the install."""

__all__ = ["AgentCreate", "AgentDelete", "AgentInfo", "AgentList", "AgentSwitch", "agent_table", "apply_managed"]


class RuleArg(ToolArgs):
    rule: str = Field(max_length=400)
    """A tool name, glob or tool with an argument specifier (``bash(git status)``)."""
    action: Literal["allow", "ask", "deny"]
    """What the rule decides."""


class PermissionsArg(ToolArgs):
    default: Literal["allow", "ask", "deny"] = "allow"
    """Action for tools no override names."""
    overrides: list[RuleArg] = Field(default_factory=list, max_length=500)
    """Rules, as in ``[agents.<name>.tool_permissions.overrides]``."""


class AgentCreateArgs(ToolArgs):
    name: str = Field(max_length=64)
    """The new agent's name: lowercase letters, digits, _ and -, starting with a letter."""
    description: str = Field(default="", max_length=2000)
    """What the agent is for."""
    tool_permissions: PermissionsArg | None = None
    """Its own permission layer; it is judged by yours too, so it can only be as strict as you or stricter."""
    allowed_tools: list[str] | None = Field(default=None, max_length=500)
    """If set, the only tools it may see or call."""
    exec_tier: Literal["plan", "ask", "auto", "full"] | None = None
    """Its default execution tier (never looser than yours in effect)."""


def agent_table(args: AgentCreateArgs, creator: str, acting_for: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``[agents.<name>]`` table ``agent_create`` writes.

    Bounded by the creator and every agent the creator acts for: an agent made by ``alice`` acting for
    ``mallory`` holds nothing either of them lacks.
    """
    bounds = list(dict.fromkeys((creator, *acting_for)))
    table: dict[str, Any] = {"bounded_by": bounds, "accepts_delegation_from": [creator]}
    if args.tool_permissions is not None:
        permissions = args.tool_permissions
        table["tool_permissions"] = {
            "default": permissions.default,
            "overrides": {r.rule: r.action for r in permissions.overrides},
        }
    if args.allowed_tools is not None:
        table["allowed_tools"] = list(args.allowed_tools)
    if args.exec_tier is not None:
        table["exec_tier"] = args.exec_tier
    return table


def apply_managed(state: AdminState, tool: str, dotted: str, value: Any) -> tuple[str, str]:
    """Set ``dotted`` in the managed file and put it in force; undone when core rejects it. (before, after)."""
    with state.managed.locked():
        return _apply(state, tool, dotted, value)


def _apply(state: AdminState, tool: str, dotted: str, value: Any) -> tuple[str, str]:
    managed = state.managed
    snapshot = managed.snapshot()
    before = snapshot or ""
    doc = managed.document()
    try:
        set_path(doc, dotted, value)
    except ValueError as exc:
        raise aleph.ExecutionFailed(tool, str(exc)) from None
    after = doc.as_string()
    managed.write(after)
    try:
        state.context.reload_config()
    except aleph.ConfigError as exc:
        managed.restore(snapshot)
        state.context.reload_config()
        raise aleph.ExecutionFailed(tool, f"the configuration would not load, nothing was changed: {exc}") from None
    return before, after


class AgentCreate(AlephTool[AgentCreateArgs]):
    NAME = "agent_create"
    DESCRIPTION = (
        "Create a new agent (a principal with its own permission layer, signing key and sessions). It can never "
        "hold a permission you lack: every call it makes is judged by your layers too. A human approves it, "
        "seeing its policy, before it exists."
    )
    Args = AgentCreateArgs
    FACTS = ToolFacts(tags=("admin", "write"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: AgentCreateArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        if not AGENT_NAME.fullmatch(args.name):
            raise aleph.ExecutionFailed(
                self.NAME, f"name {args.name!r}: lowercase letters, digits, _ and -, first a letter"
            )
        if args.name == who.owner or self._is_principal(args.name):
            raise aleph.ExecutionFailed(self.NAME, f"an agent named {args.name!r} exists already: choose another name")
        table = agent_table(args, who.owner, tuple(p.agent for p in who.chain))
        before, after = apply_managed(self.state, self.NAME, f"agents.{args.name}", table)
        if args.name not in self.state.context.current_config().agents:
            self.state.managed.restore(before or None)
            self.state.context.reload_config()
            raise aleph.ExecutionFailed(
                self.NAME,
                "the managed configuration is not read here ([workspace] data_dir is set by the project file); "
                "set ALEPH_DATA_DIR or the user configuration's data_dir instead",
            )
        self.state.store.add_agent(args.name, who.owner, who.describe(), args.description, table)
        change = self.state.store.add_change(
            who.describe(), "agent_create", f"agents.{args.name}", before, after, f"created agent {args.name}"
        )
        fingerprint = self.state.keystore().signer(args.name).fingerprint
        call = aleph.current_call()
        if call is not None:
            call.annotate(agent_created=args.name, config_change=change)
        service = self.state.context.tool_service(agent=args.name)
        decisions = {d.name: service.decision_for(d.name, {}) for d in await service.list()}
        return {
            "agent": args.name,
            "bounded_by": table["bounded_by"],
            "key_fingerprint": fingerprint,
            "config_change": change,
            "layer": table,
            "effective": decisions,
        }

    def _is_principal(self, name: str) -> bool:
        """Whether ``name`` is already a principal of this install, not a free name.

        The creator of an agent owns it (``agent_switch`` acts as it, ``agent_delete`` revokes its key),
        so creating a name that already acts here would hand its sessions, secrets and stored objects to
        the creator. A principal shows in the configuration (its layer, or another layer naming it), in the
        ledger's keystore (every agent that made a recorded call has a signing key, kept after revocation),
        in this family's store (agents, secrets, routes), or is the host's unnamed agent (``default``, ``main``).
        """
        config = self.state.context.current_config()
        named = {
            a for settings in config.agents.values() for a in (*settings.bounded_by, *settings.accepts_delegation_from)
        }
        if name in HOST_AGENTS or name in config.agents or name in named:
            return True
        store = self.state.store
        if store.agent_exists(name) or store.owned("secrets", name) or name in store.routes().values():
            return True
        keystore = self.state.keystore()
        return bool(keystore.public_keys(name)) or keystore.is_revoked(name)


class NameArgs(ToolArgs):
    name: str = Field(max_length=64)
    """The agent's name."""


class AgentListArgs(ToolArgs):
    pass


class AgentList(AlephTool[AgentListArgs]):
    NAME = "agent_list"
    DESCRIPTION = "List the agents you created, with their descriptions."
    Args = AgentListArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("admin", "read"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: AgentListArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        rows = self.state.store.owned("agents", who.owner)
        return {
            "you": who.owner,
            "agents": [
                {"name": r["name"], "description": r["description"], "created_at": r["created_at"]} for r in rows
            ],
        }


class AgentInfo(AlephTool[NameArgs]):
    NAME = "agent_info"
    DESCRIPTION = "Show one of your agents: its layer in force, what bounds it, its signing key."
    Args = NameArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("admin", "read"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: NameArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        rows = self.state.store.owned("agents", who.owner, args.name)
        if not rows:
            raise missing_agent(self.NAME, args.name)
        config = self.state.context.current_config()
        settings = config.agents.get(args.name)
        keystore = self.state.keystore()
        return {
            "name": args.name,
            "description": rows[0]["description"],
            "created_by": rows[0]["created_by"],
            "created_at": rows[0]["created_at"],
            "in_force": settings.model_dump(mode="json") if settings is not None else None,
            "key_fingerprint": keystore.active_fingerprint(args.name),
            "revoked": keystore.is_revoked(args.name),
        }


class AgentSwitch(AlephTool[NameArgs]):
    NAME = "agent_switch"
    DESCRIPTION = (
        "Hand this conversation to one of your agents: returns a new session of that agent, acting for you "
        "(through Aleph's delegation door, so it holds no more than you). The host continues with it."
    )
    Args = NameArgs
    FACTS = ToolFacts(tags=("admin", "write"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: NameArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        call = aleph.current_call()
        if call is None or not self.state.store.owned("agents", who.owner, args.name):
            raise missing_agent(self.NAME, args.name)
        session = f"{args.name}:switch:{int(time.time() * 1000)}:{who.owner}"
        service = await call.delegate(
            args.name, purpose=f"take over the conversation of {who.owner}", turn=aleph.TurnContext(session_key=session)
        )
        call.annotate(switched_to=args.name)
        return {"agent": args.name, "session": session, "principal": service.principal.to_json()}


class AgentDelete(AlephTool[NameArgs]):
    NAME = "agent_delete"
    DESCRIPTION = (
        "Delete one of your agents: its layer leaves the configuration and its signing key is revoked (its "
        "ledger stays verifiable). Always asks a human first."
    )
    Args = NameArgs
    FACTS = ToolFacts(requires_approval=True, tags=("admin", "write", "destructive"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: NameArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        if not self.state.store.owned("agents", who.owner, args.name):
            raise missing_agent(self.NAME, args.name)
        before, after = apply_managed(self.state, self.NAME, f"agents.{args.name}", None)
        self.state.store.remove_agent(who.owner, args.name)
        change = self.state.store.add_change(
            who.describe(), "agent_delete", f"agents.{args.name}", before, after, f"deleted agent {args.name}"
        )
        ledger = self.state.context.ledger
        if ledger is not None:
            await ledger.revoke_key(args.name)
        else:
            self.state.keystore().revoke(args.name)
        call = aleph.current_call()
        if call is not None:
            call.annotate(agent_deleted=args.name, config_change=change)
        return {"deleted": args.name, "key_revoked": True, "config_change": change}
