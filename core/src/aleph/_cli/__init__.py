"""The ``aleph`` command line: a thin layer over :func:`aleph.load`.

Each sub-command lives in its own module exposing ``add_parser(subparsers)``; the parser it
adds sets ``func`` to a callable taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from aleph._cli import config_cmd, ledger_cmd, mcp_cmd, plugins_cmd, policy_cmd, serve_cmd, tools_cmd
from aleph._errors import AlephError, ConfigError
from aleph._plugins import PluginManager

__all__ = ["main"]

log = logging.getLogger("aleph.cli")

COMMANDS = (tools_cmd, plugins_cmd, config_cmd, policy_cmd, ledger_cmd, mcp_cmd, serve_cmd)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full argument parser; plugins' commands are added unless ``argv`` names a core command."""
    parser = argparse.ArgumentParser(prog="aleph", description="Aleph: checked, permitted, recorded tool calls.")
    parser.add_argument("--config", metavar="PATH", help="project config file (default: ./aleph.toml or $ALEPH_CONFIG)")
    parser.add_argument("--workspace", metavar="DIR", help="workspace root (default: the config file's directory)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    core = set(sub.choices)
    if argv is None or _command_word(argv) not in core:
        _add_plugin_commands(sub, core)
    return parser


def _command_word(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names (after the global options), if any."""
    words = iter(argv)
    for word in words:
        if word in ("--config", "--workspace"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _add_plugin_commands(sub: Any, taken: set[str]) -> None:
    """Sub-commands plugins add through ``aleph_cli_commands``; a clash or a failing plugin is skipped and logged."""
    manager = PluginManager(strict=False)
    manager.load_entry_points()
    manager.check_pending()
    for plugin, hook in manager.hook_functions("aleph_cli_commands"):
        offered: list[tuple[str, Callable[[Any], None]]] = []
        try:
            hook(register=lambda name, add_parser, into=offered: into.append((name, add_parser)))
            for name, add_parser in offered:
                if name in taken:
                    raise ValueError(f"the command name {name!r} is already taken")
                add_parser(sub)
                taken.add(name)
        except Exception:
            log.exception("plugin %r could not add its commands", plugin)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aleph`` console script."""
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"aleph: configuration error: {exc}", file=sys.stderr)
        return 2
    except AlephError as exc:
        print(f"aleph: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
