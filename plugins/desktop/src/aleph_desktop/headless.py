"""A private desktop session: an Xvfb display, a D-Bus session bus and the AT-SPI accessibility bus.

Agents that run on servers have no desktop of their own; tests and benchmarks need one that nothing
else touches. :class:`HeadlessSession` starts the three servers as child processes (each in its own
process group), waits until each answers, and stops them all on :meth:`close`::

    with HeadlessSession(width=1280, height=800) as session:
        app = session.launch(["gtk3-widget-factory"])
        ...   # session.env has DISPLAY and DBUS_SESSION_BUS_ADDRESS for the tools and the apps

Nothing here is needed on a real desktop, where the display and the buses already run.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["HeadlessSession", "SessionError"]

_BUS_LAUNCHER_PATHS = ("/usr/libexec/at-spi-bus-launcher", "/usr/lib/at-spi2-core/at-spi-bus-launcher")


class SessionError(RuntimeError):
    """A server of the session could not be started; the message says which and what to install."""


def _which(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise SessionError(f"{program} not available: install the Debian package {package}")
    return path


def _bus_launcher() -> str:
    for path in _BUS_LAUNCHER_PATHS:
        if os.access(path, os.X_OK):
            return path
    raise SessionError("at-spi-bus-launcher not available: install the Debian package at-spi2-core")


def _free_display() -> int:
    # A display number is taken when its lock file or socket exists; Xvfb itself refuses a taken one.
    for number in range(90 + os.getpid() % 400, 1000):
        if not Path(f"/tmp/.X{number}-lock").exists() and not Path(f"/tmp/.X11-unix/X{number}").exists():
            return number
    raise SessionError("no free X display number between 90 and 999")


class HeadlessSession:
    """Xvfb + a session bus + the accessibility bus, private to this process; a context manager."""

    def __init__(self, width: int = 1280, height: int = 800, *, accessibility: bool = True, timeout: float = 10.0):
        if not (16 <= width <= 8192 and 16 <= height <= 8192):
            raise ValueError(f"screen size {width}x{height} is outside 16..8192")
        self.width = width
        self.height = height
        self.accessibility = accessibility
        self.timeout = timeout
        self.display = ""
        self.bus_address = ""
        self._procs: list[subprocess.Popen[bytes]] = []
        self._dir = Path(tempfile.mkdtemp(prefix="aleph-desktop-"))
        self.env: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> HeadlessSession:
        """Start the display, then the buses; raises :class:`SessionError` naming what failed."""
        try:
            self._start_display()
            self._start_buses()
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> HeadlessSession:
        return self.start()

    def __exit__(self, *exc: object | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop every process this session started (apps first, the display last) and remove its files."""
        for proc in reversed(self._procs):
            self._stop(proc)
        self._procs.clear()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- servers -----------------------------------------------------------------------------

    def _spawn(self, argv: Sequence[str], env: Mapping[str, str], log: str) -> subprocess.Popen[bytes]:
        with open(self._dir / log, "wb") as out:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: close() stops it and its children together
                cwd=self._dir,
            )
        self._procs.append(proc)
        return proc

    def _log(self, name: str) -> str:
        try:
            return (self._dir / name).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _start_display(self) -> None:
        xvfb = _which("Xvfb", "xvfb")
        for _attempt in range(5):
            number = _free_display()
            ready_r, ready_w = os.pipe()
            # -displayfd makes Xvfb write its display number once it accepts connections.
            argv = [xvfb, f":{number}", "-screen", "0", f"{self.width}x{self.height}x24", "-nolisten", "tcp"]
            argv += ["-displayfd", str(ready_w), "-noreset"]
            with open(self._dir / "xvfb.log", "wb") as out:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(ready_w,),
                    start_new_session=True,
                )
            os.close(ready_w)
            self._procs.append(proc)
            answer = self._read_line(ready_r)
            os.close(ready_r)
            if answer.strip().isdigit():
                self.display = f":{answer.strip()}"
                self.env = {**os.environ, "DISPLAY": self.display}
                return
            self._stop(proc)
            self._procs.remove(proc)
        raise SessionError(f"Xvfb did not start: {self._log('xvfb.log')}")

    def _read_line(self, fd: int) -> str:
        deadline = time.monotonic() + self.timeout
        data = b""
        while time.monotonic() < deadline and not data.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace")

    def _start_buses(self) -> None:
        daemon = _which("dbus-daemon", "dbus")
        ready_r, ready_w = os.pipe()
        with open(self._dir / "dbus.log", "wb") as out:
            proc = subprocess.Popen(
                [daemon, "--session", "--nofork", "--nopidfile", f"--print-address={ready_w}"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(ready_w,),
                start_new_session=True,
                env=self.env,
            )
        os.close(ready_w)
        self._procs.append(proc)
        address = self._read_line(ready_r).strip()
        os.close(ready_r)
        if not address:
            raise SessionError(f"dbus-daemon did not start: {self._log('dbus.log')}")
        self.bus_address = address
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address
        self.env.pop("NO_AT_BRIDGE", None)  # GTK leaves its accessibility bridge off while this is set
        self.env.setdefault("XDG_RUNTIME_DIR", str(self._dir))
        if self.accessibility:
            self._spawn([_bus_launcher(), "--launch-immediately"], self.env, "atspi.log")
            self._wait_for_a11y_bus()

    def _wait_for_a11y_bus(self) -> None:
        # The launcher owns org.a11y.Bus on the session bus once the accessibility bus runs.
        send = shutil.which("dbus-send")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if send is None:
                time.sleep(0.3)
                return
            probe = subprocess.run(
                [send, "--session", "--print-reply", "--dest=org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress"],
                env=self.env,
                capture_output=True,
                timeout=self.timeout,
            )
            if probe.returncode == 0 and b"unix:" in probe.stdout:
                return
            time.sleep(0.05)
        raise SessionError(f"the accessibility bus did not start: {self._log('atspi.log')}")

    # -- applications ------------------------------------------------------------------------

    def launch(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start an application on this display and bus; it is stopped with the session (or with :meth:`stop`)."""
        if not self.display:
            raise SessionError("the session is not started")
        merged = {**self.env, **(env or {})}
        name = Path(argv[0]).name
        return self._spawn(argv, merged, f"app-{name}-{len(self._procs)}.log")

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Stop an application started with :meth:`launch` (its whole process group)."""
        self._stop(proc)
        with contextlib.suppress(ValueError):
            self._procs.remove(proc)

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=3)
        else:
            # The leader is gone; members of its group (a bus launcher's daemon) may still run.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
