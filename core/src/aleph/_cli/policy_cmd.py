"""``aleph policy``: explain a decision, check the rules against the installed tools."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import anyio

from aleph._chokepoint._tiers import ExecTier
from aleph._cli._common import load_runtime, parse_json_arg, print_json
from aleph._contract._names import suggest_candidates

if TYPE_CHECKING:
    from aleph._chokepoint._scoped import Explanation
    from aleph._runtime import Aleph

__all__ = ["add_parser", "dead_rules"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph policy ...``."""
    policy = sub.add_parser(
        "policy", help="explain and check the permission policy", description="Explain and check the permission policy."
    )
    psub = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)

    p = psub.add_parser(
        "explain",
        help="which rule and layer decide a call",
        description="Print the decision for a call (allow / ask / deny), the rule and layer that "
        "decided it and why, without running the tool.",
    )
    p.add_argument("tool", help="tool name")
    p.add_argument("--input", default="{}", metavar="JSON", help="the call's arguments as a JSON object")
    p.add_argument("--agent", help="agent making the call")
    p.add_argument("--channel", help="channel the call comes from")
    p.add_argument("--tier", choices=[t.id for t in ExecTier], help="execution tier (default: configured)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_explain)

    p = psub.add_parser(
        "check",
        help="find rules that name no installed tool",
        description="Validate every permission layer and list rules whose tool pattern matches "
        "no installed tool (exit 1 if any).",
    )
    p.set_defaults(func=_check)


def _explain(args: argparse.Namespace) -> int:
    payload = parse_json_arg(args.input, "--input")
    if not isinstance(payload, dict):
        print("aleph: --input must be a JSON object", file=sys.stderr)
        return 2
    rt = load_runtime(args)
    server = args.tool.partition("__")[0] if "__" in args.tool else None
    if server is not None and server in rt.config.mcp.servers and rt.registry.get(args.tool) is None:
        # An MCP tool exists only once its server is connected: connect, then judge the real definition.
        async def connected() -> Explanation:
            async with rt:
                return rt.tool_service(agent=args.agent, channel=args.channel, tier=args.tier).explain(
                    args.tool, payload
                )

        explanation = anyio.run(connected)
    else:
        explanation = rt.tool_service(agent=args.agent, channel=args.channel, tier=args.tier).explain(
            args.tool, payload
        )
    missing = explanation.rule_id == "not_found"
    providers = _possible_providers(rt, args.tool) if missing else []
    if args.json:
        out = explanation.to_json()
        if missing:
            out["installed"] = False
            out["providers"] = providers
        print_json(out)
        return 0
    if missing:
        offered = [entry.name for entry in rt.registry]
        hint = suggest_candidates(args.tool, offered)
        print("decision: deny (not installed)")
        print(f"reason:   no installed plugin or connected MCP server provides a tool named `{args.tool}`")
        if hint:
            print(f"note:     did you mean: {', '.join(hint)}?")
        for provider in providers:
            print(f"note:     {provider}")
        if not providers:
            print("note:     see what is installed with `aleph plugins` and `aleph tools list`")
        return 0
    print(f"decision: {explanation.decision}")
    if explanation.rule is not None:
        print(f"rule:     {explanation.rule}")
    if explanation.layer is not None:
        print(f"layer:    {explanation.layer}")
    print(f"gate:     {explanation.rule_id} (decided by {explanation.decided_by})")
    print(f"tier:     {explanation.tier}")
    print(f"reason:   {explanation.reason}")
    for note in explanation.notes:
        print(f"note:     {note}")
    return 0


def _possible_providers(rt: Aleph, tool: str) -> list[str]:
    """What could provide ``tool`` but does not right now: its MCP server, failed or disabled plugins."""
    out: list[str] = []
    server = tool.partition("__")[0] if "__" in tool else None
    if server is not None:
        status = next((s for s in rt.mcp.servers() if s.id == server), None)
        if status is None:
            out.append(
                f"`{tool}` names the MCP server `{server}`, which is not configured (aleph mcp add {server} ...)"
            )
        else:
            why = f": {status.reason}" if status.reason else ""
            out.append(f"the MCP server `{server}` is configured but {status.state}{why}; see `aleph mcp list`")
    report = rt.plugins.report()
    for failed in report["failed"]:
        dist = f" ({failed['distribution']})" if failed["distribution"] else ""
        out.append(f"the plugin `{failed['name']}`{dist} failed to load, so its tools are missing: {failed['error']}")
    for name in report["blocked"]:
        out.append(f"the plugin `{name}` is installed but disabled ([plugins] disable or ALEPH_DISABLE_PLUGINS)")
    return out


def dead_rules(rt: Aleph) -> tuple[int, int, list[tuple[str, str]]]:
    """(rule count, layer count, [(layer, rule)] whose tool pattern matches no registered tool).

    Call it inside ``async with rt`` so MCP tools, which exist only while their server is connected, count.
    """
    entries = list(rt.registry)
    layers = [rt.access.global_layer, *rt.access.agent_layers.values(), *rt.access.channel_layers.values()]
    dead = [
        (layer.name, rule.key)
        for layer in layers
        for rule in layer.rules
        if not any(rule.matches_name(e.name, e.source) for e in entries)
    ]
    return sum(len(layer.rules) for layer in layers), len(layers), dead


def _check(args: argparse.Namespace) -> int:
    rt = load_runtime(args)

    async def connected() -> tuple[int, int, int, list[tuple[str, str]]]:
        async with rt:  # MCP tools exist only while their servers are connected
            return len(rt.registry), *dead_rules(rt)

    tools, count, layers, dead = anyio.run(connected)
    print(f"{count} rules in {layers} layers validated against {tools} installed tools")
    for layer_name, key in dead:
        print(f"  warning: `{key}` in the {layer_name} layer matches no installed tool")
    return 1 if dead else 0
