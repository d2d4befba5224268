"""The main job's start: time from launching the server to its first ``tools/list`` answer.

Launched by the official SDK client in its default mode (2026-07-28 first), exactly as an MCP client
launches a server, from an empty workspace directory:

1. ``aleph serve`` (the baseline: the venv's console script, a cold start: every import paid);
2. ``scripts/run-main`` on a second and later start: its install stamp is there and its start server
   (core/src/aleph/_cli/_warm.py) forks an ``aleph serve`` that has everything imported already.
   Target: <= 2 s; the ratio to (1) is what the warm start saves.

The first ``scripts/run-main`` start (any running start server is stopped first, so it starts cold and
leaves a new one behind; it installs only if its stamp is stale) is printed too but not part of the target.
Starts are interleaved so both see the same machine load; medians and minima are printed. The start
server is stopped at the end.

Run: ``.venv/bin/python bench/bench_main.py [--starts N]`` from a checkout whose ``.venv`` has Aleph.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
RUN_MAIN = REPO / "scripts" / "run-main"
ALEPH = REPO / ".venv" / "bin" / "aleph"
TARGET_S = 2.0
SOCKET = REPO / ".venv" / ".aleph-warm" / "sock"


def stop_start_server() -> None:
    """Stop the start server of this checkout's .venv, if one runs."""
    try:
        pid = int((SOCKET.parent / "pid").read_text())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 10
    while SOCKET.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


async def first_list(command: str, workspace: Path, env: dict[str, str]) -> tuple[float, int]:
    """Seconds from launch to the first tools/list answer, and how many tools it listed."""
    params = StdioServerParameters(command=command, args=[], cwd=str(workspace), env=env)
    if command == str(ALEPH):
        params = StdioServerParameters(command=command, args=["serve"], cwd=str(workspace), env=env)
    start = time.perf_counter()
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        elapsed = time.perf_counter() - start
    return elapsed, len(tools)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5, help="timed starts of each (default 5)")
    args = parser.parse_args()
    if not ALEPH.exists():
        sys.exit(f"{ALEPH} is missing: run scripts/run-main once (or follow CONTRIBUTING.md) first")

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TERM")}
        env["XDG_DATA_HOME"] = str(Path(tmp) / "data")
        env["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")

        stop_start_server()
        first, tools = anyio.run(first_list, str(RUN_MAIN), workspace, env)
        print(f"run-main first start (cold; installs when its stamp is stale): {first:6.2f} s, {tools} tools")
        deadline = time.monotonic() + 120
        while not SOCKET.exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # the start server it left behind is importing
        bare: list[float] = []
        main_job: list[float] = []
        for _ in range(args.starts):
            bare.append(anyio.run(first_list, str(ALEPH), workspace, env)[0])
            main_job.append(anyio.run(first_list, str(RUN_MAIN), workspace, env)[0])

    stop_start_server()
    for name, samples in (("aleph serve", bare), ("run-main (2nd+)", main_job)):
        print(
            f"{name:<16} first tools/list: median {statistics.median(samples):5.2f} s, "
            f"min {min(samples):5.2f} s over {len(samples)} starts"
        )
    ratio = statistics.median(main_job) / statistics.median(bare)
    verdict = "meets" if statistics.median(main_job) <= TARGET_S else "MISSES"
    print(f"run-main / aleph serve: {ratio:.2f}x; run-main median {verdict} the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
