"""`aleph tools call` asks on a real terminal (a pty, the controlling one) and refuses when nobody can be asked."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ASK_CONFIG = '[policies.tool_permissions.overrides]\ntext_stats = "ask"\n'
CALL = ["tools", "call", "text_stats", "--input", '{"text": "a b"}']


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "ALEPH_STRICT_PLUGINS"}


def _controlling_tty() -> None:
    # The child is a session leader (start_new_session); make the pty its controlling terminal so that
    # Ctrl-C typed on it sends SIGINT, as in a real shell.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """One `aleph` process on a pty: stdin and stderr on the terminal, stdout on a pipe."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aleph", *args],
            cwd=cwd,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=_env(),
            start_new_session=True,
            preexec_fn=_controlling_tty,
        )
        os.close(slave)
        self.seen = b""

    def expect(self, text: str, timeout: float = 60) -> None:
        """Read the terminal until ``text`` appeared (bounded)."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            assert time.monotonic() < deadline, f"{text!r} never appeared; the terminal shows: {self.text!r}"
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096)
                except OSError:
                    break

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Wait for the exit (bounded: a hang fails the test) and return (code, stdout)."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"aleph did not exit; the terminal shows: {self.text!r}") from None
        finally:
            self._drain()
            os.close(self.master)
        return self.proc.returncode, out.decode()

    def _drain(self) -> None:
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                return
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.seen += chunk

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace")


@pytest.fixture
def asking(workspace: Path) -> Path:
    (workspace / "aleph.toml").write_text(ASK_CONFIG)
    return workspace


def test_yes_once_runs_the_call(asking: Path) -> None:
    term = Terminal(CALL, asking)
    term.expect("[y] yes, once / [s] yes, for this session / [a] yes, always / [n] no")
    assert "Approval needed: text_stats: text=a b" in term.text
    term.type(b"y\n")
    code, out = term.finish()
    assert 0 == code, term.text
    assert 2 == json.loads(out)["words"]


def test_an_invalid_answer_asks_again(asking: Path) -> None:
    term = Terminal(CALL, asking)
    term.expect("[n] no: ")
    term.type(b"maybe\n")
    term.expect("please answer one of: y, s, a, n")
    term.type(b"yes\n")
    code, out = term.finish()
    assert 0 == code, term.text
    assert 2 == json.loads(out)["words"]


def test_no_with_a_reason_is_a_denial_in_words_for_the_person(asking: Path) -> None:
    term = Terminal(CALL, asking)
    term.expect("[n] no: ")
    term.type(b"n\n")
    term.expect("why not?")
    term.type(b"too early\n")
    code, out = term.finish()
    assert 3 == code, term.text
    assert "" == out
    assert 'not run: you declined `text_stats` ("too early")' in term.text
    # The model-facing advice is for models; the person at the terminal is the user.
    assert "Do not retry" not in term.text and "Ask the user" not in term.text


def test_ctrl_c_at_the_prompt_cancels_the_call_at_once(asking: Path) -> None:
    # Before, the prompt read stdin in a worker thread and Ctrl-C hung until Enter was pressed.
    term = Terminal(CALL, asking)
    term.expect("[n] no: ")
    term.type(b"\x03")
    code, out = term.finish(timeout=20)
    assert 130 == code, term.text
    assert "" == out
    assert "interrupted" in term.text and "Traceback" not in term.text


def test_always_is_listed_and_revocable(asking: Path) -> None:
    term = Terminal(CALL, asking)
    term.expect("[n] no: ")
    term.type(b"a\n")
    assert 0 == term.finish()[0], term.text

    listed = aleph("approvals", "list", "--json", cwd=asking)
    assert 0 == listed.returncode, listed.stderr
    grants = json.loads(listed.stdout)
    assert ["text_stats"] == [g["tool"] for g in grants]
    assert grants[0]["summary"].startswith("text_stats: text=a b")

    # The standing grant covers the same call where nobody could be asked...
    assert 0 == aleph(*CALL, cwd=asking).returncode
    revoked = aleph("approvals", "revoke", grants[0]["fingerprint"][:8], cwd=asking)
    assert 0 == revoked.returncode, revoked.stderr
    assert "revoked 1 standing approval(s)" in revoked.stdout
    # ...and once revoked, no longer.
    assert 3 == aleph(*CALL, cwd=asking).returncode
    assert "no standing approvals" in aleph("approvals", "list", cwd=asking).stdout


def test_revoke_refuses_what_it_cannot_match(asking: Path) -> None:
    out = aleph("approvals", "revoke", "zz", cwd=asking)
    assert 2 == out.returncode and "not a fingerprint" in out.stderr
    out = aleph("approvals", "revoke", "abcd", cwd=asking)
    assert 1 == out.returncode and "matches no standing approval" in out.stderr
    out = aleph("approvals", "revoke", cwd=asking)
    assert 2 == out.returncode


def aleph(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aleph", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )


def test_without_a_terminal_nobody_is_asked_and_the_call_is_refused(asking: Path) -> None:
    out = aleph(*CALL, cwd=asking)
    assert 3 == out.returncode
    assert "not run: `text_stats` needs approval and nobody could be asked (stdin is not a terminal)" in out.stderr
    assert "Do not retry" not in out.stderr


def test_policy_explain_json_names_rule_and_layer(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(ASK_CONFIG + '[agents.ana.tool_permissions.overrides]\n"text_*" = "deny"\n')
    out = aleph("policy", "explain", "text_stats", "--agent", "ana", "--json", cwd=workspace)
    result = json.loads(out.stdout)
    assert (result["decision"], result["rule"], result["layer"]) == ("deny", "text_*", "agent:ana")
    assert "Do not retry" in result["reason"]  # --json is for programs and models: the full reason


def test_a_policy_denial_names_the_rule_for_the_person(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\n"text_*" = "deny"\n')
    out = aleph(*CALL, cwd=workspace)
    assert 3 == out.returncode
    assert "refused: `text_stats` is denied by the rule `text_*` in the global layer" in out.stderr


def test_a_long_call_shows_its_progress_on_the_terminal(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "full"\n')
    loop = "for i in 1 2 3; do echo line$i; sleep 0.7; done"
    term = Terminal(["tools", "call", "bash", "--input", json.dumps({"command": loop})], workspace)
    term.expect("… bash")  # the indicator: the tool, seconds so far, its latest line
    term.expect("line2")
    code, out = term.finish()
    assert 0 == code, term.text
    assert "line1\nline2\nline3\n" == json.loads(out)["stdout"]
    assert term.text.rstrip().endswith("\x1b[2K")  # the indicator cleared itself at the end
