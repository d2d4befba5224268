"""Acknowledged means recorded: durable appends, and the chokepoint stopping while the ledger cannot record."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import anyio
import pytest

import aleph
from aleph import Ledger, LedgerRecord, ToolRegistry
from aleph._chokepoint._permissions import PermissionLayer, PermissionPolicy
from aleph._chokepoint._scoped import Chokepoint, ScopedToolService

pytestmark = pytest.mark.anyio


def record(i: int, agent: str = "main") -> LedgerRecord:
    return LedgerRecord(agent, "tool_call", "file_write", "ok", f"file_write: path=f{i}.txt")


async def test_a_durable_append_returns_only_once_its_row_is_on_disk(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    try:
        results = await asyncio.gather(*(ledger.append(record(i), durable=True) for i in range(200)))
        assert [None] * 200 == results
        on_disk = [r.detail for r in ledger.rows("main")]  # read from the file, no flush in between
        assert {f"file_write: path=f{i}.txt" for i in range(200)} <= set(on_disk)
        assert ledger.verify("main").ok
    finally:
        await ledger.aclose()


async def test_a_durable_append_says_why_its_row_was_not_stored_and_the_ledger_recovers(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    try:
        assert await ledger.append(record(0), durable=True) is None
        chain = ledger._chain_paths("other")[0]
        chain.mkdir()  # the chain file cannot be opened: the write of "other"'s row fails
        why = await ledger.append(record(1, "other"), durable=True)
        assert why is not None and "Is a directory" in why and str(chain) in why
        assert ledger.failure == why
        assert "Is a directory" in (await ledger.ready("other") or "")  # checked again, still failing
        chain.rmdir()
        assert await ledger.ready("other") is None and ledger.failure is None
        assert await ledger.append(record(2, "other"), durable=True) is None
        assert await ledger.append(record(3), durable=True) is None
    finally:
        await ledger.aclose()


async def test_a_closed_ledger_answers_a_durable_append_with_the_reason(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    await ledger.aclose()
    assert "the ledger is closed" == await ledger.append(record(0), durable=True)


def registry(ran: list[str]) -> ToolRegistry:
    reg = ToolRegistry()

    @aleph.tool(name="change", description="Changes something.", inline=True)
    def change() -> str:
        ran.append("change")
        return "changed"

    @aleph.tool(name="look", description="Reads something.", inline=True, idempotent=True)
    def look() -> str:
        ran.append("look")
        return "seen"

    reg.register(change)
    reg.register(look)
    return reg


async def test_while_the_ledger_cannot_record_mutating_calls_stop_before_running_and_reads_go_on(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    ledger = Ledger(tmp_path / "ledger")
    reg = registry(ran)
    policy = PermissionPolicy([PermissionLayer.from_config("global", {"default": "allow"})])
    svc = ScopedToolService(Chokepoint(reg, ledger=ledger), policy=policy, agent="main")
    try:
        assert (await svc.call("change", {})).success
        ledger._chains.clear()  # as a new process: the chain is opened again on the next write
        chain = ledger._chain_paths("main")[0]
        chain.rename(chain.with_suffix(".moved"))
        chain.mkdir()
        broken = await svc.call("change", {})  # it runs, then its row cannot be written
        assert not broken.success and "it ran and its effect is real" in (broken.error or "")
        refused = await svc.call("change", {})
        assert not refused.success and "not run: the audit ledger cannot record it" in (refused.error or "")
        assert "Is a directory" in (refused.error or "") and "panicked" not in (refused.error or "")
        read = await svc.call("look", {})
        assert read.success and read.output == "seen"
        assert ["change", "change", "look"] == ran  # the refused call never ran
        chain.rmdir()
        chain.with_suffix(".moved").rename(chain)
        assert (await svc.call("change", {})).success  # recovered without a restart
        assert ["change", "change", "look", "change"] == ran
    finally:
        await ledger.aclose()


async def test_by_default_a_durable_append_returns_once_written_before_any_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sync = "write": the row is in the page cache (it outlives a kill -9) when the call is answered; the
    # fsync for power loss comes after, off the caller's path. A stalled disk flush must not hold the answer.
    release = threading.Event()
    real_fsync = os.fsync

    def stalled_fsync(fd: int) -> None:
        release.wait(30)
        real_fsync(fd)

    ledger = Ledger(tmp_path / "ledger")
    await ledger.append(record(-1))  # the key is made (and fsync'd) before the disk stalls
    monkeypatch.setattr(os, "fsync", stalled_fsync)
    try:
        with anyio.fail_after(10):
            assert [None] * 20 == await asyncio.gather(*(ledger.append(record(i), durable=True) for i in range(20)))
        assert {f"file_write: path=f{i}.txt" for i in range(20)} <= {r.detail for r in ledger.rows("main")}
    finally:
        release.set()
        await ledger.aclose()
    assert ledger.verify("main").ok


async def test_with_sync_fsync_a_durable_append_returns_only_after_the_fsync_that_covers_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []  # the chain file's size at each fsync of it
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        size = os.fstat(fd).st_size
        real_fsync(fd)
        synced.append(size)

    ledger = Ledger(tmp_path / "ledger", sync="fsync")
    path = ledger._chain_paths("main")[0]
    await ledger.append(record(-1))
    monkeypatch.setattr(os, "fsync", recording_fsync)
    try:
        for i in range(5):
            assert await ledger.append(record(i), durable=True) is None
            assert synced and max(synced) >= path.stat().st_size  # this row included
        results = await asyncio.gather(*(ledger.append(record(i), durable=True) for i in range(50)))
        assert [None] * 50 == results
        assert max(synced) >= path.stat().st_size
    finally:
        await ledger.aclose()


def test_sync_must_be_write_or_fsync(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sync must be 'write' or 'fsync'"):
        Ledger(tmp_path, sync="sometimes")  # type: ignore[arg-type]
