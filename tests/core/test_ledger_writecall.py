"""A call's row written in one native call (``Ledger.write_call``) is the row the full path writes.

The chokepoint's shortest entry builds the row summary, the argument fingerprint and the row together in
``_rowfast.c``. Both summary and fingerprint are stored (``detail``, ``args_fp``), so they must be exactly what
``summarize_call`` and ``grant_fingerprint`` say; and where the entry cannot write (arguments that are not a
flat object, a chain not open yet, another process holding the chain) it must write nothing, so that the
full path writes the row once.
"""

from __future__ import annotations

import fcntl
import os
import random
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph._chokepoint._callprint import PRINTER
from aleph._chokepoint._gate import grant_fingerprint, summarize_call
from aleph._chokepoint._permissions import PermissionPolicy
from aleph._chokepoint._scoped import Chokepoint, ScopedToolService
from aleph._ledger import Ledger
from aleph._ledger._speedups import native

PRINCIPAL = '{"agent":"main","role":null}'
KEEP = ("action", "target", "outcome", "detail", "args_fp", "principal", "result_fp", "rule", "refs")

_KEYS = ["path", "n", "api_key", "Token", "note", "ключ", "a b", "x\x1fy", "passwd_hint"]
_VALUES: list[Any] = ["", "plain", "two\n lines", "sk-0123456789abcdefghijklmn", "é—😀", "\u200bz", "y" * 400,
                      0, -1, 2**70, True, False, None]  # fmt: skip


def _needs_native() -> None:
    if native is None:
        pytest.skip("the native row builder is not loaded (ALEPH_NO_SPEEDUPS, or not built)")


def _fields(ledger_dir: Path) -> list[dict[str, Any]]:
    return [{k: getattr(row, k) for k in KEEP} for row in Ledger(ledger_dir).rows("main")[1:]]


def _open(ledger: Ledger) -> None:
    """Open the chain (its first row goes the full path), so the fast entries can write the next ones."""
    assert ledger.write_row("main", "tool_call", "opening", "ok", "opening", None, PRINCIPAL) is None


def test_write_call_stores_the_summary_and_fingerprint_of_the_full_functions(tmp_path: Path) -> None:
    _needs_native()
    rng = random.Random(34)
    fast, full = Ledger(tmp_path / "fast"), Ledger(tmp_path / "full")
    calls = 0
    try:
        _open(fast)
        _open(full)
        for _ in range(600):
            arguments = {rng.choice(_KEYS): rng.choice(_VALUES) for _ in range(rng.randint(0, 5))}
            tool = rng.choice(["file_write", "send", "n\u00e9t"])
            assert fast.write_call("main", tool, arguments, PRINCIPAL, PRINTER) is True, arguments
            summary, fingerprint = summarize_call(tool, arguments), grant_fingerprint(tool, arguments)
            assert full.write_row("main", "tool_call", tool, "ok", summary, fingerprint, PRINCIPAL) is None
            calls += 1
    finally:
        fast.close()
        full.close()
    written = _fields(tmp_path / "fast")
    assert len(written) == calls + 1
    assert written == _fields(tmp_path / "full")
    assert any("***" in row["detail"] for row in written) and any(row["detail"].endswith("…") for row in written)
    assert Ledger(tmp_path / "fast").verify("main").ok


@pytest.mark.parametrize(
    "arguments",
    [{"a": 1.5}, {"a": [1, 2]}, {"a": {"b": 1}}, {1: "x"}, {"a": "\ud800"}],
    ids=["float", "list", "object", "int-key", "lone-surrogate"],
)
def test_write_call_writes_nothing_for_arguments_it_does_not_print(tmp_path: Path, arguments: dict[Any, Any]) -> None:
    _needs_native()
    ledger = Ledger(tmp_path)
    try:
        _open(ledger)
        chain = ledger._chains["main"].path
        size = os.path.getsize(chain)
        assert ledger.write_call("main", "t", arguments, PRINCIPAL, PRINTER) is False
        assert os.path.getsize(chain) == size
    finally:
        ledger.close()
    assert len(Ledger(tmp_path).rows("main")) == 2


def test_write_call_leaves_a_chain_not_open_and_one_held_elsewhere_to_the_full_path(tmp_path: Path) -> None:
    _needs_native()
    ledger = Ledger(tmp_path)
    try:
        assert ledger.write_call("main", "t", {"a": 1}, PRINCIPAL, PRINTER) is False  # not open in this process
        _open(ledger)
        chain = ledger._chains["main"].path
        ledger._chains["main"].lease.release()  # as the committer does at each pass
        other = os.open(chain, os.O_RDONLY)  # another open file: its lock conflicts as another process's would
        try:
            fcntl.flock(other, fcntl.LOCK_EX)
            size = os.path.getsize(chain)
            assert ledger.write_call("main", "t", {"a": 1}, PRINCIPAL, PRINTER) is False
            assert os.path.getsize(chain) == size
        finally:
            os.close(other)
        assert ledger.write_call("main", "t", {"a": 2}, PRINCIPAL, PRINTER) is True
    finally:
        ledger.close()
    rows = Ledger(tmp_path).rows("main")
    assert [row.detail for row in rows[2:]] == ["t: a=2"]
    assert Ledger(tmp_path).verify("main").ok


@pytest.mark.anyio
async def test_a_ledgered_call_records_its_summary_fingerprint_and_principal(tmp_path: Path) -> None:
    """Through the chokepoint (native or not): what the row says of each call, exec tools' own summary included."""

    async def send(to: str, api_key: str, count: int = 1) -> str:
        return f"sent {count} to {to}"

    async def bash(command: str, justification: str = "") -> str:
        return command

    registry = aleph.ToolRegistry()
    registry.register(aleph.tool(name="send", description="Send (mutating).")(send))
    registry.register(aleph.tool(name="bash", description="Not a shell: a tool named like one.")(bash))
    ledger = Ledger(tmp_path)
    service = ScopedToolService(
        Chokepoint(registry, ledger=ledger), policy=PermissionPolicy([]), agent="main", turn=aleph.TurnContext()
    )
    calls = [
        ("send", {"to": "ann", "api_key": "sk-live-0123456789abcdef", "count": 3}),
        ("send", {"to": "bob\nsmith", "api_key": ""}),
        ("bash", {"command": "ls -l", "justification": "look around"}),
    ]
    try:
        for name, arguments in calls:
            await service.execute(name, arguments)
        await ledger.flush()
    finally:
        ledger.close()
    rows = [row for row in Ledger(tmp_path).rows("main") if row.action == "tool_call"]
    assert [(row.target, row.detail, row.args_fp) for row in rows] == [
        (name, summarize_call(name, arguments), grant_fingerprint(name, arguments))
        for name, arguments in ((n, {"count": 1, **a} if n == "send" else {"justification": "", **a}) for n, a in calls)
    ]
    assert "sk-live" not in rows[0].detail and "look around" not in rows[2].detail
    assert all(row.principal and '"main"' in row.principal for row in rows)
    assert Ledger(tmp_path).verify("main").ok
