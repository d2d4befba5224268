"""aleph-browser vs @playwright/mcp on the same local pages and the same Debian Chromium.

Run: python bench/bench_browser.py [N]      (N timed runs per side, default 5; both sides warm)

Figures (issue "aleph-browser"):
- navigate → snapshot → click → type → snapshot: Aleph (UnscopedToolService, warm browser) vs @playwright/mcp
  over stdio with the mcp SDK client (warm: the sequence runs once before timing). Target: Aleph <= 0.5x.
- snapshot of a 10,000-node page: within the default budget, with the truncation marker.
- delta snapshot after one click: < 10% of the full snapshot.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aleph_browser.plugin

import aleph

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROOT = Path(__file__).resolve().parent.parent
PEER_CLI = ROOT / "tests/npm/node_modules/@playwright/mcp/cli.js"
NODE = ROOT / "tests/npm/node_modules/.bin/node"
CHROMIUM = "/usr/bin/chromium"

FORM = (
    "<!doctype html><title>Bench form</title><h1>Sign up</h1>"
    "<label>Email <input id=email name=email></label>"
    "<button id=go onclick=\"document.getElementById('out').textContent = 'clicked'\">Continue</button>"
    "<p id=out>waiting</p>" + "".join(f"<p>Paragraph {i} of filler text for a realistic page.</p>" for i in range(40))
)
BIG = (
    "<!doctype html><title>Big</title>"
    "<button onclick=\"document.getElementById('st').textContent = 'on'\">Toggle</button><p id=st>off</p>"
    + "".join(f'<div><a href="#r{i}">row {i}</a> <span>value {i}</span></div>' for i in range(2500))
)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = (BIG if self.path.startswith("/big") else FORM).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def ref_for(snapshot: str, needle: str) -> str:
    for line in snapshot.splitlines():
        if needle in line:
            m = re.search(r"\[ref=([a-z0-9]+)\]", line)
            if m:
                return m.group(1)
    raise RuntimeError(f"no ref for {needle!r} in snapshot:\n{snapshot[:2000]}")


class AlephSide:
    """aleph-browser through UnscopedToolService, in this process."""

    def __init__(self, origin: str, workdir: Path) -> None:
        self.origin = origin
        (workdir / "aleph.toml").write_text(
            f'[workspace]\ndata_dir = "{(workdir / "data").as_posix()}"\n[browser]\nallowed_origins = ["{origin}"]\n'
        )
        self.rt = aleph.load(
            workdir / "aleph.toml", workspace=workdir, plugins=[aleph_browser.plugin], entry_points=False, strict=True
        )
        self.service = aleph.UnscopedToolService(self.rt.registry)

    async def run(self, name: str, payload: dict[str, Any]) -> str:
        return (await self.service.execute(name, payload)).text

    async def sequence(self) -> float:
        start = time.perf_counter()
        await self.run("browser_navigate", {"url": self.origin + "/form", "snapshot": "none"})
        snap = await self.run("browser_snapshot", {})
        await self.run("browser_click", {"target": ref_for(snap, 'button "Continue"'), "element": "Continue"})
        await self.run("browser_type", {"target": ref_for(snap, 'textbox "Email"'), "text": "a@example.com"})
        await self.run("browser_snapshot", {})
        return time.perf_counter() - start

    async def sizes(self) -> dict[str, str]:
        await self.run("browser_navigate", {"url": self.origin + "/big", "snapshot": "none"})
        budgeted = (await self.run("browser_snapshot", {})).split("\n", 1)[1]
        full = (await self.run("browser_snapshot", {"max_chars": 2_000_000})).split("\n", 1)[1]
        clicked = await self.run("browser_click", {"target": "text=Toggle"})
        return {"budgeted": budgeted, "full": full, "delta": clicked.split("Snapshot (delta):\n", 1)[1]}


class PeerSide:
    """@playwright/mcp over stdio with the mcp SDK client."""

    def __init__(self, origin: str, client: Any) -> None:
        self.origin = origin
        self.client = client

    async def run(self, name: str, payload: dict[str, Any]) -> str:
        result = await self.client.call_tool(name, payload)
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            raise RuntimeError(f"{name}: {text[:500]}")
        return text

    async def sequence(self) -> float:
        start = time.perf_counter()
        await self.run("browser_navigate", {"url": self.origin + "/form"})
        snap = await self.run("browser_snapshot", {})
        await self.run("browser_click", {"target": ref_for(snap, 'button "Continue"'), "element": "Continue"})
        await self.run(
            "browser_type", {"target": ref_for(snap, 'textbox "Email"'), "text": "a@example.com", "element": "Email"}
        )
        await self.run("browser_snapshot", {})
        return time.perf_counter() - start


async def measure(origin: str, work: Path) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=str(NODE),
        args=[
            str(PEER_CLI),
            *("--executable-path", CHROMIUM, "--headless", "--no-sandbox", "--isolated"),
            *("--output-dir", str(work / "peer-out")),
        ],
        cwd=str(work),
    )
    ours = AlephSide(origin, work)
    async with ours.rt, Client(params, read_timeout_seconds=120) as client:
        peer = PeerSide(origin, client)
        await ours.sequence()  # warm: browsers launched, pages cached
        await peer.sequence()
        times: dict[str, list[float]] = {"aleph": [], "peer": []}
        # Alternate the two sides so that load from other processes falls on both alike.
        for _ in range(N):
            times["aleph"].append(await ours.sequence())
            times["peer"].append(await peer.sequence())
        sizes = await ours.sizes()
        await peer.run("browser_navigate", {"url": origin + "/big"})
        sizes["peer_big"] = await peer.run("browser_snapshot", {})
    return {"times": times, **sizes}


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        out = asyncio.run(measure(origin, Path(tmp)))
    server.shutdown()

    ours, peer = out["times"]["aleph"], out["times"]["peer"]
    a, p = statistics.median(ours), statistics.median(peer)
    pairs = statistics.median(x / y for x, y in zip(ours, peer, strict=True))
    print(f"runs per side: {N} (warm, alternating), same pages on {origin}, same Chromium {CHROMIUM}")
    print("sequence navigate -> snapshot -> click -> type -> snapshot, median wall time:")
    print(f"  aleph-browser     {a * 1000:8.1f} ms   (runs: {', '.join(f'{t * 1000:.0f}' for t in ours)})")
    print(f"  @playwright/mcp   {p * 1000:8.1f} ms   (runs: {', '.join(f'{t * 1000:.0f}' for t in peer)})")
    print(f"  ratio aleph/peer  {a / p:8.2f}x     (median of per-run ratios {pairs:.2f}x; target <= 0.5x)")
    budgeted, full, delta = out["budgeted"], out["full"], out["delta"]
    marker = "[... truncated:" in budgeted
    print("10,000-node page snapshot:")
    print(f"  aleph default budget      {len(budgeted):>9,} chars (budget 20,000; truncation marker: {marker})")
    print(f"  aleph full (no budget)    {len(full):>9,} chars")
    print(f"  @playwright/mcp response  {len(out['peer_big']):>9,} chars")
    print("delta snapshot after one click on the 10,000-node page:")
    print(f"  delta {len(delta):,} chars vs full {len(full):,} chars = {len(delta) / len(full):.2%} (target < 10%)")


if __name__ == "__main__":
    main()
