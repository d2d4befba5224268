"""The zygote run by a non-root user, spoken to over its own protocol (see aleph_exec._zygote).

Root is exempt from RLIMIT_NPROC, so the zygote's fallback for a uid that already has more processes
than a run may start is only reachable as another user. The tests run as root here, and the test
Python lives under /root, which other users cannot enter; the zygote needs the standard library
only, so it runs under Debian's /usr/bin/python3 as ``nobody``, from a copy of its file.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from aleph_exec._namespace import zygote_files

SYSTEM_PYTHON = "/usr/bin/python3"


def _nobody() -> int | None:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return None


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root, to run the zygote as another user"
    if _nobody() is None:
        return "no user 'nobody'"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"no {SYSTEM_PYTHON} (scripts/setup-system installs python3)"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


class Zygote:
    """A zygote started as ``nobody`` on the host, and the host's side of its protocol."""

    def __init__(self, directory: Path, uid: int) -> None:
        for source in zygote_files():  # the zygote and the modules it loads from beside it
            shutil.copyfile(source, directory / source.name)
            (directory / source.name).chmod(0o644)
        script = directory / "_zygote.py"
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [SYSTEM_PYTHON, "-I", "-S", str(script), str(theirs.fileno()), "{}", "host"],
            pass_fds=[theirs.fileno()],
            user=uid,
            group=uid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            stderr=subprocess.PIPE,
        )
        theirs.close()
        control.settimeout(10)
        try:
            assert "ready" in json.loads(control.recv(256) or b"{}")
        except (OSError, ValueError, AssertionError):
            control.close()
            self.proc.kill()
            pytest.fail(f"the zygote did not start as nobody: {self.proc.communicate()[1].decode(errors='replace')}")
        self.control, fresh = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        socket.send_fds(control, [b"control"], [fresh.fileno()])
        fresh.close()
        control.close()

    def run(self, argv: list[str], cwd: Path, nproc: int) -> tuple[dict[str, int], str]:
        """One run (a kit of its own, no stdin, no cgroup): its exit report and its stdout."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fields = ["run1", str(cwd), "", "30", "35", "256", "256", str(nproc), str(nproc), str(len(argv)), *argv]
        fields += ["PATH", "/usr/bin:/bin"]
        request = "\0".join(fields).encode()
        socket.send_fds(self.control, [b"go + -", b"\0", request], [theirs.fileno(), out_w, err_w])
        for end in (out_w, err_w):
            os.close(end)
        theirs.close()
        ours.settimeout(20)
        report = b""
        while not report.endswith(b"\n"):
            chunk = ours.recv(4096)
            assert chunk, "the zygote closed the run"
            report += chunk
        with os.fdopen(out_r, "rb") as out, os.fdopen(err_r, "rb") as err:
            stdout, stderr = out.read().decode(), err.read().decode()
        ours.close()
        message = json.loads(report)
        assert "error" not in message, (message, stderr)
        return message, stdout

    def close(self) -> None:
        """Close the control socket: the zygote ends its runs and exits."""
        self.control.close()
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def as_nobody() -> Iterator[tuple[Zygote, Path, int]]:
    uid = _nobody()
    assert uid is not None
    # Not under pytest's tmp_path: its parent is root's alone (0700), and nobody must reach the files.
    directory = Path(tempfile.mkdtemp(prefix="aleph-nonroot-"))
    try:
        directory.chmod(0o755)
        workspace = directory / "ws"
        workspace.mkdir()
        os.chown(workspace, uid, uid)
        zygote = Zygote(directory, uid)
        try:
            yield zygote, workspace, uid
        finally:
            zygote.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# Builtins only (a uid over its limit cannot fork). The loop lets the prlimit just after the start land.
SETTLE = "for ((i = 0; i < 30000; i++)); do :; done"


def test_a_run_as_a_user_under_its_process_limit_is_born_with_it(as_nobody: tuple[Zygote, Path, int]) -> None:
    zygote, workspace, _ = as_nobody
    # The soft limit is read first thing: the command was born with it. The hard one comes just after.
    report, stdout = zygote.run(["bash", "-c", f"echo $EUID; ulimit -S -u; {SETTLE}; ulimit -H -u"], workspace, 64)
    assert (report["exit"], stdout.split()) == (0, [str(_nobody()), "64", "64"])


def test_a_user_already_over_a_runs_process_limit_still_gets_the_run_with_its_limit(
    as_nobody: tuple[Zygote, Path, int],
) -> None:
    # RLIMIT_NPROC is checked at the zygote's own spawn against every process of the uid: with more
    # of them than the run's limit, that spawn fails, and the zygote spawns again under its own limit
    # and gives the command the run's by prlimit, a moment after it starts.
    zygote, workspace, uid = as_nobody
    sleepers = [subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[]) for _ in range(10)]
    try:
        report, stdout = zygote.run(["bash", "-c", f"{SETTLE}; ulimit -S -u; ulimit -H -u"], workspace, 8)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    assert (report["exit"], stdout.split()) == (0, ["8", "8"])
    # The next run, under its limit again, is born with it: the zygote's own limit was put back.
    report, stdout = zygote.run(["bash", "-c", f"ulimit -S -u; {SETTLE}; ulimit -H -u"], workspace, 64)
    assert (report["exit"], stdout.split()) == (0, ["64", "64"])
