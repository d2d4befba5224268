"""A separate, sandboxed process that tells what an installed, not yet approved plugin adds.

Finding a plugin's tools means importing its code, and that code has not been approved yet, so it
never runs inside the runtime: this process imports it instead, in a scratch plugin manager with an
empty temporary workspace and home. Where bubblewrap is installed the process sees the whole file
system read-only, has no network and one writable scratch folder, so import-time code can neither
change nor send anything; without bubblewrap it is an ordinary child process, and the disclosure
says so. A plugin that lies about itself here gains nothing: the runtime recomputes what it adds
when it loads it, and a digest other than the approved one holds it back.

The process is started when an install begins (importing Aleph takes most of a second, which then
overlaps with pip's own run) and answers one JSON request per line on stdin,
``{"distribution": ..., "path": ...}``, with ``<nonce> {"adds": {...}}`` or ``<nonce> {"error": ...}``
on stdout; lines without the nonce (a plugin's own prints) are ignored.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["Inspector"]

_MAX_REPLY = 16 * 1024 * 1024


def _serve() -> int:
    nonce = os.environ.pop("ALEPH_INSPECT_NONCE", "")
    import aleph

    with tempfile.TemporaryDirectory(prefix="aleph-inspect-") as tmp:
        workspace = Path(tmp)
        (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(workspace / "data").as_posix()}"\n')
        config = aleph.load_config(workspace / "aleph.toml", workspace=workspace)
        print(nonce, json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            try:
                request = json.loads(line)
                path = Path(request["path"]) if request.get("path") else None
                reply: dict[str, Any] = {"adds": aleph.inspect_distribution(config, request["distribution"], path)}
            except Exception as exc:  # any failure of foreign code is reported, not fatal to the caller
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            print(nonce, json.dumps(reply, default=str), flush=True)
    return 0


class Inspector:
    """The caller's side: start early, ask once or more, close."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._home = tempfile.TemporaryDirectory(prefix="aleph-inspect-home-")
        self._nonce = secrets.token_hex(16).encode()
        self.sandbox = "bubblewrap (read-only file system, no network)" if shutil.which("bwrap") else ""
        """How the inspection is confined ("" when it is an ordinary child process)."""

    async def start(self) -> None:
        """Start the process (it imports Aleph while the caller goes on)."""
        home = self._home.name
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH") if k in os.environ}
        env.update(
            HOME=home,
            TMPDIR=home,
            PYTHONDONTWRITEBYTECODE="1",
            ALEPH_STRICT_PLUGINS="0",
            ALEPH_INSPECT_NONCE=self._nonce.decode(),
        )
        command = [sys.executable, "-m", "aleph_hub._inspector"]
        bwrap = shutil.which("bwrap")
        if bwrap:
            command = [
                bwrap,
                *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", home, home),
                *("--unshare-all", "--die-with-parent", "--new-session", "--chdir", home),
                *command,
            ]
        nice = shutil.which("nice")
        if nice:  # lower priority: on a busy machine pip, which the install waits for first, gets the CPU
            command = [nice, "-n", "10", *command]
        self._proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=self._home.name,
            env=env,
            limit=_MAX_REPLY,
        )

    async def adds(self, distribution: str, path: Path | None, timeout: float = 120.0) -> dict[str, Any]:
        """What ``distribution`` adds; RuntimeError with the plugin's own error when it cannot load."""
        if self._proc is None:
            await self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(
            (json.dumps({"distribution": distribution, "path": str(path) if path else None}) + "\n").encode()
        )
        await proc.stdin.drain()

        async def reply() -> dict[str, Any]:
            assert proc.stdout is not None
            while True:
                raw = await proc.stdout.readline()
                if not raw:
                    raise RuntimeError("the inspector process ended before answering (the plugin may have exited it)")
                nonce, _, body = raw.partition(b" ")
                if nonce != self._nonce:
                    continue  # the plugin printed something of its own on stdout
                try:
                    data = json.loads(body)
                except ValueError:
                    continue
                if isinstance(data, dict) and "ready" not in data:
                    return data

        answer = await asyncio.wait_for(reply(), timeout)
        if "error" in answer:
            raise RuntimeError(str(answer["error"]))
        adds = answer.get("adds")
        if not isinstance(adds, dict):
            raise RuntimeError("the inspector returned no description of the plugin")
        return adds

    async def aclose(self) -> None:
        """Stop the process and remove its temporary home."""
        proc, self._proc = self._proc, None
        if proc is not None:
            # It holds nothing worth a graceful exit, and tearing down an interpreter that imported
            # Aleph takes a noticeable fraction of a second: kill it (bubblewrap's --die-with-parent
            # takes the sandboxed child along) and reap it.
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
        self._home.cleanup()


if __name__ == "__main__":
    sys.exit(_serve())
