"""aleph-desktop on a private Xvfb 1280×800 display, against real applications.

Run: python bench/bench_desktop.py [N] [--quick]   (N timed samples per figure, default 20; --quick: only
the screenshot and accessibility-query figures, for comparing runs)

Figures (issue 17, targets in brackets):
- screenshot p50 [≤ 60 ms] (capture + PNG encode, through the tool).
- action → settled screenshot p50 [≤ 250 ms], beside the reference computer-use loop's fixed 2.0 s sleep.
- desktop_ax_snapshot of gtk3-widget-factory [≤ 150 ms for ≤ 1,000 nodes]; warm desktop_ax_query_by_role [≤ 10 ms].
- desktop_som of the full screen [≤ 1.5 s] (auto OCR, and OCR of the whole screen for comparison).
- the scripted task suite (tests/desktop/tasks.py): success rates [100% accessibility, ≥ 95% OCR/pixel path].
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aleph_desktop.plugin
from aleph_desktop import HeadlessSession

import aleph
from aleph.testing import isolated_runtime

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests/desktop"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import percentile  # noqa: E402
from harness import Harness  # noqa: E402
from tasks import ACCESSIBILITY, PIXELS  # noqa: E402

_ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
N = int(_ARGS[0]) if _ARGS else 20
QUICK = "--quick" in sys.argv[1:]
REFERENCE_SLEEP_MS = 2000.0  # the computer-use reference sleeps this long before every post-action screenshot


def ms(samples: list[float]) -> str:
    return (
        f"p50 {percentile(samples, 0.5):7.1f} ms   p90 {percentile(samples, 0.9):7.1f} ms"
        f"   (min {min(samples):.1f}, max {max(samples):.1f})"
    )


async def timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def wait_app(call: Any, app: str) -> None:
    for _ in range(200):
        try:
            if (await call("desktop_ax_query_by_role", {"role": "push button", "app": app}))["elements"]:
                return
        except aleph.ToolError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{app} did not appear on the accessibility bus")


async def main(session: HeadlessSession, scratch: Path) -> None:
    toml = f'[desktop]\ndisplay = "{session.display}"\nsession_bus = "{session.bus_address}"\n'
    rt = isolated_runtime(scratch, aleph_desktop.plugin, config_toml=toml)
    async with rt:
        service = rt.tool_service()

        async def call(name: str, payload: dict[str, Any]) -> Any:
            return (await service.execute(name, payload)).value

        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"aleph-desktop bench: Xvfb {session.width}x{session.height}, N={N}, load average {load}\n")
        factory = session.launch(["gtk3-widget-factory"])
        await wait_app(call, "widget-factory")
        await asyncio.sleep(1.0)

        await call("desktop", {"action": "screenshot"})  # warm the capture handle
        shots = await timed(lambda: call("desktop", {"action": "screenshot"}), N)
        print(f"screenshot (capture + PNG, 1280x800)        {ms(shots)}   [target p50 <= 60 ms]")
        small = await timed(lambda: call("desktop", {"action": "screenshot", "max_width": 640, "format": "jpeg"}), N)
        print(f"screenshot (shrunk to 640 px, JPEG)         {ms(small)}")

        snap = await call("desktop_ax_snapshot", {"app": "widget-factory"})
        tree = await call("desktop_ax_query_tree", {"app": "widget-factory", "max_depth": 32, "max_nodes": 10000})
        snaps = await timed(lambda: call("desktop_ax_snapshot", {"app": "widget-factory"}), N)
        print(
            f"desktop_ax_snapshot gtk3-widget-factory     {ms(snaps)}   [target <= 150 ms]"
            f"  ({snap['count']} interactable of {snap['nodes_walked']} examined; the app has "
            f"{tree['node_count'] + tree['elided']} nodes)"
        )
        await call("desktop_ax_query_by_role", {"role": "check box", "app": "widget-factory"})
        # 5×N samples: a few milliseconds each, so a burst of load elsewhere on the machine moves a short series
        roles = await timed(
            lambda: call("desktop_ax_query_by_role", {"role": "check box", "app": "widget-factory"}), 5 * N
        )
        print(f"desktop_ax_query_by_role (warm)             {ms(roles)}   [target <= 10 ms]")
        walks = await timed(
            lambda: call("desktop_ax_query_tree", {"app": "widget-factory", "max_depth": 32, "max_nodes": 10000}),
            max(3, N // 4),
        )
        print(f"desktop_ax_query_tree full walk             {ms(walks)}   ({tree['node_count']} nodes)")
        session.stop(factory)
        if QUICK:
            return

        scratch_state = scratch / "state"
        scratch_state.mkdir()
        harness = Harness(session, call, scratch_state)
        await harness.ensure("gtk")
        await harness.ensure("tk")

        async def act() -> None:
            await call(
                "desktop",
                {
                    "action": "press",
                    "role": "check box",
                    "name": "Subscribe",
                    "target_app": "gtk_form",
                    "observe": "screenshot",
                },
            )

        acts = await timed(act, N)
        print(
            f"action -> settled screenshot (AX press)     {ms(acts)}   [target p50 <= 250 ms]"
            f"   reference fixed sleep: {REFERENCE_SLEEP_MS:.0f} ms + capture "
            f"({REFERENCE_SLEEP_MS / percentile(acts, 0.5):.1f}x slower)"
        )
        save = (await call("desktop_ax_query_by_role", {"role": "push button", "name": "Save", "app": "gtk_form"}))[
            "elements"
        ][0]

        async def click() -> None:
            shot = await call("desktop", {"action": "screenshot", "observe": "none"})
            await call(
                "desktop",
                {
                    "action": "click",
                    "x": save["center"][0],
                    "y": save["center"][1],
                    "screenshot_id": shot["screenshot_id"],
                    "observe": "screenshot",
                },
            )

        clicks = await timed(click, N)
        print(f"screenshot + click -> settled screenshot    {ms(clicks)}")

        soms = await timed(lambda: call("desktop_som", {}), max(3, N // 4))
        som = await call("desktop_som", {})
        print(f"desktop_som full screen (auto OCR)          {ms(soms)}   [target <= 1.5 s]  ({som['count']} marks)")
        soms_all = await timed(lambda: call("desktop_som", {"ocr": "always"}), max(3, N // 4))
        print(f"desktop_som full screen (OCR everything)    {ms(soms_all)}")

        harness.restart("gtk")
        harness.restart("tk")
        for label, suite in (("accessibility", ACCESSIBILITY), ("OCR/pixel", PIXELS)):
            start = time.perf_counter()
            outcomes = [await harness.run(task) for task in suite]
            passed = sum(o.ok for o in outcomes)
            target = "100%" if suite is ACCESSIBILITY else ">= 95%"
            print(
                f"task suite, {label:<14} {passed}/{len(suite)} = {passed / len(suite):6.1%}   [target {target}]"
                f"   {time.perf_counter() - start:5.1f} s"
            )
            for o in outcomes:
                if not o.ok:
                    print(f"    failed: {o.task.name}: {o.detail[:160]}")
        harness.close()


if __name__ == "__main__":
    with HeadlessSession(1280, 800) as s, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(s, Path(tmp)))
