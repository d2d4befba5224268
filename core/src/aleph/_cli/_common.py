"""Helpers shared by the CLI commands: loading, output, exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from aleph._config import AlephConfig, load_config
from aleph._runtime import Aleph, load
from aleph._workspace import check_workspace

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "leaf_errors",
    "load_checked_config",
    "load_runtime",
    "parse_json_arg",
    "print_json",
]

EXIT_OK = 0
"""Done; for a check: nothing wrong."""
EXIT_FAILED = 1
"""It failed: the tool ran and failed, or a check found a problem."""
EXIT_USAGE = 2
"""The command line or the configuration is wrong; nothing was run."""
EXIT_REFUSED = 3
"""Refused: policy, a human's no, nobody to ask, or nobody answered in time."""
EXIT_INTERRUPTED = 130
"""Ctrl-C."""
EXIT_BROKEN_PIPE = 141
"""The reader of stdout went away (128 + SIGPIPE, as a shell tool killed by it)."""


def load_checked_config(args: argparse.Namespace) -> AlephConfig:
    """The configuration for the global options, refusing ``/`` or home as an unnamed workspace."""
    config = load_config(args.config, workspace=args.workspace)
    check_workspace(config, named=args.workspace is not None)
    return config


def load_runtime(args: argparse.Namespace) -> Aleph:
    """Load the runtime from the global ``--config`` / ``--workspace`` options."""
    load_checked_config(args)
    return load(args.config, workspace=args.workspace)


def leaf_errors(exc: BaseException) -> list[BaseException]:
    """``exc`` itself, or every exception inside it when it is an exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaf_errors(inner)]
    return [exc]


def print_json(value: Any) -> None:
    """Pretty-print ``value`` as JSON on stdout."""
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, sort_keys=True)
    sys.stdout.write("\n")


def parse_json_arg(text: str, what: str) -> Any:
    """Parse a JSON command-line argument or exit 2 naming it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"aleph: {what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", file=sys.stderr)
        raise SystemExit(2) from None
    except RecursionError:
        print(f"aleph: {what} nests too deeply to read (a call's input may nest at most 64 levels)", file=sys.stderr)
        raise SystemExit(2) from None
