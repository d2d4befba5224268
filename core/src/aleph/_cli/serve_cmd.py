"""``aleph serve``: expose Aleph's tools, under Aleph's policy, as an MCP server.

On stdio, nothing but MCP ever reaches stdout: before anything is loaded the MCP wire is moved to a
private descriptor and descriptor 1 points at stderr, so a plugin's print, an install's chatter or a
child process writing to its inherited stdout lands on stderr instead of corrupting the stream.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from typing import IO, TYPE_CHECKING

import anyio
import anyio.to_thread

from aleph._cli._common import EXIT_FAILED, EXIT_USAGE, load_checked_config
from aleph._cli.doctor_cmd import Check, plugin_checks, run_checks
from aleph._mcp._chain import nested_serve_problem

if TYPE_CHECKING:
    from aleph._runtime import Aleph

__all__ = ["add_parser", "claim_stdio"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph serve``."""
    p = sub.add_parser(
        "serve",
        help="serve the tools as an MCP server (stdio or loopback HTTP)",
        description="Serve Aleph's tools as an MCP server. Every call passes the permission chokepoint; "
        "approval is asked of the client's user through elicitation on both protocol eras. The workspace "
        "is --workspace DIR, else the directory the client launched the server in (refused when that is / "
        "or your home directory: pass --workspace). One line on stderr says what is served.",
    )
    # Also after `serve`: MCP client set-ups append them to the server's arguments (scripts/run-main --workspace D).
    p.add_argument(
        "--workspace", metavar="DIR", default=argparse.SUPPRESS, help="the workspace (as `aleph --workspace`)"
    )
    p.add_argument(
        "--config", metavar="PATH", default=argparse.SUPPRESS, help="project config file (as `aleph --config`)"
    )
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind with --http (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port for --http (default 8765; 0 picks a free one)")
    p.add_argument("--agent", help="agent whose permissions apply")
    p.add_argument("--channel", default="mcp", help="channel whose permissions apply (default mcp)")
    p.set_defaults(func=_serve)


def claim_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """Move the MCP wire off descriptors 0 and 1; returns (wire in, wire out) as binary streams.

    Afterwards descriptor 1 (and ``print``) goes to stderr and descriptor 0 reads /dev/null, for this
    process and every child it starts.
    """
    sys.stdout.flush()
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return os.fdopen(wire_in, "rb", buffering=0), os.fdopen(wire_out, "wb", buffering=0)


def _serve(args: argparse.Namespace) -> int:
    from aleph._mcp.serve import AlephMcpServer, bind_loopback, is_loopback_host

    if args.http and not is_loopback_host(args.host):
        print(f"aleph: refusing to serve on {args.host!r}: use a loopback address (127.0.0.1, ::1)", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.port <= 65535:
        print(f"aleph: --port {args.port} is not a TCP port (0-65535)", file=sys.stderr)
        return EXIT_USAGE
    wire = None if args.http else claim_stdio()
    config = load_checked_config(args)
    problem = nested_serve_problem(config)
    if problem is not None:
        print(f"aleph serve: refusing to start: {problem}", file=sys.stderr)
        return EXIT_USAGE
    sock = None
    if args.http:
        try:
            sock = bind_loopback(args.host, args.port)
        except OSError as exc:
            why = (exc.strerror or str(exc)).lower()
            print(
                f"aleph: cannot serve on {args.host}:{args.port}: {why} "
                "(is another server running there? pick another --port, or --port 0 for a free one)",
                file=sys.stderr,
            )
            return EXIT_FAILED

    from aleph._runtime import load

    async def run() -> None:
        async with load(args.config, workspace=args.workspace) as rt:
            await rt.start_services()
            server = AlephMcpServer(
                rt, channel=args.channel, agent=args.agent, load=lambda ws: load(args.config, workspace=ws)
            )
            listed = await server._service().list()
            where = "stdio" if sock is None else "http"
            for failed in rt.plugins.report()["failed"]:
                print(f"aleph serve: warning: plugin {failed['name']} did not load: {failed['error']}", file=sys.stderr)
            announced = anyio.Event()
            async with anyio.create_task_group() as tg:
                # The isolation probes may take a moment: the line follows them, the first answer does not wait.
                if sock is None:
                    tg.start_soon(_announce, rt, args.agent, len(listed), where, announced)
                    assert wire is not None
                    await server.run_stdio(*wire)
                else:

                    def ready(port: int) -> None:
                        # The first line is the readiness signal scripts wait for; the summary follows it.
                        print(f"aleph: serving MCP on http://{args.host}:{port}/mcp", file=sys.stderr, flush=True)
                        tg.start_soon(_announce, rt, args.agent, len(listed), where, announced)

                    await server.run_http(sock, ready=ready)
                with anyio.move_on_after(5):  # a short session still gets its start line
                    await announced.wait()
                tg.cancel_scope.cancel()

    try:
        anyio.run(run)
    finally:
        if sock is not None:
            sock.close()
    return 0


ISOLATION_WAIT_S = 30.0
"""How long the start line waits for the plugins' isolation checks."""


async def _announce(rt: Aleph, agent: str | None, tools: int, transport: str, done: anyio.Event) -> None:
    """The start line: workspace, tier, the isolation in force, tools offered (and whether the start was warm)."""
    checks = _isolation_checks(rt)
    if not checks:
        isolation = "not reported by any plugin"
    else:
        isolation = f"unknown (its check took more than {ISOLATION_WAIT_S:.0f} s)"
        with anyio.move_on_after(ISOLATION_WAIT_S):
            isolation = "; ".join(await anyio.to_thread.run_sync(_run_checks, checks, abandon_on_cancel=True))
    tier = rt.access.tier(agent, "mcp", None, None).id
    warm = ", warm start" if os.environ.get("ALEPH_WARM_START") == "1" else ""
    failed = [f"{p['name']} ({p['error']})" for p in rt.plugins.report()["failed"]]
    failures = f", {len(failed)} plugin(s) failed to load: {'; '.join(failed)}" if failed else ""
    print(
        f"aleph serve: workspace {rt.config.workspace_root}, tier {tier}, isolation {isolation}, "
        f"{tools} tools offered over {transport}{warm}{failures}",
        file=sys.stderr,
        flush=True,
    )
    done.set()


def _isolation_checks(rt: Aleph) -> list[Check]:
    """The ``*.isolation`` checks plugins register through ``aleph_doctor_checks``."""
    return plugin_checks(rt, only=lambda name: name.rsplit(".", 1)[-1] == "isolation")


def _run_checks(checks: list[Check]) -> list[str]:
    return [detail if status == "ok" else f"{detail} ({name}: {status})" for name, status, detail in run_checks(checks)]
