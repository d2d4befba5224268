"""aleph-browser vs @playwright/mcp on the same local pages and the same Debian Chromium.

Run: python bench/bench_browser.py [N]      (N timed runs per side, default 5; both sides warm)

Figures (issues "aleph-browser" and #34):
- navigate → snapshot → click → type → snapshot, warm (the sequence runs once before timing), the sides
  called in turns. The figure (target <= 0.5x the peer): Aleph the way a user meets it, ``aleph serve`` over
  stdio (full chokepoint: permissions, tier, ledger) driven by the same mcp SDK client code as
  @playwright/mcp, with the peer's snapshot settings (a full snapshot after every action, the peer's
  default). Beside it, labelled: ``aleph serve`` with Aleph's own defaults (a delta after an action), and
  Aleph in-process through UnscopedToolService (no chokepoint, no transport, no snapshot on navigate).
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
    """aleph-browser through UnscopedToolService, in this process (no chokepoint, no snapshot on navigate)."""

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


class McpSide:
    """A browser MCP server over stdio, driven with the mcp SDK client (@playwright/mcp, or ``aleph serve``).

    ``snapshot``: the ``snapshot`` argument given to each action (None: leave it out, the peer's way).
    """

    def __init__(self, origin: str, client: Any, snapshot: str | None = None) -> None:
        self.origin = origin
        self.client = client
        self.extra = {} if snapshot is None else {"snapshot": snapshot}

    async def run(self, name: str, payload: dict[str, Any]) -> str:
        result = await self.client.call_tool(name, payload)
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            raise RuntimeError(f"{name}: {text[:500]}")
        return text

    async def sequence(self) -> float:
        start = time.perf_counter()
        await self.run("browser_navigate", {"url": self.origin + "/form", **self.extra})
        snap = await self.run("browser_snapshot", {})
        await self.run(
            "browser_click", {"target": ref_for(snap, 'button "Continue"'), "element": "Continue", **self.extra}
        )
        await self.run(
            "browser_type",
            {"target": ref_for(snap, 'textbox "Email"'), "text": "a@example.com", "element": "Email", **self.extra},
        )
        await self.run("browser_snapshot", {})
        return time.perf_counter() - start


def served(work: Path, origin: str) -> Any:
    """``aleph serve`` over stdio: the operator's configuration (``--config``) allows the bench's origin."""
    from mcp import StdioServerParameters

    ws = work / "served"
    ws.mkdir()
    config = work / "served.toml"  # the operator's file, outside the workspace (a project file only tightens)
    config.write_text(
        f'[workspace]\ndata_dir = "{(work / "served-data").as_posix()}"\n'
        f'[browser]\nallowed_origins = ["{origin}"]\n'
        # What a user who lets the agent drive the browser unattended writes: its tools run without asking.
        '[policies.tool_permissions.overrides]\n"browser_*" = "allow"\n'
    )
    argv = ["-m", "aleph", "serve", "--config", str(config), "--workspace", str(ws)]
    return StdioServerParameters(command=sys.executable, args=argv, cwd=str(ws))


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
    inproc = AlephSide(origin, work)
    async with (
        inproc.rt,
        Client(params, read_timeout_seconds=120) as peer_client,
        Client(served(work, origin), read_timeout_seconds=120) as aleph_client,
    ):
        sides = {
            "peer": McpSide(origin, peer_client),
            "serve": McpSide(origin, aleph_client, snapshot="full"),
            "serve_defaults": McpSide(origin, aleph_client),
            "inproc": inproc,
        }
        for side in sides.values():
            await side.sequence()  # warm: browsers launched, pages cached
        times: dict[str, list[float]] = {name: [] for name in sides}
        # Take turns so that load from other processes falls on every side alike.
        for _ in range(N):
            for name, side in sides.items():
                times[name].append(await side.sequence())
        sizes = await inproc.sizes()
        await sides["peer"].run("browser_navigate", {"url": origin + "/big"})
        sizes["peer_big"] = await sides["peer"].run("browser_snapshot", {})
    return {"times": times, **sizes}


def _runs(times: list[float]) -> str:
    return f"(runs: {', '.join(f'{t * 1000:.0f}' for t in times)})"


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        out = asyncio.run(measure(origin, Path(tmp)))
    server.shutdown()

    times = out["times"]
    peer = times["peer"]
    p = statistics.median(peer)
    print(f"runs per side: {N} (warm, in turns), same pages on {origin}, same Chromium {CHROMIUM}")
    print("sequence navigate -> snapshot -> click -> type -> snapshot, median wall time (ratio to the peer):")
    print(f"  @playwright/mcp over stdio (baseline)               {p * 1000:8.1f} ms   {_runs(peer)}")
    for name, label, target in (
        ("serve", "aleph serve over stdio, the peer's snapshots", "   target <= 0.5x"),
        ("serve_defaults", "aleph serve over stdio, Aleph's defaults", ""),
        ("inproc", "in-process UnscopedToolService (no chokepoint)", ""),
    ):
        a = statistics.median(times[name])
        pairs = statistics.median(x / y for x, y in zip(times[name], peer, strict=True))
        print(f"  {label:<52}{a * 1000:8.1f} ms   {a / p:5.2f}x (per-run {pairs:.2f}x){target}   {_runs(times[name])}")
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
