"""``aleph cluster ...`` (also ``python -m aleph_cluster ...``): certificates, scheduler, node, cross-check."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_cluster_parser", "main"]


def _center_key(config: str | None) -> str:
    import aleph

    rt = aleph.load(config, entry_points=False)
    try:
        from aleph_cluster._config import ClusterConfig

        identity = rt.config.section("cluster", ClusterConfig).identity
        ledger = rt.chokepoint.ledger
        if ledger is None:
            raise aleph.ConfigError("the center signs requests with its ledger key: enable [ledger]")
        return ledger.keystore.signer(identity).public_key.hex()
    finally:
        # a thread of its own: this may be called from inside a running event loop (tests, programs)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, rt.aclose()).result()


def _init(args: argparse.Namespace) -> int:
    from aleph_cluster._pki import init_ca

    made = init_ca(Path(args.dir), hosts=args.host or ["127.0.0.1", "localhost"], force=args.force)
    key = _center_key(args.config)
    out = {k: {"cert": str(v.cert), "key": str(v.key)} for k, v in made.items()}
    out["ca"] = {"cert": str(made["center"].ca)}
    out["center_key"] = key  # type: ignore[assignment]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"CA, scheduler and center certificates in {args.dir}")
        print(f"center_key = {key!r}   # put this in every node's [cluster_node]")
        print(f"next: aleph cluster issue {args.dir} NODE_NAME --host NODE_ADDRESS (once per node)")
    return 0


def _issue(args: argparse.Namespace) -> int:
    from aleph_cluster._pki import issue

    paths = issue(Path(args.dir), args.name, hosts=args.host or [])
    print(json.dumps({"ca": str(paths.ca), "cert": str(paths.cert), "key": str(paths.key)}))
    return 0


def _scheduler(args: argparse.Namespace) -> int:
    from aleph_cluster._serve import run_scheduler

    asyncio.run(run_scheduler(Path(args.dir), host=args.host, port=args.port))
    return 0


def _node(args: argparse.Namespace) -> int:
    from aleph_cluster._serve import run_node

    asyncio.run(run_node(Path(args.config), workspace=Path(args.workspace) if args.workspace else None))
    return 0


def _crosscheck(args: argparse.Namespace) -> int:
    from aleph_cluster._crosscheck import crosscheck

    report = crosscheck(Path(args.center_ledger), Path(args.node_ledger), node=args.node)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        print(f"matched {len(report.matched)} remote calls")
        for label, items in (
            ("missing on the node", report.missing_on_node),
            ("missing on the center", report.missing_on_center),
            ("mismatched", report.mismatched),
            ("chains failing verify", report.broken_chains),
        ):
            for item in items:
                print(f"  {label}: {item}")
        print("OK" if report.ok else "MISMATCH")
    return 0 if report.ok else 1


def _center_key_cmd(args: argparse.Namespace) -> int:
    print(_center_key(args.config))
    return 0


def add_cluster_parser(sub: Any) -> None:
    """Register ``aleph cluster`` and its sub-commands."""
    p = sub.add_parser("cluster", help="cluster certificates, scheduler, node service and ledger cross-check")
    cmds = p.add_subparsers(dest="cluster_command", required=True)

    q = cmds.add_parser("init", help="make the CA, the scheduler's and the center's certificates")
    q.add_argument("dir", help="directory for the CA and certificates (keep ca.key on the center only)")
    q.add_argument("--host", action="append", help="a name or address of the scheduler (repeatable)")
    q.add_argument("--force", action="store_true", help="replace an existing CA (orphans every issued cert)")
    q.add_argument("--config", default=None, help="the center's aleph.toml (for its request-signing key)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=_init)

    q = cmds.add_parser("issue", help="issue one node's certificate (CN = the node's name)")
    q.add_argument("dir", help="the directory `aleph cluster init` made")
    q.add_argument("name", help="the node's name")
    q.add_argument("--host", action="append", help="a name or address of the node (repeatable)")
    q.set_defaults(func=_issue)

    q = cmds.add_parser("center-key", help="print the center's request-signing public key")
    q.add_argument("--config", default=None, help="the center's aleph.toml")
    q.set_defaults(func=_center_key_cmd)

    q = cmds.add_parser("scheduler", help="run the TLS-only Dask scheduler in the foreground")
    q.add_argument("dir", help="the directory `aleph cluster init` made")
    q.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    q.add_argument("--port", type=int, default=8786, help="port (default 8786; 0 picks one)")
    q.set_defaults(func=_scheduler)

    q = cmds.add_parser("node", help="run this machine's node (a Dask worker with its own Aleph) in the foreground")
    q.add_argument("--config", default="aleph.toml", help="the node's aleph.toml with [cluster_node]")
    q.add_argument("--workspace", default=None, help="the node's workspace (default: the config's directory)")
    q.set_defaults(func=_node)

    q = cmds.add_parser("crosscheck", help="match the center's and a node's ledger rows of remote calls")
    q.add_argument("center_ledger", help="the center's ledger directory")
    q.add_argument("node_ledger", help="the node's ledger directory")
    q.add_argument("--node", default=None, help="the node's name (default: read from its rows)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=_crosscheck)


def main(argv: list[str] | None = None) -> int:
    """``python -m aleph_cluster``: the same sub-commands as ``aleph cluster``."""
    parser = argparse.ArgumentParser(prog="python -m aleph_cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    add_cluster_parser(sub)
    args = parser.parse_args(["cluster", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))
