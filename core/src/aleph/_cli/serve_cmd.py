"""``aleph serve``: expose Aleph's tools, under Aleph's policy, as an MCP server."""

from __future__ import annotations

import argparse
import sys

import anyio

from aleph._cli._common import load_runtime

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph serve``."""
    p = sub.add_parser(
        "serve",
        help="serve the tools as an MCP server (stdio or loopback HTTP)",
        description="Serve Aleph's tools as an MCP server. Every call passes the permission chokepoint; "
        "approval prompts go to the MCP client (elicitation) when it supports them.",
    )
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind with --http (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port for --http (default 8765; 0 picks a free one)")
    p.add_argument("--agent", help="agent whose permissions apply")
    p.add_argument("--channel", default="mcp", help="channel whose permissions apply (default mcp)")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from aleph._mcp.serve import AlephMcpServer, is_loopback_host

    if args.http and not is_loopback_host(args.host):
        print(f"aleph: refusing to serve on {args.host!r}: use a loopback address (127.0.0.1, ::1)", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"aleph: --port {args.port} is not a TCP port (0-65535)", file=sys.stderr)
        return 2

    async def run() -> None:
        async with load_runtime(args) as rt:
            server = AlephMcpServer(rt, channel=args.channel, agent=args.agent)
            if not args.http:
                await server.run_stdio()
                return

            def ready(uv: object) -> None:
                sockets = [s for srv in getattr(uv, "servers", []) for s in srv.sockets]
                port = sockets[0].getsockname()[1] if sockets else args.port
                print(f"aleph: serving MCP on http://{args.host}:{port}/mcp", file=sys.stderr, flush=True)

            await server.run_http(args.host, args.port, ready=ready)

    anyio.run(run)
    return 0
