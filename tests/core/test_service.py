from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

import aleph
from aleph import NullToolService, ToolNotFound, ToolRegistry, UnscopedToolService
from aleph._errors import (
    ApprovalExpired,
    Cancelled,
    ExecutionFailed,
    PermissionDenied,
    ToolTimeout,
    TransportError,
    ValidationFailed,
)


@pytest.mark.anyio
async def test_null_service_answers_not_found_to_everything() -> None:
    svc = NullToolService()
    with pytest.raises(ToolNotFound, match="tool not found: x"):
        await svc.execute("x", {})
    assert await svc.list() == []
    assert await svc.describe("x") is None
    assert await svc.dispatcher_schema() == []
    result = await svc.call("x", {})
    assert (result.success, result.error_kind) == (False, "not_found")


@pytest.mark.anyio
async def test_unknown_tool_suggests_candidates() -> None:
    reg = ToolRegistry()
    reg.register(aleph.tool(name="web_search", description="Search the web.", inline=True)(lambda: 1))
    with pytest.raises(ToolNotFound) as info:
        await UnscopedToolService(reg).execute("web_serch", {})
    assert info.value.suggestions == ["web_search"]
    assert str(info.value) == "tool not found: web_serch. Did you mean: web_search?"


@pytest.mark.anyio
async def test_call_never_raises_and_reports_a_panicking_tool() -> None:
    @aleph.tool(inline=True)
    def boom() -> None:
        """Always fails."""
        raise RuntimeError("kaput")

    reg = ToolRegistry()
    reg.register(boom)
    result = await UnscopedToolService(reg).call("boom", {})
    assert result.success is False
    assert result.error == "tool boom execution failed: tool panicked: RuntimeError: kaput"
    assert result.retryable is False


@pytest.mark.anyio
async def test_a_full_disk_a_locked_database_or_missing_permissions_are_named_by_cause_never_a_panic(
    tmp_path: Path,
) -> None:
    full = tmp_path / "full.db"
    raised: list[BaseException] = [
        sqlite3.OperationalError("database or disk is full"),
        sqlite3.OperationalError("database is locked"),
        OSError(errno.ENOSPC, "No space left on device", str(full)),
        PermissionError(errno.EACCES, "Permission denied", str(full)),
    ]

    @aleph.tool(inline=True)
    def store() -> None:
        """Stores something."""
        raise raised.pop(0)

    reg = ToolRegistry()
    reg.register(store)
    errors = [(await UnscopedToolService(reg).call("store", {})).error or "" for _ in range(4)]
    assert not any("panicked" in e for e in errors)
    assert errors == [
        "tool store execution failed: the data directory is full (SQLite: database or disk is full); free some space",
        "tool store execution failed: its database is busy: another process holds a lock on it; try again shortly",
        f"tool store execution failed: the disk is full (no space left on device): {full}",
        f"tool store execution failed: permission denied: {full}",
    ]


def test_is_retryable_exactly_for_timeout_transport_approval_expired_and_cancelled() -> None:
    retryable = {
        type(e).__name__: e.is_retryable
        for e in (
            ToolNotFound("t"),
            PermissionDenied("t", "r"),
            ValidationFailed("t", "c"),
            ExecutionFailed("t", "c"),
            ToolTimeout("t", 5),
            ApprovalExpired("t", 5),
            TransportError("t", "c"),
            Cancelled("t"),
        )
    }
    assert {k for k, v in retryable.items() if v} == {"ToolTimeout", "ApprovalExpired", "TransportError", "Cancelled"}


def test_error_messages_match_the_reference_wording() -> None:
    assert str(PermissionDenied("bash", "no")) == "permission denied for tool bash: no"
    assert str(ToolTimeout("bash", 300)) == "tool bash timed out after 300ms"
    assert "the user did not decline this call" in str(ApprovalExpired("x", 10))
    assert str(Cancelled("x")).startswith("tool x was cancelled")
    assert isinstance(ToolNotFound("x"), LookupError)
    assert isinstance(PermissionDenied("x", "r"), PermissionError)


@pytest.mark.anyio
async def test_dispatcher_schema_is_the_function_form_of_list() -> None:
    reg = ToolRegistry()
    reg.register(aleph.tool(name="b_tool", description="B.", inline=True)(lambda: 1))
    reg.register(aleph.tool(name="a_tool", description="A.", inline=True)(lambda: 1))
    schema = await UnscopedToolService(reg).dispatcher_schema()
    assert [s["name"] for s in schema] == ["a_tool", "b_tool"]
    assert set(schema[0]) == {"name", "description", "parameters"}
