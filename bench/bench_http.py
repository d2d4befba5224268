"""``tools/call`` over Streamable HTTP: ``aleph serve --http`` against the SDK's own server, per protocol era.

Run: python bench/bench_http.py [--calls N]
Target (issue 34): either era, Aleph's median ``tools/call`` <= 1.2x the SDK's ``MCPServer`` on the same era
and transport (both served by uvicorn on loopback, called by the SDK's ``Client`` in one run). The delayed
ACK that met Nagle's algorithm on the modern era cost ~46 ms a call before the fix.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from mcp import Client

ALEPH = str(Path(sys.executable).with_name("aleph"))

_SDK_SERVER = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("baseline")

    @app.tool()
    def text_stats(text: str) -> dict:
        \"\"\"Count words and characters.\"\"\"
        return {"words": len(text.split()), "chars": len(text)}

    app.run(transport="streamable-http", port=int(sys.argv[1]))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _served(argv: list[str], cwd: Path, port: int) -> Iterator[str]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{argv[0]} did not start listening on {port}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


async def _medians_ms(aleph_url: str, sdk_url: str, mode: str, calls: int) -> tuple[float, float]:
    """Median ms per call of each server, one client each, calling them in turns so both meet the same load."""
    async with Client(aleph_url, mode=mode) as aleph, Client(sdk_url, mode=mode) as sdk:  # type: ignore[arg-type]
        samples: list[tuple[Client, list[float]]] = [(aleph, []), (sdk, [])]
        for i in range(calls + 5):
            for client, times in samples:
                start = time.perf_counter()
                result = await client.call_tool("text_stats", {"text": f"a b c {i}"})
                if i >= 5:  # the first calls warm both servers up
                    times.append((time.perf_counter() - start) * 1e3)
                assert not result.is_error, result
    return statistics.median(samples[0][1]), statistics.median(samples[1][1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "sdk_server.py").write_text(_SDK_SERVER)
        aleph_port, sdk_port = _free_port(), _free_port()
        with (
            _served([ALEPH, "serve", "--http", "--port", str(aleph_port)], work, aleph_port) as aleph_url,
            _served([sys.executable, str(work / "sdk_server.py"), str(sdk_port)], work, sdk_port) as sdk_url,
        ):
            print(f"tools/call text_stats over Streamable HTTP, median of {args.calls} calls (target <= 1.2x)")
            for era, mode in (("modern (auto)", "auto"), ("legacy", "legacy")):
                aleph, sdk = anyio.run(_medians_ms, aleph_url, sdk_url, mode, args.calls)
                verdict = "met" if aleph <= 1.2 * sdk else "NOT met"
                print(
                    f"  {era:14s} aleph {aleph:7.2f} ms   sdk MCPServer {sdk:7.2f} ms   {aleph / sdk:5.2f}x  {verdict}"
                )


if __name__ == "__main__":
    main()
