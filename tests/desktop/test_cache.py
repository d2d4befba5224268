"""The warm accessibility cache against an application that changes on its own.

``desktop_ax_query_by_role`` reuses names, states and boxes it has already read; these tests change
the application behind its back (a signal, not a tool call, so nothing tells the tools to forget) and
check that a warm query answers as a cold one would: never a removed element, never an old box.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aleph_desktop import HeadlessSession
from aleph_desktop._atspi import AtspiClient
from aleph_desktop._query import find
from harness import APPS, SYSTEM_PYTHON
from Xlib import display as xdisplay

pytestmark = pytest.mark.anyio

APP = "gtk_changing"


class Changing:
    """The running app: send it a change, wait until it says it is done."""

    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def said(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    async def change(self, sig: signal.Signals, word: str) -> None:
        before = self.said().count(word)
        os.kill(self.proc.pid, sig)
        for _ in range(100):
            if self.said().count(word) > before:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the app did not report {word!r}")


@pytest.fixture
async def app(session: HeadlessSession, call: Any, tmp_path: Path) -> AsyncIterator[Changing]:
    log = tmp_path / "changes.log"
    proc = session.launch([SYSTEM_PYTHON, str(APPS / "gtk_changing.py"), str(log)])
    try:
        for _ in range(200):
            if "ready" in (log.read_text() if log.exists() else ""):
                try:
                    if (await boxes(call, "Option"))["Option 1"]:
                        break
                except KeyError:
                    pass
            await asyncio.sleep(0.1)
        yield Changing(proc, log)
    finally:
        session.stop(proc)


async def query(call: Any, **extra: Any) -> list[dict[str, Any]]:
    found = await call("desktop_ax_query_by_role", {"role": "check box", "app": APP, "max_results": 100, **extra})
    return list(found["elements"])


async def boxes(call: Any, prefix: str) -> dict[str, tuple[int, int, int, int]]:
    """Name -> bounds of the showing check boxes whose name starts with ``prefix``, from a warm query."""
    await query(call)  # make sure what follows is answered from a warm cache
    out = {}
    for e in await query(call):
        if e["name"].startswith(prefix):
            b = e["bounds"]
            out[e["name"]] = (b["x"], b["y"], b["width"], b["height"])
    return out


async def cold(session: HeadlessSession, prefix: str) -> dict[str, tuple[int, int, int, int]]:
    """The same, read by a new client that has nothing cached."""
    client = AtspiClient(session.bus_address)
    try:
        found = await find(client, role="check box", name=None, app=APP, max_results=100)
    finally:
        client.close()
    return {e.name: e.bounds for e in found["elements"] if e.name.startswith(prefix) and e.bounds}


async def stable(session: HeadlessSession, prefix: str) -> dict[str, tuple[int, int, int, int]]:
    """:func:`cold`, once two reads in a row agree (the application has finished laying out)."""
    last = await cold(session, prefix)
    for _ in range(60):
        await asyncio.sleep(0.05)
        now = await cold(session, prefix)
        if now == last:
            return now
        last = now
    raise AssertionError(f"the boxes of {prefix!r} never settled")


async def test_a_warm_query_never_returns_an_element_the_app_removed(app: Changing, call: Any) -> None:
    first = await query(call)
    options = [e for e in first if e["name"].startswith("Option")]
    assert [e["name"] for e in options] == [f"Option {i}" for i in range(1, 6)]
    for left in (4, 3):
        gone = options[-1]["element"]
        await app.change(signal.SIGUSR1, "removed")
        now = await query(call)
        names = [e["name"] for e in now if e["name"].startswith("Option")]
        assert names == [f"Option {i}" for i in range(1, left + 1)]
        assert gone not in {e["element"] for e in now}
        assert gone not in {e["element"] for e in await query(call, include_hidden=True)}
        options = [e for e in now if e["name"].startswith("Option")]


async def test_a_warm_query_sees_a_rename(app: Changing, call: Any) -> None:
    assert "Option 1" in await boxes(call, "Option")
    await app.change(signal.SIGHUP, "renamed")
    names = [e["name"] for e in await query(call)]
    assert "Renamed" in names and "Option 1" not in names


async def test_warm_boxes_follow_a_window_moved_without_any_accessibility_event(
    app: Changing, call: Any, session: HeadlessSession
) -> None:
    before = await boxes(call, "Option")
    d = xdisplay.Display(session.display)
    try:
        listed = (await call("desktop", {"action": "window_list"}))["windows"]
        window = next(w for w in listed if w["title"] == "Changing")
        b = window["bounds"]
        win = d.create_resource_object("window", window["id"])
        win.configure(x=b["x"] - 41, y=b["y"] + 17)
        d.sync()
        expected = {name: (x - 41, y + 17, w, h) for name, (x, y, w, h) in before.items()}
        for _ in range(100):  # until the application has seen its new place
            if await stable(session, "Option") == expected:
                break
            await asyncio.sleep(0.05)
        assert await boxes(call, "Option") == expected
    finally:
        d.close()


async def test_warm_boxes_follow_a_relayout_and_a_scroll_inside_an_unmoved_window(
    app: Changing, call: Any, session: HeadlessSession
) -> None:
    options = await boxes(call, "Option")
    await app.change(signal.SIGUSR2, "pushed")  # a tall label above: every option moves down
    truth = await stable(session, "Option")
    pushed = await boxes(call, "Option")
    assert pushed == truth
    assert all(pushed[n][1] > options[n][1] for n in options)

    rows = await boxes(call, "Row")
    await app.change(signal.SIGWINCH, "scrolled")  # the list scrolls 60 px: rows move, nothing else does
    truth = await stable(session, "Row")
    scrolled = await boxes(call, "Row")
    assert scrolled == truth
    assert all(scrolled[n][1] == rows[n][1] - 60 for n in scrolled if n in rows)
    assert "Row 1" in rows and "Row 1" not in scrolled  # scrolled out of sight: no longer showing
