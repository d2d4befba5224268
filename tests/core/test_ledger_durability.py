"""Acknowledged means recorded: durable appends, and the chokepoint stopping while the ledger cannot record."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
