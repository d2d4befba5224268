"""``aleph mcp``: list, add, remove and trust MCP servers."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import tomlkit
import tomlkit.exceptions

from aleph._atomic import write_atomic
from aleph._cli._common import EXIT_FAILED, EXIT_OK, load_runtime, print_json
from aleph._config import load_config
from aleph._errors import ConfigError

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph mcp ...``."""
    mcp = sub.add_parser("mcp", help="manage MCP servers", description="Manage the MCP servers Aleph connects to.")
    msub = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)

    p = msub.add_parser(
        "list",
        help="connect and show every server",
        description="Connect and show every server. Exit 1 when an enabled server is not connected.",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_list)

    p = msub.add_parser("add", help="add a server to aleph.toml", description="Add a server to the project aleph.toml.")
    p.add_argument("id", help="server id: ASCII letters, digits, '_' or '-', no '__'")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--command", help="program to start (stdio)")
    how.add_argument("--url", help="Streamable HTTP endpoint")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="A",
        help="an argument of --command (repeatable; write --arg=-x for one starting with -)",
    )
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="environment for --command (repeatable)")
    p.add_argument("--header", action="append", default=[], metavar="K=V", help="HTTP header for --url (repeatable)")
    p.add_argument("--timeout", type=float, help="connect and request timeout in seconds")
    p.set_defaults(func=_add)

    p = msub.add_parser("remove", help="remove a server from aleph.toml", description="Remove a server.")
    p.add_argument("id", help="server id")
    p.set_defaults(func=_remove)

    p = msub.add_parser(
        "trust",
        help="accept changed tool definitions",
        description="Re-pin the current definitions of a server's changed tools (or one tool), lifting the "
        "forced approval that a changed definition triggers.",
    )
    p.add_argument("id", help="server id")
    p.add_argument("tool", nargs="?", help="one tool (its MCP name or the {server}__{tool} name)")
    p.set_defaults(func=_trust)


def _list(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with load_runtime(args) as rt:
            statuses = rt.mcp.servers()
        down = [s for s in statuses if s.state not in ("connected", "disabled")]
        status = EXIT_FAILED if down else EXIT_OK
        if args.json:
            print_json([s.to_json() for s in statuses])
            return status
        if not statuses:
            print("no MCP servers configured (add one: aleph mcp add ID --command CMD | --url URL)")
            return 0
        for s in statuses:
            proto = s.protocol_version or "-"
            print(f"{s.id}  [{s.transport}] {s.state}  protocol {proto}  {s.target}")
            if s.reason:
                print(f"    reason: {s.reason}")
            if s.capabilities:
                print(f"    capabilities: {', '.join(s.capabilities)}")
            print(
                f"    tools {s.tools}, resources {s.resources}, templates {s.templates}, prompts {s.prompts}, "
                f"restarts {s.restarts}"
            )
            for q in s.quarantined:
                print(f"    quarantined: {q['tool']}: {q['reason']}")
            if s.changed_tools:
                print(
                    f"    CHANGED since pinned (ask on every call): {', '.join(s.changed_tools)} — "
                    f"review, then: aleph mcp trust {s.id}"
                )
            for w in s.warnings:
                print(f"    warning: {w}")
        return status

    return anyio.run(run)


def _trust(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with load_runtime(args) as rt:
            try:
                names = rt.mcp.trust(args.id, args.tool)
            except (KeyError, RuntimeError) as exc:
                print(f"aleph: {exc.args[0] if exc.args else exc}", file=sys.stderr)
                return 1
        if names:
            print(f"pinned {len(names)} tool definition(s) of {args.id}: {', '.join(names)}")
        else:
            print(f"nothing to trust: no tool of {args.id} changed since it was pinned")
        return 0

    return anyio.run(run)


# -- editing aleph.toml (tomlkit keeps every comment, blank line and layout of the rest) -------------

_ID = re.compile(r"[A-Za-z0-9_-]{1,32}", re.ASCII)


def _project_file(args: argparse.Namespace) -> Path:
    if args.config:
        return Path(args.config)
    if os.environ.get("ALEPH_CONFIG"):
        return Path(os.environ["ALEPH_CONFIG"])
    return Path(args.workspace or ".") / "aleph.toml"


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {item!r} must look like KEY=VALUE")
        out[key] = value
    return out


def _document(path: Path) -> tomlkit.TOMLDocument:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from None


def _servers(doc: tomlkit.TOMLDocument) -> Any:
    """The ``[mcp.servers]`` table of ``doc``, or None."""
    mcp = doc.get("mcp")
    servers = mcp.get("servers") if isinstance(mcp, dict) else None
    return servers if isinstance(servers, dict) else None


def _check_and_write(path: Path, text: str) -> None:
    """Validate the would-be file with the real loader, then replace the original atomically."""

    def check(tmp: Path) -> None:
        try:
            load_config(tmp, workspace=path.parent, user_file=False, env={})
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(str(tmp), str(path))) from None

    write_atomic(path, text, mode=None, check=check)


def _add(args: argparse.Namespace) -> int:
    if not _ID.fullmatch(args.id) or "__" in args.id:
        print(
            f"aleph: server id {args.id!r}: use 1-32 ASCII letters, digits, '_' or '-', without '__'", file=sys.stderr
        )
        return 2
    if args.command is None and (args.arg or args.env):
        print("aleph: --arg and --env go with --command", file=sys.stderr)
        return 2
    if args.command is not None and args.header:
        print("aleph: --header goes with --url", file=sys.stderr)
        return 2
    path = _project_file(args)
    doc = _document(path)
    existing = _servers(doc)
    if existing is not None and args.id in existing:
        print(f"aleph: MCP server {args.id!r} already exists in {path}; remove it first", file=sys.stderr)
        return 1
    server = tomlkit.table()
    if args.command is not None:
        server["command"] = args.command
        if args.arg:
            server["args"] = list(args.arg)
        env = _pairs(args.env, "--env")
        if env:
            server["env"] = _inline(env)
    else:
        server["url"] = args.url
        headers = _pairs(args.header, "--header")
        if headers:
            server["headers"] = _inline(headers)
    if args.timeout is not None:
        server["timeout_seconds"] = float(args.timeout)
    if existing is None:
        if "mcp" in doc and not isinstance(doc["mcp"], dict):
            print(f"aleph: `mcp` in {path} is not a table; edit that file by hand", file=sys.stderr)
            return 1
        servers = tomlkit.table(is_super_table=True)
        servers[args.id] = server
        mcp = doc.get("mcp")
        if mcp is None:
            mcp = tomlkit.table(is_super_table=True)
            doc["mcp"] = mcp
        mcp["servers"] = servers
    else:
        existing[args.id] = server
    _check_and_write(path, tomlkit.dumps(doc))
    print(f"added MCP server {args.id!r} to {path}")
    return 0


def _inline(pairs: dict[str, str]) -> Any:
    table = tomlkit.inline_table()
    table.update(pairs)
    return table


def _remove(args: argparse.Namespace) -> int:
    path = _project_file(args)
    doc = _document(path)
    servers = _servers(doc)
    if servers is None or args.id not in servers:
        print(f"aleph: MCP server {args.id!r} is not in {path}", file=sys.stderr)
        return 1
    del servers[args.id]
    _check_and_write(path, tomlkit.dumps(doc))
    print(f"removed MCP server {args.id!r} from {path}")
    return 0
