"""``aleph undo [CALL_ID]``: put the workspace back to just before a committed exec call."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_undo_parser", "undo_call"]


def undo_call(
    call_id: str | None = None,
    *,
    config_path: str | Path | None = None,
    workspace: str | Path | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Undo the exec call ``call_id`` (None: the newest kept) of the workspace that ``config_path`` names.

    Returns ``{"call_id", "restored", "workspace"}`` (and ``kept``, ``set_aside`` when someone else's files
    were left in place or renamed beside); raises :class:`aleph_exec.UndoError` when it cannot
    (nothing kept, an unknown id, a later call changed the same paths, a path changed since: ``force``).
    """
    import aleph
    from aleph_exec._config import ExecConfig
    from aleph_exec._transaction import Transactions
    from aleph_exec._undo import UndoStore

    config = aleph.load_config(config_path, workspace=workspace)
    exec_config = config.section("exec", ExecConfig)
    Transactions(config.workspace_root, config.data_dir, exec_config).recover()  # a crashed commit first
    store = UndoStore(
        config.data_dir.resolve() / "exec",
        max_calls=exec_config.undo_max_calls,
        max_bytes=exec_config.undo_max_mb * 1024 * 1024,
    )
    return store.undo(call_id, force=force)


def add_undo_parser(sub: Any) -> None:
    """Register ``aleph undo``."""
    p = sub.add_parser(
        "undo",
        help="put the workspace back to just before a committed bash/code_exec call",
        description="Restore what a committed exec call created, overwrote or deleted (default: the newest "
        "kept call). Refuses when a later call changed the same paths or a path changed since, unless --force.",
    )
    p.add_argument("call_id", nargs="?", default=None, help="the call id (see --list); default: the newest")
    p.add_argument("--force", action="store_true", help="undo even if the paths changed since")
    p.add_argument("--list", action="store_true", help="list the kept calls, newest first")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import aleph
    from aleph_exec._config import ExecConfig
    from aleph_exec._undo import UndoError, UndoStore

    try:
        if args.list:
            config = aleph.load_config(args.config, workspace=args.workspace)
            cfg = config.section("exec", ExecConfig)
            store = UndoStore(config.data_dir.resolve() / "exec", max_calls=cfg.undo_max_calls)
            rows = [
                {"call_id": k.call_id, "tool": k.manifest.get("tool"), "paths": len(k.paths)}
                for k in reversed(store.entries())
            ]
            if args.json:
                print(json.dumps(rows))
            else:
                for row in rows:
                    print(f"{row['call_id']}  {row['tool']}  {row['paths']} path(s)")
            return 0
        done = undo_call(args.call_id, config_path=args.config, workspace=args.workspace, force=args.force)
    except UndoError as exc:
        print(f"aleph undo: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(done))
    else:
        print(f"undid {done['call_id']}: {done['restored']} path(s) restored in {done['workspace']}")
        for rel in done.get("kept", ()):
            print(f"  kept {rel}: it holds files the call did not write")
        for rel in done.get("set_aside", ()):
            print(f"  set aside {rel}: what stood where the call's files were put back")
    return 0
