"""Real servers for the channels tests: ngircd (Debian), an aiosmtpd mail server, and HTTP stand-ins.

Every server listens on loopback on a free port, is started by a fixture and stopped after the test.
Readiness is waited for (the port accepts, the server greets), never slept for.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need(program: str) -> str:
    """The path of ``program``; a missing one skips locally and fails under CI (scripts/setup-system installs it)."""
    path = shutil.which(program) or (f"/usr/sbin/{program}" if os.path.exists(f"/usr/sbin/{program}") else None)
    if path is None:
        message = f"{program} not installed (scripts/setup-system installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)  # poll interval while the server binds
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


class Ngircd:
    """A private ngircd on loopback, in its own folder."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        conf = folder / "ngircd.conf"
        motd = folder / "motd"
        motd.write_text("test\n")
        conf.write_text(
            f"""[Global]
Name = irc.test.invalid
Info = Aleph test server
Listen = 127.0.0.1
Ports = {self.port}
MotdFile = {motd}
PidFile = {folder}/ngircd.pid
ServerUID = nobody
ServerGID = nogroup
[Limits]
MaxNickLength = 30
# No flood penalties: they delay test clients by up to 2 s a message and distort the bench.
MaxPenaltyTime = 0
[Options]
DNS = no
Ident = no
PAM = no
"""
        )
        self.proc = subprocess.Popen(
            [need("ngircd"), "--nodaemon", "--config", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port, self.proc)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class IrcPerson:
    """A person on IRC: a raw client that sends PRIVMSGs and collects the ones it receives."""

    def __init__(self, nick: str) -> None:
        self.nick = nick
        self.inbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None

    async def connect(self, port: int) -> IrcPerson:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        self._writer = writer
        welcomed = asyncio.Event()
        self._send(f"NICK {self.nick}")
        self._send(f"USER {self.nick} 0 * :{self.nick}")

        async def read() -> None:
            while line := await reader.readline():
                text = line.decode(errors="replace").rstrip("\r\n")
                parts = text.split(" ")
                if parts[0] == "PING":
                    self._send("PONG " + " ".join(parts[1:]))
                elif len(parts) > 1 and parts[1] == "001":
                    welcomed.set()
                elif len(parts) > 3 and parts[1] == "PRIVMSG":
                    body = text.split(" :", 1)[1] if " :" in text else ""
                    await self.inbox.put((parts[2], body))

        self._reader_task = asyncio.get_running_loop().create_task(read())
        await asyncio.wait_for(welcomed.wait(), 20)
        return self

    def _send(self, line: str) -> None:
        assert self._writer is not None
        self._writer.write((line + "\r\n").encode())

    def say(self, target: str, text: str) -> None:
        self._send(f"PRIVMSG {target} :{text}")

    def join(self, room: str) -> None:
        self._send(f"JOIN {room}")

    async def heard(self, timeout: float = 20) -> str:
        """The next message text this person received."""
        _target, body = await asyncio.wait_for(self.inbox.get(), timeout)
        return body

    async def close(self) -> None:
        if self._writer is not None:
            self._send("QUIT :bye")
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()


@dataclass
class Recorded:
    """What an HTTP stand-in received."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)


def http_server(
    handle: Callable[[BaseHTTPRequestHandler, bytes], tuple[int, Any]],
) -> tuple[str, Recorded, Callable[[], None]]:
    """A threaded HTTP server on loopback: ``handle(request, body) -> (status, json)``; (base URL, log, stop)."""
    recorded = Recorded()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            recorded.requests.append(
                {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
            )
            status, payload = handle(self, body)
            data = json.dumps(payload).encode() if payload is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            recorded.arrived.set()

        do_GET = do_POST = _serve

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", recorded, stop
