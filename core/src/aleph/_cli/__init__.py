"""The ``aleph`` command line: a thin layer over :func:`aleph.load`.

Each sub-command lives in its own module exposing ``add_parser(subparsers)``; the parser it
adds sets ``func`` to a callable taking the parsed arguments and returning an exit code.
Families add commands through the ``aleph_cli_commands`` hook.

Exit codes, the same for every command (docs/cli.md lists them per command):

=====  ==============================================================================
0      done; for checks: nothing wrong
1      it failed: the tool ran and failed, or a check found a problem
2      the command line or the configuration is wrong (nothing was run)
3      refused: a policy denied the call, a human declined it, nobody could be asked,
       or nobody answered in time
130    interrupted (Ctrl-C)
141    the reader of the output went away (``aleph tools list | head -1``)
=====  ==============================================================================
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from aleph._cli import (
    approvals_cmd,
    config_cmd,
    console_cmd,
    doctor_cmd,
    ledger_cmd,
    mcp_cmd,
    plugins_cmd,
    policy_cmd,
    serve_cmd,
    tools_cmd,
)
from aleph._cli._common import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, leaf_errors
from aleph._errors import AlephError, ConfigError
from aleph._plugins._loader import PluginManager

__all__ = ["main"]

log = logging.getLogger("aleph.cli")

COMMANDS = (
    tools_cmd,
    plugins_cmd,
    config_cmd,
    policy_cmd,
    approvals_cmd,
    ledger_cmd,
    mcp_cmd,
    serve_cmd,
    console_cmd,
    doctor_cmd,
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"aleph {version('aleph-core')}"
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "aleph (aleph-core not installed)"


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full argument parser; plugins' commands are added unless ``argv`` names a core command."""
    parser = argparse.ArgumentParser(prog="aleph", description="Aleph: checked, permitted, recorded tool calls.")
    parser.add_argument("--version", action="version", version=_version())
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


def _quiet_stdout() -> None:
    # The reader is gone: point stdout at /dev/null so the interpreter's final flush cannot raise again.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aleph`` console script."""
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        code = int(args.func(args))
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("aleph: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as exc:
        leaves = leaf_errors(exc)
        if any(isinstance(e, BrokenPipeError) for e in leaves):
            _quiet_stdout()
            return EXIT_BROKEN_PIPE
        if any(isinstance(e, KeyboardInterrupt) for e in leaves):
            print("aleph: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        config = next((e for e in leaves if isinstance(e, ConfigError)), None)
        if config is not None:
            print(f"aleph: configuration error: {config}", file=sys.stderr)
            return EXIT_USAGE
        known = next((e for e in leaves if isinstance(e, AlephError | OSError)), None)
        if known is not None:
            print(f"aleph: {_describe(known)}", file=sys.stderr)
            return EXIT_FAILED
        raise


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror[0].lower()}{exc.strerror[1:]}{where}"
    return str(exc) or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
