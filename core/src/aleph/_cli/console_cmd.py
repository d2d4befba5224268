"""``aleph console``: the approval inbox, the ledger and policy explain on a local web page.

The page is served on loopback only, at a URL holding a random token (printed on stderr); a request
without the token is refused. The inbox holds the asks every process on the same data directory offered
(``aleph serve``, runtimes with ``[console] inbox``; while the console runs, ``auto`` offers them); the
ledger and explain pages read the workspace's ledger and policy.
"""

from __future__ import annotations

import argparse
import sys

import anyio

from aleph._cli._common import EXIT_USAGE

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph console``."""
    p = sub.add_parser(
        "console",
        help="a local web page: approval inbox, ledger, policy explain",
        description="Serve the console on loopback at a URL with a random token (printed on stderr) until "
        "interrupted: the approval inbox, the ledger with each chain's verification, and policy explain.",
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: a free one)")
    p.set_defaults(func=_console)


def _console(args: argparse.Namespace) -> int:
    from aleph._console import Console
    from aleph._console._app import _loopback
    from aleph._runtime import load

    if not _loopback(args.host):
        print(f"aleph: refusing to serve the console on {args.host!r}: use a loopback address", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.port <= 65535:
        print(f"aleph: --port {args.port} is not a TCP port (0-65535)", file=sys.stderr)
        return EXIT_USAGE

    async def run() -> None:
        async with load(args.config, workspace=args.workspace) as rt:
            console = Console(rt)
            url = await console.start(args.host, args.port)
            print(f"aleph console: {url}", file=sys.stderr, flush=True)
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await console.stop()

    anyio.run(run)
    return 0
