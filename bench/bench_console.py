"""The console's approval round trip: a click in Chromium to the waiting call's answer, on loopback.

Run: python bench/bench_console.py   (needs Debian's chromium and playwright; aleph-example for the serve child)
Target (issue 36): click to the call running <= 200 ms on loopback.

- in-process: a call waits in ``Console.inbox`` (same process as the page); the baseline is the same call
  answered at once by a scripted requester.
- cross-process: an ``aleph serve`` child (stdio, a client that cannot elicit) offers its ask to the data
  directory's inbox; the console in this process shows it, the click writes the answer, the child notices it
  (``PRAGMA data_version`` polled every 20 ms) and the MCP call returns. The baseline is the same
  ``tools/call`` with the tool allowed, measured in the same run.
Each figure is the median (and p95) of ROUNDS round trips; the click is timed from just before
``page.click`` to the moment the waiting call ended (a done-callback: ``page.click`` itself returns only
after the page the answer redirects to has loaded). Playwright's own click (actionability checks, input
events) is measured on a button that does nothing, and the part that is Aleph's, from the console
receiving the answer to the call's result, is printed on its own: on a loaded machine the click itself
is most of the figure.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _util import percentile

ROUNDS = 20
CHROMIUM = "/usr/bin/chromium"


def _stats(samples: list[float]) -> str:
    return f"median {statistics.median(samples):7.1f} ms   p95 {percentile(samples, 0.95):7.1f} ms"


async def _until(condition: Any) -> Any:
    while not (value := condition()):
        await asyncio.sleep(0.002)
    return value


def _timed_answers(console: Any) -> list[float]:
    """Record when the console takes an answer (the page's POST reached it), for either inbox."""
    received: list[float] = []

    def timed(answer: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            received.append(time.perf_counter())
            return answer(*args, **kwargs)

        return wrapper

    console.inbox.answer = timed(console.inbox.answer)
    console._answer_shared = timed(console._answer_shared)
    return received


async def noop_clicks(page: Any) -> list[float]:
    await page.set_content("<button onclick='window.n = (window.n || 0) + 1'>nothing</button>")
    out = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await page.click("button")
        out.append((time.perf_counter() - started) * 1000)
    return out


async def in_process(page: Any, workspace: Path) -> tuple[list[float], list[float], list[float]]:
    import aleph
    from aleph._console import Console

    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "ask"\n')
    clicks, baseline = [], []
    async with aleph.load() as rt:
        for _ in range(ROUNDS):
            yes = aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED])
            started = time.perf_counter()
            await rt.tool_service(requester=yes).execute("text_stats", {"text": "one two"})
            baseline.append((time.perf_counter() - started) * 1000)
        console = Console(rt)
        received = _timed_answers(console)
        aleph_part = []
        await console.start()
        try:
            for _ in range(ROUNDS):
                service = rt.tool_service(requester=console.inbox)
                call = asyncio.create_task(service.execute("text_stats", {"text": "one two"}))
                finished: list[float] = []
                call.add_done_callback(lambda _, done=finished: done.append(time.perf_counter()))
                await _until(console.inbox.pending)
                await page.goto(console.url)
                started = time.perf_counter()
                await page.click('button[data-decision="allow_once"]')
                await call
                done = finished[0]  # when the call ended, not when the click's navigation let us look
                clicks.append((done - started) * 1000)
                aleph_part.append((done - received[-1]) * 1000)
        finally:
            await console.stop()
    return clicks, baseline, aleph_part


async def cross_process(page: Any, workspace: Path) -> tuple[list[float], list[float], list[float]]:
    import mcp_types as types
    from mcp import Client, StdioServerParameters

    import aleph
    from aleph._console import Console

    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH"))}
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "aleph"), args=["serve"], cwd=str(workspace), env=env
    )
    clicks, baseline = [], []
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "allow"\n')
    async with Client(params, mode="legacy") as client:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            await client.call_tool("text_stats", {"text": "one two"})
            baseline.append((time.perf_counter() - started) * 1000)
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\ntext_stats = "ask"\n')
    async with aleph.load() as rt:
        console = Console(rt)
        received = _timed_answers(console)
        aleph_part = []
        await console.start()
        try:
            async with Client(params, mode="legacy") as client:
                for _ in range(ROUNDS):
                    call = asyncio.create_task(client.call_tool("text_stats", {"text": "one two"}))
                    finished: list[float] = []
                    call.add_done_callback(lambda _, done=finished: done.append(time.perf_counter()))
                    await _until(console.shared.pending)
                    await page.goto(console.url)
                    started = time.perf_counter()
                    await page.click('button[data-decision="allow_once"]')
                    result: types.CallToolResult = await call
                    done = finished[0]
                    clicks.append((done - started) * 1000)
                    aleph_part.append((done - received[-1]) * 1000)
                    assert not result.is_error, result
        finally:
            await console.stop()
    return clicks, baseline, aleph_part


async def main() -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as scratch:
        os.environ["XDG_DATA_HOME"] = str(Path(scratch) / "data")
        os.environ["XDG_CONFIG_HOME"] = str(Path(scratch) / "config")
        os.environ["ALEPH_TRUST_WORKSPACE_CONFIG"] = "1"
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        os.chdir(workspace)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = await browser.new_page()
            print(f"Playwright   click on a button that does nothing     {_stats(await noop_clicks(page))}")
            clicks, base, ours = await in_process(page, workspace)
            print(f"in-process   call answered by a script (baseline)    {_stats(base)}")
            print(f"in-process   click in Chromium -> the call ran       {_stats(clicks)}   target <= 200 ms")
            print(f"in-process   answer received -> the call ran         {_stats(ours)}")
            clicks, base, ours = await cross_process(page, workspace)
            print(f"aleph serve  plain tools/call, allowed (baseline)    {_stats(base)}")
            print(f"aleph serve  click in Chromium -> the call returned  {_stats(clicks)}   target <= 200 ms")
            print(f"aleph serve  answer received -> the call returned    {_stats(ours)}")
            ratio = statistics.median(ours) / statistics.median(base)
            print(f"             Aleph's part against the plain tools/call: {ratio:.1f}x")
            await browser.close()


if __name__ == "__main__":
    asyncio.run(main())
