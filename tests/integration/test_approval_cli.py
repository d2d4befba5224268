"""`aleph tools call` asks on a real terminal (a pty) and refuses when nobody can be asked."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

ASK_CONFIG = '[policies.tool_permissions.overrides]\ntext_stats = "ask"\n'


def run_on_pty(args: list[str], cwd: Path, answer: bytes) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aleph", *args], cwd=cwd, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while b"Approval needed" not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
    os.write(master, answer)
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    return proc.returncode, seen.decode(errors="replace") + out.decode()


@pytest.mark.parametrize(("answer", "code"), [(b"y\n", 0), (b"n\n", 1)])
def test_terminal_prompt_decides_the_call(workspace: Path, answer: bytes, code: int) -> None:
    (workspace / "aleph.toml").write_text(ASK_CONFIG)
    rc, text = run_on_pty(["tools", "call", "text_stats", "--input", '{"text": "a b"}'], workspace, answer)
    assert "Approval needed: text_stats: text=a b" in text
    assert "[y] yes, once / [s] yes, for this session / [a] yes, always / [n] no" in text
    assert rc == code


def test_without_a_terminal_nobody_is_asked_and_the_call_is_refused(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(ASK_CONFIG)
    env = {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}
    out = subprocess.run(
        [sys.executable, "-m", "aleph", "tools", "call", "text_stats", "--input", '{"text": "x"}'],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 1
    assert "nobody was asked" in out.stderr and "stdin is not a terminal" in out.stderr


def test_policy_explain_json_names_rule_and_layer(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(ASK_CONFIG + '[agents.ana.tool_permissions.overrides]\n"text_*" = "deny"\n')
    env = {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}
    out = subprocess.run(
        [sys.executable, "-m", "aleph", "policy", "explain", "text_stats", "--agent", "ana", "--json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    import json

    result = json.loads(out.stdout)
    assert (result["decision"], result["rule"], result["layer"]) == ("deny", "text_*", "agent:ana")
    assert "Do not retry" in result["reason"]
