"""ask_user on the terminal: `aleph tools call` under a real pseudo-terminal, answered by typing."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path


def read_until(fd: int, marker: bytes, timeout: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{marker!r} never appeared; the terminal showed {seen!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            seen += os.read(fd, 4096)
    return seen


def test_ask_user_asks_on_the_terminal_the_command_runs_in(workspace: Path) -> None:
    aleph_cmd = shutil.which("aleph") or str(Path(sys.executable).parent / "aleph")
    primary, secondary = os.openpty()
    payload = {"question": "Which colour?", "choices": ["red", "blue"]}
    proc = subprocess.Popen(
        [aleph_cmd, "tools", "call", "ask_user", "--input", json.dumps(payload)],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        cwd=workspace,
    )
    os.close(secondary)
    try:
        shown = read_until(primary, b"> ")
        assert b"The agent asks: Which colour?" in shown and b"2. blue" in shown
        os.write(primary, b"2\n")
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
        os.close(primary)
    assert proc.returncode == 0, out
    answer = json.loads(out)
    assert answer["answer"] == "blue" and answer["channel"] == "terminal"


def test_without_a_terminal_or_channel_ask_user_says_nobody_can_be_reached(workspace: Path) -> None:
    aleph_cmd = shutil.which("aleph") or str(Path(sys.executable).parent / "aleph")
    done = subprocess.run(
        [aleph_cmd, "tools", "call", "ask_user", "--input", '{"question": "hello?"}'],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=workspace,
        timeout=60,
    )
    assert done.returncode != 0 and "no way to reach a person from here" in done.stderr
