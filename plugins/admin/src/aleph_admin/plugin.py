"""The ``admin`` plugin: registers the 16 tools, the ``{{vault:...}}`` resolver and the family's policy votes.

The votes make a human see what a call would change before it runs (every tier; unattended runs are
refused): a ``self_config`` change that does not only tighten (the permission diff is the reason), every
``agent_create`` (the new agent's layer and what bounds it), and every change of plugins or routes. A
caller that is not an operator is refused those changes outright.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import aleph
from aleph_admin._agents import AgentCreate, AgentDelete, AgentInfo, AgentList, AgentSwitch
from aleph_admin._config_tools import ConfigAudit, ReadConfigGuide, SelfConfig
from aleph_admin._identity import AgentIdentity
from aleph_admin._managed import loosening
from aleph_admin._runtime_tools import Doctor, GatewayRoute, HooksManage, ListModels, SelectModel, SelfManage
from aleph_admin._state import AdminState, ModelsConfig
from aleph_admin._store import AdminStore
from aleph_admin._vault import Vault, VaultResolver
from aleph_admin._vault_tool import VaultStore

# The runtime this module last registered into: pluggy hands votes no context, and a process runs one
# runtime at a time (tests build them one after another).
_state: AdminState | None = None


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register the family's tools and its vault resolver."""
    global _state
    store = AdminStore(context.data_dir / "admin" / "admin.sqlite3")
    state = AdminState(
        context=context,
        store=store,
        vault=Vault(store, lambda: state.key_dir()),
        models=context.config.section("models", ModelsConfig),
        started=time.monotonic(),
    )
    _state = state

    async def close() -> None:
        store.close()

    context.add_cleanup(close)
    context.add_secret_resolver("vault", VaultResolver(state.vault))
    for tool in (
        AgentCreate(state),
        AgentList(state),
        AgentInfo(state),
        AgentSwitch(state),
        AgentDelete(state),
        AgentIdentity(state),
        VaultStore(state),
        SelfConfig(state),
        ConfigAudit(state),
        ReadConfigGuide(),
        Doctor(state),
        SelfManage(state),
        HooksManage(state),
        ListModels(state),
        SelectModel(state),
        GatewayRoute(state),
    ):
        register(tool)


def _role(state: AdminState, turn: aleph.TurnContext | None, channel: str | None) -> str:
    if turn is not None and turn.caller_role:
        return turn.caller_role
    channels = state.context.current_config().channels
    if channel is not None and channel in channels and channels[channel].role:
        return str(channels[channel].role)
    return "operator"


@aleph.hookimpl
def aleph_tool_policy(
    tool: str,
    input: Mapping[str, Any],
    facts: aleph.ToolFacts,
    source: aleph.ToolSource,
    turn: aleph.TurnContext | None,
    agent: str | None,
    channel: str | None,
) -> aleph.PolicyVote | None:
    """Ask a human for configuration changes that loosen, new agents, plugin and route changes."""
    state = _state
    if state is None or tool not in _VOTED:
        return None
    return _VOTED[tool](state, input, turn, agent, channel)


def _self_config(
    state: AdminState, input: Mapping[str, Any], turn: aleph.TurnContext | None, agent: str | None, channel: Any
) -> aleph.PolicyVote | None:
    if input.get("action") not in ("update_config", "rollback_config"):
        return None
    role = _role(state, turn, channel)
    own = f"agents.{agent or 'default'}."
    if role != "operator" and not str(input.get("config_path") or "").startswith(own):
        # Even a tightening of someone else's layer can stop them working: only an operator does that.
        return aleph.PolicyVote("deny", f"a {role} may change only its own layer ({own}*); this caller is a {role}")
    if input.get("action") == "rollback_config":
        return None  # core's floor asks a human for every rollback
    config = state.context.current_config()
    in_force = config.model_dump(mode="json") | config.plugin_sections()
    lines = loosening(in_force, str(input.get("config_path") or ""), _plain(input.get("value")))
    if not lines:
        return None
    return aleph.PolicyVote("ask", "this change loosens what is in force: " + "; ".join(lines))


def _agent_create(
    state: AdminState, input: Mapping[str, Any], turn: aleph.TurnContext | None, agent: str | None, _c: Any
) -> aleph.PolicyVote:
    del state, turn
    creator = agent or "default"  # with every agent it acts for, when it acts for others (see agent_table)
    layer = {
        k: _plain(input[k]) for k in ("tool_permissions", "allowed_tools", "exec_tier") if input.get(k) is not None
    }
    return aleph.PolicyVote(
        "ask",
        f"create agent {input.get('name')!r} with layer {json.dumps(layer, sort_keys=True)}, bounded by {creator!r} "
        f"(every call it makes is also judged by {creator!r}'s layers, so it holds nothing {creator!r} lacks)",
    )


def _plain(value: Any) -> Any:
    """The frozen input the chokepoint hands votes, as plain JSON data."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _operator_change(what: str) -> Any:
    def vote(
        state: AdminState, input: Mapping[str, Any], turn: aleph.TurnContext | None, agent: str | None, channel: Any
    ) -> aleph.PolicyVote | None:
        if input.get("action") == "list":
            return None
        role = _role(state, turn, channel)
        if role != "operator":
            return aleph.PolicyVote("deny", f"only an operator may change {what}; this caller is a {role}")
        detail = ", ".join(f"{k}={input[k]!r}" for k in sorted(input) if k != "action")
        return aleph.PolicyVote("ask", f"{input.get('action')} {what} ({detail}) by {agent or 'default'}")

    return vote


_VOTED: dict[str, Any] = {
    "self_config": _self_config,
    "agent_create": _agent_create,
    "hooks_manage": _operator_change("plugins (disabling a policy plugin loosens policy)"),
    "gateway_route": _operator_change("the gateway's routes"),
}
