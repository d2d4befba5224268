"""``aleph plugins``: what loaded, what failed, what is held back and why; inspect and approve plugins."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aleph._cli._common import EXIT_FAILED, EXIT_OK, load_runtime, print_json
from aleph._config import load_config
from aleph._errors import PluginError
from aleph._plugins._loader import inspect_distribution
from aleph._plugins._trust import PluginTrust, adds_digest
from aleph._seal import StateSeal

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph plugins``, ``aleph plugins inspect DIST`` and ``aleph plugins trust DIST``."""
    p = sub.add_parser(
        "plugins",
        help="show loaded, failed and held plugins; inspect or approve one",
        description="Show loaded, failed, blocked and held-back plugins with their distributions (exit 1 when "
        "a plugin failed to load). `inspect DIST` prints what a distribution adds (tools with facts, hooks); "
        "`trust DIST` shows it and records a human's approval, so a held-back plugin loads from the next start.",
    )
    p.add_argument("action", nargs="?", choices=("inspect", "trust"), help="inspect or trust one distribution")
    p.add_argument("distribution", nargs="?", help="the distribution to inspect or trust")
    p.add_argument("--path", help="the plugin folder it is installed in (default: the environment)")
    p.add_argument("--yes", action="store_true", help="approve without asking (trust only)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_plugins)


def _plugins(args: argparse.Namespace) -> int:
    if args.action is not None:
        return _one(args)
    rt = load_runtime(args)
    report = rt.plugins.report()
    status = EXIT_FAILED if report["failed"] else EXIT_OK
    if args.json:
        print_json(report)
        return status
    for plugin in report["loaded"]:
        dist = f"{plugin['distribution']} {plugin['version']}" if plugin["distribution"] else "in-process"
        note = f" ({plugin['note']})" if plugin["note"] else ""
        print(f"loaded   {plugin['name']:<16} {dist:<28} {len(plugin['tools'])} tools{note}")
        for tool, why in plugin["held_tools"].items():
            print(f"  HELD tool {tool}: {why}")
    for plugin in report["failed"]:
        dist = f"{plugin['distribution']} {plugin['version']}" if plugin["distribution"] else "in-process"
        print(f"FAILED   {plugin['name']:<16} {dist:<28} at {plugin['stage']}: {plugin['error']}")
    for name in report["blocked"]:
        print(f"blocked  {name}")
    for plugin in report["held"]:
        print(f"HELD     {plugin['name']:<16} {plugin['distribution']} {plugin['version']}: {plugin['reason']}")
    if not any(report.values()):
        print("no plugins installed")
    return status


def _one(args: argparse.Namespace) -> int:
    if not args.distribution:
        print(f"aleph: plugins {args.action} needs a distribution name", file=sys.stderr)
        return 2
    config = load_config(args.config, workspace=args.workspace)
    try:
        adds = inspect_distribution(config, args.distribution, Path(args.path) if args.path else None)
    except PluginError as exc:
        print(f"aleph: {exc}", file=sys.stderr)
        return 1
    if args.action == "inspect":
        print_json({"adds": adds, "digest": adds_digest(adds)}) if args.json else _show(adds)
        return 0
    if not args.json:
        _show(adds)
    if not args.yes:
        if not sys.stdin.isatty():
            print("aleph: not approved: no terminal to ask on (pass --yes to approve)", file=sys.stderr)
            return 1
        if input(f"Approve {adds['distribution']} {adds['version']}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("not approved")
            return 1
    trust = PluginTrust(config.data_dir / "plugins" / "trust.json", StateSeal(config.key_dir, "plugin-trust"))
    record = trust.trust(adds, source="cli")
    if args.json:
        print_json(record.to_json())
    else:
        print(f"trusted {record.distribution} {record.version} ({record.digest})")
    return 0


def _show(adds: dict[str, object]) -> None:
    print(json.dumps(adds, indent=2, ensure_ascii=False, sort_keys=True))
