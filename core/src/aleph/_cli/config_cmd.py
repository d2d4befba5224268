"""``aleph config check``: load and validate the configuration."""

from __future__ import annotations

import argparse

from aleph._config import load_config

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph config ...``."""
    config = sub.add_parser("config", help="inspect the configuration", description="Inspect the configuration.")
    csub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    p = csub.add_parser(
        "check",
        help="validate the configuration",
        description="Load every configuration layer and report problems (exit 2 on error).",
    )
    p.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    config = load_config(args.config, workspace=args.workspace)
    files = config.files or ["(no configuration file; built-in defaults)"]
    print("configuration OK")
    for path in files:
        print(f"  read {path}")
    print(f"  workspace {config.workspace_root}")
    print(f"  data dir  {config.data_dir}")
    extra = sorted(config.plugin_sections())
    if extra:
        print(f"  plugin sections: {', '.join(extra)}")
    return 0
