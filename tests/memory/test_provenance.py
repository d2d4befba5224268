"""Provenance rows are real signed ledger rows: written by the chokepoint, verified by `aleph ledger verify`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import aleph

from .conftest import caller

pytestmark = pytest.mark.anyio


def ledger_verify(workspace: Path) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        [sys.executable, "-m", "aleph", "--config", str(workspace / "aleph.toml"), "ledger", "verify", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


async def test_remember_supersede_forget_and_injection_are_signed_rows_linked_to_their_source(
    rt: aleph.Aleph, workspace: Path
) -> None:
    call = caller(rt, agent="alice", session="chat-7", run="run-1")
    first = await call("remember", action="add", content="Alice's manager is Bob", subject="user.manager")
    second = await call("remember", action="add", content="Alice's manager is Carol", subject="user.manager")
    later = caller(rt, agent="alice", session="chat-8", run="run-2")
    injected = await later("recall_context", query="who is the manager")
    await later("remember", action="remove", old_text="manager is Carol")
    old, new = first["entries"][0]["id"], second["entries"][0]["id"]
    assert [f["id"] for f in injected["fragments"]] == [new]

    ledger = rt.chokepoint.ledger
    assert ledger is not None
    await ledger.flush()
    rows = [r for r in ledger.rows("alice") if r.refs]
    by_action = [(r.target, {k: v for k, v in r.refs.items() if k != "call"}) for r in rows]
    assert by_action == [
        ("remember", {"memory_id": old, "source_session": "chat-7", "source_turn": "run-1", "source_call": "run-1-c1"}),
        (
            "remember",
            {
                "memory_id": new,
                "supersedes": old,
                "source_session": "chat-7",
                "source_turn": "run-1",
                "source_call": "run-1-c2",
            },
        ),
        ("recall_context", {"event": "memory_injected", "memory_ids": new, "session": "chat-8", "turn": "run-2"}),
        ("remember", {"forgets": new, "source_session": "chat-8", "source_turn": "run-2", "source_call": "run-2-c2"}),
    ]
    trace = await later("memory_trace", target=new)
    assert trace["ledger_checked"] is True
    mine = next(v for v in trace["versions"] if v["id"] == new)
    assert mine["origin"] == {"session": "chat-7", "turn": "run-1", "call_id": "run-1-c2"}
    events = {e["event"]: e["ledger"]["seq"] for e in mine["events"]}
    seqs = {r.refs.get("source_call") or r.refs.get("event"): r.seq for r in rows}
    assert events == {"superseding": seqs["run-1-c2"], "forgotten": seqs["run-2-c2"]}
    [into] = trace["injected_into"]
    assert (into["session"], into["turn"], into["ledger"]["seq"]) == ("chat-8", "run-2", seqs["memory_injected"])
    older = next(v for v in trace["versions"] if v["id"] == old)
    assert {e["event"]: e["ledger"]["seq"] for e in older["events"]} == {
        "remembered": seqs["run-1-c1"],
        "superseded": seqs["run-1-c2"],
    }
    session = await later("memory_trace", kind="session", target="chat-8")
    assert [(e["event"], e["memory_id"]) for e in session["events"]] == [("injected", new), ("forgotten", new)]
    await rt.aclose()
    report = ledger_verify(workspace)
    assert report["ok"] is True
    assert [a["agent_id"] for a in report["agents"]] == ["alice"]


async def test_a_tampered_provenance_row_fails_verification(rt: aleph.Aleph, workspace: Path) -> None:
    call = caller(rt)
    await call("remember", action="add", content="Frank's birthday is in May")
    ledger = rt.chokepoint.ledger
    assert ledger is not None
    await rt.aclose()
    chain = next(p for p in (ledger.directory / "chains").glob("*.jsonl") if not p.name.endswith(".ckpt.jsonl"))
    lines = chain.read_text().splitlines()
    target = next(i for i, line in enumerate(lines) if '"memory_id"' in line)
    row = json.loads(lines[target])
    row["refs"]["memory_id"] = "m" + "0" * 16
    lines[target] = json.dumps(row, separators=(",", ":"))
    chain.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "aleph", "--config", str(workspace / "aleph.toml"), "ledger", "verify", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["ok"] is False


async def test_tool_usage_reads_calls_errors_and_refusals_from_the_ledger(workspace: Path) -> None:
    from .conftest import make_runtime

    policy = '[policies.tool_permissions.overrides]\nsession_send = "deny"\n'
    async with make_runtime(workspace, policy) as rt:
        call = caller(rt)
        await call("remember", action="add", content="Gina likes jazz")
        await call("remember", action="add", content="Gina likes blues")
        with pytest.raises(aleph.ToolError):
            await call("session_send", session_key="other", message="hi")
        with pytest.raises(aleph.ExecutionFailed, match="does not exist"):
            await call("note_manage", action="update", path="missing", content="x")
        usage = await call("tool_usage")
        by_id = {e["id"]: e for e in usage["entries"]}
        assert by_id["remember"]["usage"] == 2 and by_id["remember"]["errors"] == 0
        assert by_id["session_send"]["denied"] == 1
        assert (by_id["note_manage"]["usage"], by_id["note_manage"]["errors"]) == (1, 1)
        assert by_id["memory_search"]["usage"] == "—"
        assert by_id["memory_search"]["kind"] == "plugin"
        assert "unavailable" not in usage
        idle = await call("tool_usage", idle_days=1)
        assert "remember" not in {e["id"] for e in idle["entries"]}
        assert "memory_search" in {e["id"] for e in idle["entries"]}
