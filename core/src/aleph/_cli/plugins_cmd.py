"""``aleph plugins``: what loaded, what failed and why."""

from __future__ import annotations

import argparse

from aleph._cli._common import EXIT_FAILED, EXIT_OK, load_runtime, print_json

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph plugins``."""
    p = sub.add_parser(
        "plugins",
        help="show loaded and failed plugins",
        description="Show loaded, failed and blocked plugins with their distributions. "
        "Exit 1 when a plugin failed to load.",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_plugins)


def _plugins(args: argparse.Namespace) -> int:
    rt = load_runtime(args)
    report = rt.plugins.report()
    status = EXIT_FAILED if report["failed"] else EXIT_OK
    if args.json:
        print_json(report)
        return status
    for plugin in report["loaded"]:
        dist = f"{plugin['distribution']} {plugin['version']}" if plugin["distribution"] else "in-process"
        print(f"loaded   {plugin['name']:<16} {dist:<28} {len(plugin['tools'])} tools")
    for plugin in report["failed"]:
        dist = f"{plugin['distribution']} {plugin['version']}" if plugin["distribution"] else "in-process"
        print(f"FAILED   {plugin['name']:<16} {dist:<28} at {plugin['stage']}: {plugin['error']}")
    for name in report["blocked"]:
        print(f"blocked  {name}")
    if not any(report.values()):
        print("no plugins installed")
    return status
