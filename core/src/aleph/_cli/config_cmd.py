"""``aleph config check``: the same validation as loading, every problem at once; ``aleph config trust``."""

from __future__ import annotations

import argparse
import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from aleph._chokepoint._permissions import parse_rule
from aleph._cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from aleph._cli.policy_cmd import dead_rules
from aleph._config import AlephConfig, ToolPermissionsConfig, load_config
from aleph._errors import ConfigError
from aleph._runtime import Aleph, runtime_for
from aleph._workspace import check_workspace
from aleph._workspace_trust import WorkspaceTrust

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph config ...``."""
    config = sub.add_parser("config", help="inspect the configuration", description="Inspect the configuration.")
    csub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    p = csub.add_parser(
        "check",
        help="validate the configuration",
        description="Validate every configuration layer as loading does: core sections, permission rules, "
        "every plugin's own section, unknown tables; connect the MCP servers and report rules that match "
        "no installed tool. Exit 2 on an error; with --strict, exit 1 on a warning too.",
    )
    p.add_argument("--strict", action="store_true", help="treat warnings (dead rules, failed plugins) as errors")
    p.set_defaults(func=_check)
    t = csub.add_parser(
        "trust",
        help="trust a workspace's own aleph.toml",
        description="Trust the aleph.toml of a workspace (default: the current directory) as it is now, so it "
        "may loosen your configuration too. Until then a workspace's own file may only tighten it. The trust "
        "is bound to the file's path and bytes: after any change it only tightens again until trusted anew.",
    )
    t.add_argument("path", nargs="?", default=".", help="the workspace directory or its aleph.toml")
    t.add_argument("--revoke", action="store_true", help="stop trusting it")
    t.set_defaults(func=_trust)


def _trust(args: argparse.Namespace) -> int:
    target = Path(args.path).expanduser()
    file = target / "aleph.toml" if target.is_dir() else target
    if not file.is_file():
        print(f"aleph: {file} does not exist", file=sys.stderr)
        return EXIT_USAGE
    # Where trust is recorded is the operator's choice alone: the workspace's own file is not read for it.
    operator = load_config(args.config, workspace=args.workspace, workspace_file=False)
    store = WorkspaceTrust.at(operator.data_dir, operator.key_dir)
    if args.revoke:
        print(f"{'no longer trusted' if store.revoke(file) else 'was not trusted'}: {file.resolve()}")
        return EXIT_OK
    digest = store.trust(file)
    print(f"trusted {file.resolve()} ({digest}); any change to it needs `aleph config trust` again")
    return EXIT_OK


@dataclass
class _Findings:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _check(args: argparse.Namespace) -> int:
    found = _Findings()
    try:
        # Lenient: every key that does not validate is reported and left out, so the rest is judged too.
        config = load_config(args.config, workspace=args.workspace, problems=found.errors)
    except ConfigError as exc:
        # Nothing further can be judged without a configuration that parses.
        found.errors.extend(exc.problems)
        return _report(found, None, args.strict)
    status = config.workspace_file
    if status is not None and not status["trusted"] and status["ignored"]:
        found.warnings.append(
            f"{status['file']} is not trusted, so it may only tighten your configuration; not applied: "
            + "; ".join(status["ignored"])
            + ". Trust it with `aleph config trust` if you wrote it."
        )
    try:
        check_workspace(config, named=args.workspace is not None)
    except ConfigError as exc:
        found.errors.extend(exc.problems)
    config = _without_bad_rules(config, found)
    try:
        rt = runtime_for(config, strict=False)
    except ConfigError as exc:
        found.errors.extend(exc.problems)
        return _report(found, config, args.strict)
    _plugin_findings(rt, found)
    _unknown_tables(rt, found)

    async def connected() -> None:
        async with rt:
            for status in rt.mcp.servers():
                if status.state not in ("connected", "disabled"):
                    why = f": {status.reason}" if status.reason else ""
                    found.warnings.append(f"MCP server `{status.id}` is {status.state}{why}")
            _, _, dead = dead_rules(rt)
            for layer, key in dead:
                found.warnings.append(f"rule `{key}` in the {layer} layer matches no installed tool (a typo?)")

    anyio.run(connected)
    return _report(found, rt.config, args.strict)


def _without_bad_rules(config: AlephConfig, found: _Findings) -> AlephConfig:
    """Report every permission rule that does not parse, in every layer; the config without them."""
    workspace = str(config.workspace_root)
    layers: list[tuple[str, ToolPermissionsConfig | None]] = [
        ("policies.tool_permissions", config.policies.tool_permissions)
    ]
    layers += [(f"agents.{n}.tool_permissions", a.tool_permissions) for n, a in config.agents.items()]
    layers += [(f"channels.{n}.tool_permissions", c.tool_permissions) for n, c in config.channels.items()]
    for key, table in layers:
        if table is None:
            continue
        for rule, action in list(table.overrides.items()):
            try:
                parse_rule(rule, action, workspace=workspace)
            except ValueError as exc:
                found.errors.append(f"{config.origin(key)}: {key}.overrides: rule {rule!r}: {exc}")
                del table.overrides[rule]  # judged once here; the rest of the file is still checked
    return config


def _plugin_findings(rt: Aleph, found: _Findings) -> None:
    for failed in rt.plugins.report()["failed"]:
        dist = f" ({failed['distribution']})" if failed["distribution"] else ""
        error = str(failed["error"])
        if error.startswith("ConfigError: "):
            # A plugin that rejects its section is dropped at load with all its tools: that is a config error.
            message = error.removeprefix("ConfigError: ")
            lines = message.removeprefix("invalid configuration:\n  ").split("\n  ")
            for line in lines if message.startswith("invalid configuration:") else [message]:
                found.errors.append(
                    f"{line} (so the plugin `{failed['name']}`{dist} would not load and its tools would be missing)"
                )
        else:
            found.warnings.append(f"plugin `{failed['name']}`{dist} failed to load at {failed['stage']}: {error}")


def _unknown_tables(rt: Aleph, found: _Findings) -> None:
    report = rt.plugins.report()
    plugin_names = {p["name"] for p in report["loaded"]} | {p["name"] for p in report["failed"]}
    plugin_names |= set(report["blocked"])
    known = rt.config.claimed_sections() | plugin_names
    candidates = sorted(set(AlephConfig.model_fields) | known)
    for name in sorted(rt.config.plugin_sections()):
        if name in known:
            continue
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
        hint = f"; did you mean [{close[0]}]?" if close else "; no installed plugin reads it"
        found.errors.append(f"{rt.config.origin(name)}: [{name}]: unknown table{hint}")


def _report(found: _Findings, config: AlephConfig | None, strict: bool) -> int:
    # Problems go to stderr, the summary and what was read to stdout.
    for error in found.errors:
        print(f"aleph: error: {error}", file=sys.stderr)
    for warning in found.warnings:
        print(f"aleph: warning: {warning}", file=sys.stderr)
    if found.errors:
        print(f"configuration has {len(found.errors)} error(s)")
    else:
        print("configuration OK" + (f" ({len(found.warnings)} warning(s))" if found.warnings else ""))
    if config is not None:
        for path in config.files or ["(no configuration file; built-in defaults)"]:
            print(f"  read {path}")
        print(f"  workspace {config.workspace_root}")
        print(f"  data dir  {config.data_dir}")
    if found.errors:
        return EXIT_USAGE
    return EXIT_FAILED if strict and found.warnings else EXIT_OK
