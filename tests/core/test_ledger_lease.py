"""Several processes append to one chain while each keeps the chain's lock across its rows when alone (the lease).

A writer that finds the chain locked asks the holder for it through ``<chain>.lease``; the holder lets go after
its next row, and at every pass of its committer. Rows of real processes interleave, none is lost, the chain
verifies; an idle holder's lock comes free without anyone asking.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aleph._ledger import Ledger
from aleph._ledger._lease import CONTENDED, PyLease

WRITER = """
import faulthandler
import sys
faulthandler.dump_traceback_later(90, exit=True)  # a writer that hangs shows where
from pathlib import Path
from aleph._ledger import Ledger, LedgerRecord

directory, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
agents = sys.argv[4].split(",")
ledger = Ledger(directory)
for agent in agents:
    ledger.write_row(agent, "tool_call", "warm", "ok", f"{name} warm")  # chain open, key loaded
print("ready", flush=True)
sys.stdin.readline()  # go
lost = 0
for i in range(count):
    agent = agents[i % len(agents)]
    if i % 500 == 7:  # now and then the full path too (a record, as refusals and approvals are written)
        ledger.append_nowait(LedgerRecord(agent, "tool_denied", "t", "denied", f"{name} {i}"))
    elif ledger.write_row(agent, "tool_call", "w", "ok", f"{name} {i}", "f" * 32, "{}") is not None:
        lost += 1
ledger.close()
print("lost", lost, flush=True)
"""


def _run_writers(directory: Path, count: int, agents: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(directory), name, str(count), agents],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("p0", "p1")
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        assert out.strip() == "lost 0"


def test_two_processes_appending_under_load_interleave_and_lose_no_row(tmp_path: Path) -> None:
    count = 20_000
    _run_writers(tmp_path, count, "main")
    report = Ledger(tmp_path).verify("main")
    assert report.ok and report.unsigned_tail == 0, report
    rows = Ledger(tmp_path).rows("main")
    assert len(rows) == 1 + 2 * (count + 1) == report.rows
    writers = [row.detail.split()[0] for row in rows[1:]]
    for name in ("p0", "p1"):
        mine = [row.detail for row in rows[1:] if row.detail.startswith(f"{name} ") and "warm" not in row.detail]
        assert mine == [f"{name} {i}" for i in range(count)]  # every row, in its writer's order
    switches = sum(1 for a, b in itertools.pairwise(writers) if a != b)
    assert switches >= 2  # the two took turns: a waiting writer got the chain while the other was writing
    counter = next(tmp_path.glob("chains/*.lease"))
    assert int.from_bytes(counter.read_bytes()[:8], sys.byteorder) >= 1  # and they asked for it


def test_two_processes_writing_two_chains_in_turn_never_wait_on_each_other_forever(tmp_path: Path) -> None:
    """Each may hold one chain's lease while it waits for the other's: it gives its leases up before waiting."""
    _run_writers(tmp_path, 6000, "alpha,beta")  # communicate() times out (fails) on a deadlock
    for agent in ("alpha", "beta"):
        report = Ledger(tmp_path).verify(agent)
        assert report.ok and report.rows == 1 + 2 * (3000 + 1), report


def test_an_idle_holder_gives_the_lock_up_without_being_asked(tmp_path: Path) -> None:
    first = Ledger(tmp_path)
    try:
        assert first.write_row("main", "tool_call", "w", "ok", "one") is None
        chain = next(p for p in (tmp_path / "chains").glob("*.jsonl") if not p.name.endswith(".ckpt.jsonl"))
        fd = os.open(chain, os.O_RDONLY)
        try:
            # Only this check waits: the committer's next pass (within SEAL_INTERVAL) lets go of the lock.
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        second = Ledger(tmp_path)
        try:
            assert second.write_row("main", "tool_call", "w", "ok", "two") is None
        finally:
            second.close()
        assert first.write_row("main", "tool_call", "w", "ok", "three") is None  # reads the other's row first
    finally:
        first.close()
    rows = Ledger(tmp_path).rows("main")
    assert [r.detail for r in rows[1:]] == ["one", "two", "three"]
    assert Ledger(tmp_path).verify("main").ok


def test_a_waiter_in_the_same_process_is_not_kept_waiting_by_the_lease(tmp_path: Path) -> None:
    """Two ledgers of one process on one chain (two open files): each takes its turn, nothing deadlocks."""
    a, b = Ledger(tmp_path), Ledger(tmp_path)
    errors: list[str | None] = []

    def write(ledger: Ledger, name: str) -> None:
        for i in range(2000):
            errors.append(ledger.write_row("main", "tool_call", "w", "ok", f"{name} {i}"))

    try:
        threads = [threading.Thread(target=write, args=(ledger, name)) for ledger, name in ((a, "a"), (b, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()
    finally:
        a.close()
        b.close()
    assert errors == [None] * 4000
    report = Ledger(tmp_path).verify("main")
    assert report.ok and report.rows == 4001


@pytest.mark.parametrize("held_elsewhere", [True, False])
def test_the_python_lease_takes_a_free_lock_and_reports_a_held_one(tmp_path: Path, held_elsewhere: bool) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    other = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        if held_elsewhere:
            fcntl.flock(other, fcntl.LOCK_EX)
        lease = PyLease(fd, bytearray(8))
        lease.bind("main", "fp", _Key())
        seq = lease.append("tool_call", "t", "ok", "d", None, None, None, None)
        if held_elsewhere:
            assert seq == CONTENDED and not lease.held and path.read_bytes() == b""
        else:
            assert seq == 1 and lease.held and path.stat().st_size == lease.size and lease.head is not None
            # Held: no lseek, nobody else could have appended; the next row chains on the first.
            assert lease.append("tool_call", "t", "ok", "d", None, None, None, None) == 2
            assert path.stat().st_size == lease.size
            lease.release()
    finally:
        os.close(fd)
        os.close(other)


class _Key:
    def mark(self, digest: bytes) -> str:
        return digest[:16].hex()
