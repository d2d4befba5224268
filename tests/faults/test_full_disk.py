"""A data directory on a full filesystem: mutating calls stop with the cause named, reads go on, nothing
acknowledged goes unrecorded, and everything resumes once there is room again.

The data directory is a small tmpfs mounted by the test (root is needed; under CI it must be there).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import aleph

from ._servers import ALEPH, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs: the data directory lives on it, the workspace does not."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the full-disk test mounts a tmpfs and needs root")
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(directory: Path) -> Path:
    """Fill the filesystem holding ``directory`` to the last byte; returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                os.write(fd, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                chunk //= 2
    finally:
        os.close(fd)
    return filler


async def test_a_full_data_directory_stops_mutating_calls_with_the_cause_and_loses_no_acknowledged_row(
    small_fs: Path, workspace: Path
) -> None:
    data = small_fs / "data"
    write_config(workspace, data)
    async with aleph.load(workspace / "aleph.toml", workspace=workspace) as rt:
        svc = rt.tool_service()
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        acked, refused = [], []
        assert (await svc.call("file_write", {"path": "before.txt", "content": "room"})).success
        acked.append("before.txt")
        filler = fill(small_fs)
        for i in range(60):
            result = await svc.call("file_write", {"path": f"full/{i}.txt", "content": f"w{i}", "create_dirs": True})
            (acked if result.success else refused).append((f"full/{i}.txt", result.error or ""))
        # Rows still fit in the chain file's last page for a few calls; the call whose row first meets the
        # full disk is recorded through the reserve; from then on mutating calls stop before they run.
        assert len(refused) >= 50
        first_refused = min(int(p.split("/")[1].split(".")[0]) for p, _ in refused)
        assert [f"full/{i}.txt" for i in range(first_refused)] == [p for p, _ in acked[1:]]
        for path, error in refused:
            assert "not run: the audit ledger cannot record it: the disk holding the ledger is full" in error
            assert "panicked" not in error
            assert not (workspace / path).exists()  # refused before it ran: nothing happened
        doctor = subprocess.run([ALEPH, "doctor", "--json"], cwd=workspace, capture_output=True, text=True)
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert "fail" == checks["core.ledger"]["status"] and 1 == doctor.returncode
        assert "the ledger cannot record: the disk holding the ledger is full" in checks["core.ledger"]["detail"]
        assert "mutating calls are refused" in checks["core.ledger"]["detail"]
        read = await svc.call("file_read", {"path": "before.txt"})
        assert read.success and "room" in str(read.output)  # reads go on
        remembered = await svc.call("remember", {"action": "add", "content": "The build runs on 4 workers"})
        assert not remembered.success and "the audit ledger cannot record it" in (remembered.error or "")
        ledger.on_failure = "continue"  # availability chosen: the call reaches memory's own full database
        for i in range(200):  # pages SQLite already holds take a few facts; then its database is full
            fact = f"Project {i} builds on {i % 5 + 2} workers; " + " ".join(f"note{i}-{j}" for j in range(4000))
            remembered = await svc.call("remember", {"action": "add", "content": fact})
            if not remembered.success:
                break
        assert not remembered.success and "panicked" not in (remembered.error or "")
        assert "the data directory is full" in (remembered.error or ""), remembered.error
        ledger.on_failure = "refuse"
        filler.unlink()  # room again: the next call makes the reserve and runs
        resumed = await svc.call("file_write", {"path": "after.txt", "content": "back"})
        assert resumed.success, resumed.error
        acked.append(("after.txt", ""))
        await ledger.flush()
        details = [r.detail for r in ledger.rows("default") if r.action == "tool_call" and r.target == "file_write"]
        for item in acked:
            path = item if isinstance(item, str) else item[0]
            assert any(f"path={path}" in d for d in details), f"{path} was acknowledged but is not in the ledger"
        assert ledger.verify("default").ok, ledger.verify("default")
