"""``aleph approvals``: list and revoke the standing "always" approvals."""

from __future__ import annotations

import argparse
import re
import sys

from aleph._chokepoint._gate import ApprovalGate, StandingGrant
from aleph._cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_json
from aleph._config import load_config
from aleph._seal import StateSeal

__all__ = ["add_parser"]

_FINGERPRINT = re.compile(r"[0-9a-f]{4,32}")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph approvals ...``."""
    approvals = sub.add_parser(
        "approvals",
        help='list and revoke standing "always" approvals',
        description='Standing "always" approvals let one exact call (tool + arguments) run without asking, '
        "from every session. They live in <data_dir>/approvals/always.json.",
    )
    asub = approvals.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)

    p = asub.add_parser("list", help="show every standing approval", description="Show every standing approval.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_list)

    p = asub.add_parser(
        "revoke",
        help="revoke standing approvals",
        description="Revoke standing approvals by fingerprint (a unique prefix of at least 4 characters is "
        "enough), every one of a tool with --tool, or all with --all. A running server stops honouring "
        "them at its next approval check.",
    )
    p.add_argument("fingerprint", nargs="*", help="fingerprints from `aleph approvals list`")
    p.add_argument("--tool", help="revoke every standing approval of this tool")
    p.add_argument("--all", action="store_true", help="revoke every standing approval")
    p.set_defaults(func=_revoke)


def _gate(args: argparse.Namespace) -> ApprovalGate:
    config = load_config(args.config, workspace=args.workspace)
    return ApprovalGate(
        config.data_dir / "approvals" / "always.json", seal=StateSeal(config.key_dir, "approval-grants")
    )


def _list(args: argparse.Namespace) -> int:
    grants = _gate(args).standing_grants()
    if args.json:
        print_json([_json(g) for g in grants])
        return EXIT_OK
    if not grants:
        print('no standing approvals (they are made by answering "always" to an approval prompt)')
        return EXIT_OK
    for g in grants:
        print(f"{g.fingerprint[:12]}  {g.granted_at or 'unknown time':<20}  {g.tool or '(tool not recorded)'}")
        if g.summary:
            print(f"    {g.summary}")
    return EXIT_OK


def _json(grant: StandingGrant) -> dict[str, str | None]:
    return {"fingerprint": grant.fingerprint, "tool": grant.tool, "summary": grant.summary, "at": grant.granted_at}


def _revoke(args: argparse.Namespace) -> int:
    chosen = sum(bool(x) for x in (args.fingerprint, args.tool, args.all))
    if chosen != 1:
        print("aleph: give fingerprints, --tool NAME or --all (exactly one of them)", file=sys.stderr)
        return EXIT_USAGE
    gate = _gate(args)
    grants = gate.standing_grants()
    if args.all:
        targets = [g.fingerprint for g in grants]
    elif args.tool:
        targets = [g.fingerprint for g in grants if g.tool == args.tool]
        if not targets:
            print(f"aleph: no standing approval for the tool {args.tool!r}", file=sys.stderr)
            return EXIT_FAILED
    else:
        targets = []
        for given in args.fingerprint:
            if not _FINGERPRINT.fullmatch(given):
                print(f"aleph: {given!r} is not a fingerprint (4 to 32 lowercase hex characters)", file=sys.stderr)
                return EXIT_USAGE
            matches = [g.fingerprint for g in grants if g.fingerprint.startswith(given)]
            if len(matches) != 1:
                what = "matches no standing approval" if not matches else f"matches {len(matches)}; give more of it"
                print(f"aleph: {given!r} {what}", file=sys.stderr)
                return EXIT_FAILED
            targets.append(matches[0])
    gone = gate.revoke(targets)
    print(f"revoked {len(gone)} standing approval(s)" + (": " + ", ".join(fp[:12] for fp in gone) if gone else ""))
    return EXIT_OK
