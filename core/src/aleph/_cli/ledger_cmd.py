"""``aleph ledger``: verify, show and checkpoint the signed audit ledger."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from aleph._cli._common import print_json
from aleph._config import load_config
from aleph._ledger import Ledger, LedgerRow, ledger_directory
from aleph._ledger._keystore import check_agent_id

__all__ = ["add_parser"]

_MAX_LIMIT = 100_000


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= _MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {_MAX_LIMIT}, got {value}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph ledger ...``."""
    ledger = sub.add_parser(
        "ledger",
        help="verify and read the signed audit ledger",
        description="Verify and read the signed audit ledger ([ledger] directory, default <data_dir>/ledger).",
    )
    lsub = ledger.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)

    p = lsub.add_parser(
        "verify",
        help="check hashes, signatures and checkpoints",
        description="Check every row's hash, chain link and signature, and the head against checkpoints. "
        "Exit 1 naming the first bad row when a chain was tampered with.",
    )
    p.add_argument("--agent", help="verify only this agent (default: every agent)")
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        type=Path,
        help="a checkpoint exported earlier (aleph ledger checkpoint); detects rows removed after it",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_verify)

    p = lsub.add_parser("show", help="print recent rows", description="Print an agent's newest rows, oldest first.")
    p.add_argument("--agent", help="show only this agent (default: every agent)")
    p.add_argument("--limit", type=_limit, default=20, metavar="N", help="rows per agent (default 20)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_show)

    p = lsub.add_parser(
        "checkpoint",
        help="export a signed checkpoint of an agent's chain",
        description="Write a signed {agent_id, seq, head_hash, signer_fp, signature} of the current head. "
        "Keep it off this machine; `aleph ledger verify --checkpoint FILE` then detects truncation.",
    )
    p.add_argument("--agent", required=True, help="the agent whose chain to checkpoint")
    p.add_argument("--out", required=True, type=Path, metavar="FILE", help="where to write the checkpoint")
    p.set_defaults(func=_checkpoint)


def _open(args: argparse.Namespace) -> Ledger:
    if getattr(args, "agent", None) is not None:
        try:
            check_agent_id(args.agent)
        except ValueError as exc:
            print(f"aleph: --agent: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    config = load_config(args.config, workspace=args.workspace)
    return Ledger(ledger_directory(config), checkpoint_every=config.ledger.checkpoint_every)


def _checkpoint_agent(path: Path) -> str | None:
    try:
        agent = json.loads(path.read_text(encoding="utf-8")).get("agent_id")
    except (OSError, ValueError, AttributeError):
        return None
    return agent if isinstance(agent, str) else None


def _verify(args: argparse.Namespace) -> int:
    ledger = _open(args)
    agent = args.agent
    if agent is None and args.checkpoint is not None:
        agent = _checkpoint_agent(args.checkpoint)
        if agent is None:
            print(f"aleph: {args.checkpoint} is not a readable ledger checkpoint", file=sys.stderr)
            return 2
    agents = [agent] if agent else ledger.agents()
    reports = [ledger.verify(a, checkpoint=args.checkpoint) for a in agents]
    ok = all(r.ok for r in reports)
    if args.json:
        print_json({"ok": ok, "directory": str(ledger.directory), "agents": [r.to_json() for r in reports]})
        return 0 if ok else 1
    if not reports:
        print(
            f"nothing to verify yet: no ledger chains in {ledger.directory}. A chain starts with an agent's "
            "first recorded call (a mutating call, an approval or a refusal); read-only calls are not recorded."
        )
        return 0
    for r in reports:
        if r.ok:
            ckpt = f", checkpoint at seq {r.checkpoint_seq}" if r.checkpoint_seq else ", no checkpoint yet"
            torn = " (a torn final row from a crash is ignored; it is cut on the next write)" if r.torn_tail else ""
            if r.unsigned_tail:
                torn += (
                    f" ({r.unsigned_tail} later row(s) not sealed yet: a running ledger seals them within moments,"
                    " the next start after a crash does)"
                )
            print(f"OK        {r.agent_id}: {r.rows} rows, head {(r.head_hash or '')[:16]}…{ckpt}{torn}")
        elif r.first_bad_seq is None:
            print(f"FAILED    {r.agent_id}: {r.reason}")
        else:
            print(f"TAMPERED  {r.agent_id}: row seq {r.first_bad_seq} (line {r.first_bad_line}): {r.reason}")
    return 0 if ok else 1


def _show(args: argparse.Namespace) -> int:
    ledger = _open(args)
    agents = [args.agent] if args.agent else ledger.agents()
    rows: list[LedgerRow] = []
    for agent in agents:
        rows.extend(ledger.rows(agent, limit=args.limit))
    if args.json:
        print_json([row.to_json() for row in rows])
        return 0
    if not rows:
        print(f"no ledger rows in {ledger.directory}" + (f" for agent {args.agent!r}" if args.agent else ""))
        return 0
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row.at_ms / 1000))
        who = f" by {row.principal}" if row.principal else ""
        rule = f" [rule {row.rule}]" if row.rule else ""
        detail = row.detail.replace("\n", " ")[:120]
        print(
            f"{row.agent_id} #{row.seq:<6} {when}Z  {row.action:<16} {row.outcome:<6} {row.target}{who}{rule}  {detail}"
        )
    return 0


def _checkpoint(args: argparse.Namespace) -> int:
    ledger = _open(args)
    ledger.export_checkpoint(args.agent, args.out)
    data = json.loads(args.out.read_text(encoding="utf-8"))
    print(
        f"checkpoint of agent {args.agent!r} at seq {data['seq']} written to {args.out}; keep a copy off this machine"
    )
    return 0
