"""Sessions over core's event log and this family's transcript store, compaction, completion, recall."""

from __future__ import annotations

from pathlib import Path

import pytest
from aleph_memory import MemoryStore

import aleph

from .conftest import caller, make_runtime

pytestmark = pytest.mark.anyio


async def test_session_new_rolls_over_to_the_next_epoch_and_rename_sets_the_topic(rt: aleph.Aleph) -> None:
    call = caller(rt, session="agent:main:default")
    out = await call("session_new", topic="  the   old chat ")
    assert (out["old_session_key"], out["new_session_key"], out["topic"]) == (
        "agent:main:default",
        "agent:main:default:s1",
        "the old chat",
    )
    nxt = caller(rt, session="agent:main:default:s1")
    assert (await nxt("session_new"))["new_session_key"] == "agent:main:default:s2"
    renamed = await nxt("session_rename", topic="Planning the trip")
    assert renamed["topic"] == "Planning the trip"
    listed = await nxt("session_list")
    rows = {s["key"]: s for s in listed["sessions"]}
    assert rows["agent:main:default"]["topic"] == "the old chat" and "closed_at" in rows["agent:main:default"]
    assert rows["agent:main:default:s1"]["topic"] == "Planning the trip"
    assert rows["agent:main:default:s1"]["parent"] == "agent:main:default"
    with pytest.raises(aleph.ValidationFailed, match="topic"):
        await nxt("session_rename", topic="   ")


async def test_session_tools_without_a_session_say_so(rt: aleph.Aleph) -> None:
    service = rt.tool_service(agent="alice")
    with pytest.raises(aleph.ExecutionFailed, match="no session context available"):
        await service.execute("session_new", {})


async def test_session_send_queues_for_an_existing_session_of_the_same_agent(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    store.append_message("inbox-session", "user", "hello there", agent="alice")
    store.append_message("bob-session", "user", "hi", agent="bob")
    call = caller(rt, session="worker")
    sent = await call("session_send", session_key="inbox-session", message="The report is ready")
    assert sent["status"] == "accepted" and sent["run_id"].startswith("q")
    listed = {s["key"]: s for s in (await call("session_list"))["sessions"]}
    assert listed["inbox-session"]["queued"] == 1
    with pytest.raises(aleph.ExecutionFailed, match="No session found for key 'bob-session'"):
        await call("session_send", session_key="bob-session", message="peek")
    with pytest.raises(aleph.ExecutionFailed, match="No session found for key 'nowhere'"):
        await call("session_send", session_key="nowhere", message="x")
    with pytest.raises(aleph.ValidationFailed, match="invalid session key"):
        await call("session_send", session_key="bad key!", message="x")
    taken = store.take_queued("inbox-session")
    assert [(m["content"], m["from_session"], m["from_agent"]) for m in taken] == [
        ("The report is ready", "worker", "alice")
    ]
    assert store.take_queued("inbox-session") == []
    store.close()


def transcript(rt: aleph.Aleph, session: str, n: int) -> None:
    store = MemoryStore.of(rt)
    topics = ["the budget for the Lisbon offsite", "flights booked on TAP", "the hotel near Alfama", "a tram tour"]
    for i in range(n):
        store.append_message(
            session, "user" if i % 2 == 0 else "assistant", f"Message {i} is about {topics[i % 4]}.", agent="alice"
        )
    store.close()


async def test_compaction_needs_a_summariser_and_never_fakes_one(rt: aleph.Aleph) -> None:
    transcript(rt, "s1", 12)
    call = caller(rt)
    with pytest.raises(aleph.ExecutionFailed, match="summariser not available"):
        await call("session_compact")
    out = await call("session_compact", extractive=True)
    assert (out["compacted"], out["kept"], out["kind"]) == (6, 6, "extract")
    assert out["tokens_saved"] > 0
    chunk = await call("recall_context", query="Lisbon offsite budget")
    assert chunk["fragments"][0]["kind"] == "chunk"
    assert chunk["fragments"][0]["content"].startswith("Extract (selected sentences, not a summary) of 6")
    again = await call("session_compact", extractive=True)
    assert again["compacted"] == 0 and again["message"].startswith("Nothing to compact")


class Summariser:
    """Stands in for an LLM summariser (none can run here): keeps each message's first four words."""

    @aleph.hookimpl
    def aleph_memory_summarisers(self, register):  # type: ignore[no-untyped-def]
        async def summarise(texts, instructions):  # type: ignore[no-untyped-def]
            return f"[{instructions}] " + " / ".join(" ".join(t.split()[:4]) for t in texts)

        register("firstwords", summarise)


async def test_compaction_and_reflection_use_a_summariser_from_the_family_hook(workspace: Path) -> None:
    async with make_runtime(workspace, plugins=(Summariser(),)) as rt:
        transcript(rt, "s1", 10)
        call = caller(rt)
        out = await call("session_compact", instructions="keep bookings")
        assert (out["compacted"], out["kind"]) == (4, "summary")
        hits = await call("memory_search", query="keep bookings", kinds=["chunk"])
        assert hits["facts"][0]["content"].startswith(
            "Summary of 4 earlier message(s):\n[keep bookings] user: Message 0"
        )
        await call("remember", action="add", content="The offsite is in Lisbon")
        reflected = await call("memory_reflect", query="where is the offsite")
        assert reflected["synthesis"].startswith("[Answer the question")
        assert reflected["sources"][0]["content"] == "The offsite is in Lisbon"


async def test_session_complete_records_the_outcome_and_session_search_finds_it(rt: aleph.Aleph) -> None:
    transcript(rt, "trip", 4)
    call = caller(rt, session="trip")
    out = await call("session_complete", outcome="Booked the Lisbon offsite", key_learnings=["book TAP early"])
    assert out["ok"] is True
    found = await call("memory_search", query="Lisbon offsite booked", kinds=["outcome"])
    assert found["facts"][0]["content"] == (
        "TASK_OUTCOME:\nBooked the Lisbon offsite\n\nKEY_LEARNINGS:\n- book TAP early\n"
    )
    elsewhere = caller(rt, session="other")
    hits = await elsewhere("session_search", query="hotel Alfama")
    assert hits["hits"][0]["session_key"] == "trip"
    assert hits["hits"][0]["evidence_quotes"][0].endswith("the hotel near Alfama.")
    assert (await elsewhere("session_list"))["sessions"][0]["key"] in ("trip", "other")


async def test_recall_events_searches_this_sessions_event_log(rt: aleph.Aleph) -> None:
    call = caller(rt, session="work")
    await call("remember", action="add", content="Deploys go through the staging cluster")
    await call("note_manage", action="create", path="runbook", title="Runbook")
    with pytest.raises(aleph.ExecutionFailed):
        await call("note_manage", action="update", path="absent", content="x")
    events = rt.chokepoint.events
    assert events is not None
    events.flush()
    out = await call("recall_events", query="note_manage")
    assert {(h["tool"], h["kind"]) for h in out["hits"]} == {("note_manage", "executed"), ("note_manage", "failed")}
    other = caller(rt, session="elsewhere")
    empty = await other("recall_events", query="note_manage")
    assert empty["matched"] == 0 and empty["note"].startswith("No earlier events matched")
    nowhere = await rt.tool_service(agent="alice").execute("recall_events", {"query": "x"})
    assert "No active session context" in nowhere.text


async def test_ctx_search_finds_text_inside_a_spilled_tool_output(workspace: Path) -> None:
    async with make_runtime(workspace, "[tools]\nmax_output_chars = 2000\n") as rt:

        @aleph.tool(name="dump_log", description="Return a long log for the test.", idempotent=True, inline=True)
        def dump_log() -> str:
            lines = [f"line {i}: routine heartbeat ok" for i in range(400)]
            lines[317] = "line 317: ERROR disk quota exceeded on /var/spool"
            return "# Service log\n" + "\n".join(lines)

        rt.register(dump_log)
        call = caller(rt, session="ops")
        shown = await call("dump_log")
        assert isinstance(shown, str) and shown.startswith("[Full output persisted:")
        out = await call("ctx_search", query="disk quota")
        assert out["indexed_sections"] >= 2
        assert out["hits"][0]["title"] == "Service log"
        assert "ERROR [disk] [quota] exceeded" in out["hits"][0]["excerpt"]
        other = caller(rt, session="elsewhere")
        assert (await other("ctx_search", query="disk quota"))["note"].startswith("No offloaded tool output")


def test_the_next_epoch_key() -> None:
    from aleph_memory._sessions import next_epoch

    assert [next_epoch(k) for k in ("agent:main:default", "agent:main:default:s1", "x:s9")] == [
        "agent:main:default:s1",
        "agent:main:default:s2",
        "x:s10",
    ]
