"""Helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from aleph._runtime import Aleph, load

__all__ = ["load_runtime", "parse_json_arg", "print_json"]


def load_runtime(args: argparse.Namespace) -> Aleph:
    """Load the runtime from the global ``--config`` / ``--workspace`` options."""
    return load(args.config, workspace=args.workspace)


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
