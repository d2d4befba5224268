"""``aleph policy``: explain a decision, check the rules against the installed tools."""

from __future__ import annotations

import argparse
import sys

from aleph._cli._common import load_runtime, parse_json_arg, print_json
from aleph._tiers import ExecTier

__all__ = ["add_parser"]


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
    service = rt.tool_service(agent=args.agent, channel=args.channel, tier=args.tier)
    explanation = service.explain(args.tool, payload)
    if args.json:
        print_json(explanation.to_json())
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


def _check(args: argparse.Namespace) -> int:
    rt = load_runtime(args)
    entries = list(rt.registry)
    layers = [rt.access.global_layer, *rt.access.agent_layers.values(), *rt.access.channel_layers.values()]
    dead = []
    for layer in layers:
        for rule in layer.rules:
            if not any(rule.matches_name(e.name, e.source) for e in entries):
                dead.append((layer.name, rule.key))
    count = sum(len(layer.rules) for layer in layers)
    print(f"{count} rules in {len(layers)} layers validated against {len(entries)} installed tools")
    for layer_name, key in dead:
        print(f"  warning: `{key}` in the {layer_name} layer matches no installed tool")
    return 1 if dead else 0
