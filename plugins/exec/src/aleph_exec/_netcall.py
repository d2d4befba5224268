"""The egress proxy seen from a tool call: the caller's rules, asking a person, the ledger row.

A host on no ``[exec.network]`` list (with ``unlisted = "ask"``) is decided by the chokepoint as a
step of the running call: ``exec_network`` with the host and port as its arguments. The tool declares
its own confirmation gate, so a person is asked under every tier; the caller's permission layers may
refuse it without asking (``exec_network = "deny"``), and a session or "always" grant for a host covers
it again. An unattended call is never asked: the host is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from typing import Any

from pydantic import Field

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts
from aleph_exec._egress_ask import bridge_ask
from aleph_exec._egress_rules import RunNetwork
from aleph_exec._sandbox import WorkspaceSandbox

__all__ = ["NETWORK_TOOL", "ExecNetworkTool", "network_for_call", "record_network"]

NETWORK_TOOL = "exec_network"
"""The approval step for a host that no ``[exec.network]`` list names."""

_MAX_EVENTS = 20  # ledger event rows per call (one per host, port and verdict); the row's refs cover all


def network_for_call(sandbox: WorkspaceSandbox) -> RunNetwork | None:
    """The running call's network rules (its principal's layers, asking through its chokepoint); None if not proxied."""
    cfg = sandbox.config.network
    if cfg.mode != "proxied" or sandbox.bwrap is None:
        return None
    call = aleph.current_call()
    if call is None:
        return RunNetwork(cfg)
    chain = [call.principal, *call.principal.chain]
    agents = [p.agent for p in chain]
    channels = [p.channel for p in chain if p.channel]
    ask = None
    if cfg.unlisted == "ask":

        async def approve(host: str, port: int) -> bool:
            try:
                await call.authorize(NETWORK_TOOL, {"host": host, "port": port, "tool": call.tool})
            except aleph.ToolError:
                return False
            return True

        ask = bridge_ask(approve, asyncio.get_running_loop(), contextvars.copy_context())
    return RunNetwork(cfg, agents=agents, channels=channels, ask=ask)


async def record_network(net: RunNetwork) -> None:
    """Put the run's connections on the call's ledger row (counts, bytes, hosts) and one event per host."""
    call = aleph.current_call()
    if call is None or not sum(net.counts.values()):
        return
    with contextlib.suppress(ValueError):  # the row's reference budget is spent: the events still say it
        call.annotate(**net.ledger_refs())
    seen: dict[tuple[str, int, str], list[Any]] = {}
    for c in net.log:
        entry = seen.setdefault((c.host, c.port, c.verdict), [0, 0, 0, c.reason])
        entry[0] += 1
        entry[1] += c.up
        entry[2] += c.down
    for (host, port, verdict), (count, up, down, reason) in list(seen.items())[:_MAX_EVENTS]:
        with contextlib.suppress(ValueError):
            await call.record(
                "egress",
                reason[:500],
                host=host[:200],
                port=port,
                verdict=verdict,
                connections=count,
                bytes_up=up,
                bytes_down=down,
            )


class ExecNetworkArgs(ToolArgs):
    host: str = Field(max_length=253)
    """The host a sandboxed command asked the egress proxy to reach."""
    port: int = Field(ge=1, le=65535)
    """Its port."""
    tool: str = Field(default="", max_length=64)
    """The exec tool whose command asked."""


class ExecNetworkTool(AlephTool[ExecNetworkArgs]):
    NAME = NETWORK_TOOL
    DESCRIPTION = (
        "Not for models: the approval aleph-exec asks for when a sandboxed command wants a host that no "
        '[exec.network] list names (a person approves or refuses it; `exec_network = "deny"` in the policy '
        "refuses without asking). Calling it directly opens nothing."
    )
    Args = ExecNetworkArgs
    # Its own confirmation gate: a host no list names is asked about under every tier, `full` included (the
    # allowlist is the policy); `exec_network = "deny"` refuses without asking, grants cover a host again.
    FACTS = ToolFacts(requires_approval=True, tags=("network",), max_duration_ms=1_000, inline=True)

    async def call(self, args: ExecNetworkArgs) -> dict[str, Any]:
        raise ExecutionFailed(
            self.NAME,
            "exec_network is the approval aleph-exec asks for itself when a command's connection needs one; "
            "calling it opens nothing. Add the host to [exec.network] allow, or run the command with bash.",
        )
