"""Runs scripted desktop tasks against real applications on a private display and judges them by state.

Shared by the tests and bench/bench_desktop.py. The applications write their state to JSON files
(tests/desktop/apps); zenity dialogs are judged by what they print and their exit status.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aleph_desktop import HeadlessSession
from aleph_desktop._x11 import X11Display

APPS = Path(__file__).parent / "apps"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, which has python3-gi and python3-tk


@dataclass
class Task:
    """A scripted task: which app, which path, the desktop calls, and the check of the app's state."""

    name: str
    app: str
    path: str
    steps: list[dict[str, Any]]
    check: Callable[[dict[str, Any], dict[str, Any]], bool]
    setup: list[dict[str, Any]] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    task: Task
    ok: bool
    detail: str
    seconds: float


class Harness:
    """Keeps the form apps running on ``session`` and runs tasks through ``execute`` (a tool service's)."""

    def __init__(self, session: HeadlessSession, execute: Callable[..., Any], scratch: Path) -> None:
        self.session = session
        self.execute = execute
        self.scratch = scratch
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def state_path(self, app: str) -> Path:
        return self.scratch / f"{app}.json"

    def read(self, app: str) -> dict[str, Any]:
        try:
            return json.loads(self.state_path(app).read_text())
        except (OSError, ValueError):
            return {}

    async def ensure(self, app: str) -> None:
        proc = self.procs.get(app)
        if proc is not None and proc.poll() is None:
            return
        path = self.state_path(app)
        path.unlink(missing_ok=True)
        script = {"gtk": "gtk_form.py", "tk": "tk_form.py"}[app]
        self.procs[app] = self.session.launch([SYSTEM_PYTHON, str(APPS / script), str(path)])
        deadline = time.monotonic() + 20
        ready = self._gtk_ready if app == "gtk" else self._tk_ready
        while time.monotonic() < deadline:
            # Ready means what the tasks need: the form's state file, and its widgets on the accessibility
            # bus (GTK) or its window mapped on the display (Tk, driven through X11).
            if path.exists() and await ready():
                return
            await asyncio.sleep(0.05)  # poll interval of the condition above
        raise RuntimeError(f"{app} form did not start")

    async def _tk_ready(self) -> bool:
        def mapped() -> bool:
            display = X11Display(self.session.display)
            try:
                return any(w.title == "Tk Form" and w.width > 1 for w in display.windows())
            finally:
                display.close()

        try:
            return await asyncio.to_thread(mapped)
        except Exception:
            return False

    async def _gtk_ready(self) -> bool:
        try:
            out = await self.execute(
                "desktop_ax_query_by_role", {"role": "push button", "name": "Save", "app": "gtk_form"}
            )
        except Exception:
            return False
        return bool(out["elements"])

    async def _has(self, role: str, name: str | None, app: str) -> bool:
        query = {"role": role, "app": app, **({"name": name} if name else {})}
        try:
            return bool((await self.execute("desktop_ax_query_by_role", query))["elements"])
        except Exception:
            return False

    def restart(self, app: str) -> None:
        proc = self.procs.pop(app, None)
        if proc is not None:
            self.session.stop(proc)

    async def run(self, task: Task) -> Outcome:
        start = time.monotonic()
        try:
            ok, detail = await self._run(task)
        except Exception as exc:  # a failing step is a failed task, reported with its message
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        if not ok and task.app in self.procs:
            self.restart(task.app)  # the next task starts from a fresh app, not from this one's wreck
        return Outcome(task, ok, detail, time.monotonic() - start)

    async def _run(self, task: Task) -> tuple[bool, str]:
        if task.app == "zenity":
            return await self._run_zenity(task)
        if task.app == "mousepad":
            return await self._run_mousepad(task)
        await self.ensure(task.app)
        for step in task.setup:
            await self.execute("desktop", {"observe": "none", **step})
        await asyncio.sleep(0.1)
        before = self.read(task.app)
        for step in task.steps:
            await self.execute("desktop", {"observe": "none", **step})
        deadline = time.monotonic() + 3
        while True:
            after = self.read(task.app)
            if task.check(before, after):
                return True, ""
            if time.monotonic() > deadline:
                return False, f"state after: {after}"
            await asyncio.sleep(0.05)

    async def _run_zenity(self, task: Task) -> tuple[bool, str]:
        proc = subprocess.Popen(
            ["zenity", *task.argv], env=self.session.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not await self._has("push button", None, "zenity"):
                await asyncio.sleep(0.05)  # poll interval of the condition
            for step in task.steps:
                await self.execute("desktop", {"observe": "none", "target_app": "zenity", **step})
            try:
                out, _ = await asyncio.to_thread(proc.communicate, timeout=5)
            except subprocess.TimeoutExpired:
                return False, "zenity did not close"
            state = {"stdout": out.decode().strip(), "code": proc.returncode}
            return task.check({}, state), f"zenity: {state}"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    async def _run_mousepad(self, task: Task) -> tuple[bool, str]:
        # A fresh editor on a fresh file per task; the state is what the file holds after the steps.
        document = self.scratch / f"note-{time.monotonic_ns()}.txt"
        document.write_text("")
        # Its own settings folders: a killed editor leaves a session to restore, which it asks about at start.
        home = self.scratch / f"home-{time.monotonic_ns()}"
        env = {f"XDG_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "DATA", "CACHE", "STATE")}
        proc = self.session.launch(["mousepad", str(document)], env=env)
        try:
            # Ready once the document and the menus are on the accessibility bus (the menus come later).
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if await self._has("text", None, "mousepad") and await self._has("menu item", "Save", "mousepad"):
                    break
                await asyncio.sleep(0.05)  # poll interval of the condition above
            for step in task.steps:
                await self.execute("desktop", {"observe": "none", "target_app": "mousepad", **step})
            state: dict[str, Any] = {}
            for _ in range(60):
                state = {"text": document.read_text()}
                if task.check({}, state):
                    return True, ""
                await asyncio.sleep(0.05)
            return False, f"mousepad file: {state}"
        finally:
            self.session.stop(proc)

    def close(self) -> None:
        for app in list(self.procs):
            self.restart(app)
