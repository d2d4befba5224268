"""``aleph tools``: list, describe and call tools."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import anyio

from aleph._chokepoint._requesters import TerminalRequester
from aleph._chokepoint._scoped import ScopedToolService
from aleph._cli._common import load_runtime, parse_json_arg, print_json
from aleph._cli._present import StderrProgress, exit_code, person_message
from aleph._contract._names import suggest_candidates
from aleph._contract._types import ToolOutput, ToolResult
from aleph._discovery import RequestBinding, search_tools
from aleph._discovery._tools import MAX_LIMIT
from aleph._errors import PermissionDenied, ToolError
from aleph._human_text import TerminalHuman
from aleph._progress import get_tool_progress_handler, set_tool_progress_handler

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph tools ...``."""
    tools = sub.add_parser("tools", help="list, describe and call tools", description="List, describe and call tools.")
    tsub = tools.add_subparsers(dest="tools_command", metavar="ACTION", required=True)

    p = tsub.add_parser("list", help="list the tools offered", description="List the tools offered to an agent.")
    p.add_argument("--json", action="store_true", help="print JSON definitions")
    p.add_argument("--all", action="store_true", help="list deferred tools too (callable, not shown until searched)")
    p.add_argument("--agent", help="agent whose view to show")
    p.add_argument("--channel", help="channel whose view to show")
    p.set_defaults(func=_list)

    p = tsub.add_parser("describe", help="show one tool's definition", description="Show one tool's full definition.")
    p.add_argument("name", help="tool name")
    p.add_argument("--agent", help="agent whose view to show")
    p.add_argument("--channel", help="channel whose view to show")
    p.set_defaults(func=_describe)

    p = tsub.add_parser("call", help="call a tool", description="Call a tool through the permission chokepoint.")
    p.add_argument("name", help="tool name")
    p.add_argument("--input", default="{}", metavar="JSON", help="tool input as a JSON object (default {})")
    p.add_argument("--agent", help="agent to act as")
    p.add_argument("--channel", help="channel to act from")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.set_defaults(func=_call)

    p = tsub.add_parser(
        "search",
        help="search tools by what they do",
        description="Rank the tools an agent may see by a natural-language query (the tool_search BM25 index).",
    )
    p.add_argument("query", help="what you want to do, e.g. 'take a screenshot'")
    p.add_argument("--limit", type=int, default=5, metavar="N", help="how many tools to show (1-20, default 5)")
    p.add_argument("--json", action="store_true", help="print the tool_search result object")
    p.add_argument("--agent", help="agent whose view to search")
    p.add_argument("--channel", help="channel whose view to search")
    p.set_defaults(func=_search)


SUMMARY_WIDTH = 80


def one_line(description: str, width: int = SUMMARY_WIDTH) -> str:
    """A description's first line, cut at a word boundary with "…" when longer than ``width``."""
    text = description.strip().splitlines()[0] if description.strip() else ""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + " …"


def _list(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with load_runtime(args) as rt:
            service = rt.tool_service(agent=args.agent, channel=args.channel)
            listed = await service.list()
            shown = {d.name for d in listed}
            deferred = [d for d in await service.dispatchable_list() if d.name not in shown]
            defs = sorted([*listed, *deferred], key=lambda d: d.name) if args.all else listed
            if args.json:
                print_json([d.to_json() for d in defs])
                return 0
            if not defs:
                print("no tools are available (install a plugin, e.g. pip install aleph-example)")
                return 0
            width = max(len(d.name) for d in defs)
            later = {d.name for d in deferred}
            for d in defs:
                mark = " (deferred)" if d.name in later else ""
                print(f"{d.name:<{width}}  {one_line(d.description)}{mark}")
            if deferred and not args.all:
                print(
                    f"{len(deferred)} more tools are deferred (callable; a model finds them with tool_search): "
                    "`aleph tools list --all` lists them, `aleph tools search QUERY` finds one"
                )
            return 0

    return asyncio.run(run())


def _describe(args: argparse.Namespace) -> int:
    async def run() -> int:
        async with load_runtime(args) as rt:
            # A person asking for a tool sees its full schema, not the collapsed form a model is first shown.
            service = rt.tool_service(agent=args.agent, channel=args.channel, discovery=False)
            definition = await service.describe(args.name)
            if definition is None:
                names = [d.name for d in await service.dispatchable_list()]
                hint = suggest_candidates(args.name, names)
                print(
                    f"aleph: tool not found: {args.name}" + (f". Did you mean: {', '.join(hint)}?" if hint else ""),
                    file=sys.stderr,
                )
                return 1
            print_json(definition.to_json())
            return 0

    return asyncio.run(run())


def _call(args: argparse.Namespace) -> int:
    payload = parse_json_arg(args.input, "--input")
    if not isinstance(payload, dict):
        print('aleph: --input must be a JSON object, e.g. --input \'{"text": "hello"}\'', file=sys.stderr)
        return 2

    async def run() -> int:
        async with load_runtime(args) as rt:
            # On a terminal the user is asked y/s/a/n; without one nobody can be asked, so gated calls are refused.
            requester = TerminalRequester()
            # A tool that asks the person (ask_user, CallContext.ask_human) asks on this terminal.
            human = TerminalHuman() if sys.stdin.isatty() else None
            service = rt.tool_service(agent=args.agent, channel=args.channel, requester=requester, human=human)
            progress = StderrProgress(get_tool_progress_handler())
            previous = set_tool_progress_handler(progress)
            started = time.perf_counter()
            try:
                output = await _execute_with_indicator(service, args.name, payload, progress)
            except ToolError as exc:
                progress.clear()
                elapsed = (time.perf_counter() - started) * 1000
                if args.json:
                    failed = ToolResult(False, error=str(exc), duration_ms=elapsed, error_kind=exc.kind)
                    print_json(failed.to_json())
                else:
                    explanation = service.explain(exc.tool, payload) if isinstance(exc, PermissionDenied) else None
                    said = requester.last_denial_reason
                    text = person_message(exc, explanation, stdin_is_tty=sys.stdin.isatty(), said=said)
                    print(text, file=sys.stderr)
                return exit_code(exc)
            finally:
                set_tool_progress_handler(previous)
        if args.json:
            print_json(ToolResult(True, output.text, duration_ms=(time.perf_counter() - started) * 1000).to_json())
            return 0
        try:
            print_json(json.loads(output.text))
        except json.JSONDecodeError:
            print(output.text)
        return 0

    return anyio.run(run)


async def _execute_with_indicator(
    service: ScopedToolService, name: str, payload: dict[str, Any], progress: StderrProgress
) -> ToolOutput:
    """``service.execute``, with the indicator redrawn once a second while it runs; raises its ToolError."""
    outcome: list[ToolOutput | ToolError] = []

    async def run(scope: anyio.CancelScope) -> None:
        try:
            outcome.append(await service.execute(name, payload))
        except ToolError as exc:
            outcome.append(exc)
        finally:
            scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, tg.cancel_scope)
        await _tick(progress, name)
    result = outcome[0]
    if isinstance(result, ToolError):
        raise result
    return result


async def _tick(progress: StderrProgress, name: str) -> None:
    """Redraw the indicator of a call that runs for more than a second, once a second."""
    while True:
        await anyio.sleep(1)
        progress.tick(name)


def _search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        print("aleph: QUERY must not be empty, e.g. aleph tools search 'read a file'", file=sys.stderr)
        return 2
    if not 1 <= args.limit <= MAX_LIMIT:
        print(f"aleph: --limit must be between 1 and {MAX_LIMIT}", file=sys.stderr)
        return 2

    async def run() -> int:
        async with load_runtime(args) as rt:
            service = rt.tool_service(agent=args.agent, channel=args.channel)
            binding = RequestBinding(rt.registry, rt.discovery.index, None)
            binding.service = service
            found = search_tools(binding, args.query, args.limit, promote=False)
        if args.json:
            print_json(found)
            return 0
        if not found["results"]:
            print(f"no tool matches {args.query!r}")
            return 0
        width = max(len(r["name"]) for r in found["results"])
        for r in found["results"]:
            print(f"{r['score']:8.3f}  {r['name']:<{width}}  {one_line(r['description'])}")
        return 0

    return asyncio.run(run())
