"""``aleph serve --http`` processes started, driven and killed by the fault tests.

Each server is a real process on loopback; its stderr is drained by a thread (a full pipe would stall
it) that also notices the readiness line. Clients are the real MCP SDK ``Client``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

ALEPH = str(Path(sys.executable).parent / "aleph")
_READY = re.compile(r"serving MCP on (http://\S+/mcp)")

POLICY = """
[workspace]
data_dir = "{data}"

[policies.tool_permissions.overrides]
file_write = "allow"
remember = "allow"
"""


def write_config(workspace: Path, data_dir: Path, extra: str = "") -> None:
    """Every server shares one data directory and one workspace."""
    (workspace / "aleph.toml").write_text(POLICY.format(data=data_dir.as_posix()) + extra)


@dataclass
class Server:
    """One ``aleph serve --http --port 0`` process."""

    proc: subprocess.Popen[bytes]
    url: str = ""
    stderr: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def start(cls, workspace: Path) -> Server:
        proc = subprocess.Popen(
            [ALEPH, "serve", "--http", "--port", "0"],
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        server = cls(proc)
        threading.Thread(target=server._drain, daemon=True).start()
        return server

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.stderr.append(line)
                hit = _READY.search(line)
                if hit:
                    self.url = hit.group(1)
                    self.ready.set()
        self.ready.set()  # it exited: whoever waits must look at the exit status

    async def wait_ready(self, timeout: float = 60) -> str:
        await anyio.to_thread.run_sync(self.ready.wait, timeout)
        if not self.url:
            raise AssertionError(f"aleph serve did not start (exit {self.proc.poll()}): {self.stderr[-20:]}")
        return self.url

    def kill(self) -> None:
        """SIGKILL the whole process group: no handler, no atexit, no flush runs."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """An orderly stop (SIGTERM)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=30)


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def call(client: Client, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    """(acknowledged as a success, text) for one call."""
    result = await client.call_tool(name, args)
    return not result.is_error, text_of(result)
