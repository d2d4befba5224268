"""The ``aleph`` command line: a thin layer over :func:`aleph.load`.

Each sub-command lives in its own module exposing ``add_parser(subparsers)``; the parser it
adds sets ``func`` to a callable taking the parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from aleph._cli import config_cmd, ledger_cmd, mcp_cmd, plugins_cmd, policy_cmd, serve_cmd, tools_cmd
from aleph._errors import AlephError, ConfigError

__all__ = ["main"]

COMMANDS = (tools_cmd, plugins_cmd, config_cmd, policy_cmd, ledger_cmd, mcp_cmd, serve_cmd)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    parser = argparse.ArgumentParser(prog="aleph", description="Aleph: checked, permitted, recorded tool calls.")
    parser.add_argument("--config", metavar="PATH", help="project config file (default: ./aleph.toml or $ALEPH_CONFIG)")
    parser.add_argument("--workspace", metavar="DIR", help="workspace root (default: the config file's directory)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aleph`` console script."""
    parser = build_parser()
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
