"""Memory is owned: another agent's items, provenance, timelines and sessions answer like missing ones.

``alice`` remembers facts in her session; ``mallory`` then reaches for them by their real ids and
session keys. Every answer must equal the answer for an id or key that never existed (no existence
oracle), and nothing of alice's changes.
"""

from __future__ import annotations

from typing import Any

import pytest
from aleph_memory import MemoryStore

import aleph

from .conftest import caller

pytestmark = pytest.mark.anyio

NEVER = "m0000000000000000"


async def remember(rt: aleph.Aleph, text: str, subject: str = "alice.secret") -> str:
    out = await caller(rt, agent="alice", session="alice-chat")("remember", action="add", content=text, subject=subject)
    return str(out["entries"][0]["id"])


async def refusal(call: Any, name: str, **payload: Any) -> str:
    with pytest.raises(aleph.ToolError) as info:
        await call(name, **payload)
    return str(info.value)


async def test_trace_and_timeline_of_another_agents_fact_answer_like_a_missing_id(rt: aleph.Aleph) -> None:
    fact = await remember(rt, "the vault code is 4711")
    mallory = caller(rt, agent="mallory", session="mallory-chat")
    for name, field in (("memory_timeline", "fact_id"), ("memory_trace", "target")):
        foreign = await refusal(mallory, name, **{field: fact})
        missing = await refusal(mallory, name, **{field: NEVER})
        assert foreign == missing.replace(NEVER, fact)
        assert "4711" not in foreign
    alice = caller(rt, agent="alice", session="alice-chat")
    timeline = await alice("memory_timeline", fact_id=fact)
    assert timeline["versions"][0]["content"] == "the vault code is 4711"


async def test_a_session_trace_shows_only_the_callers_own_memory(rt: aleph.Aleph) -> None:
    fact = await remember(rt, "alice's landlord is called Brandt")
    mallory = caller(rt, agent="mallory", session="mallory-chat")
    foreign = await mallory("memory_trace", kind="session", target="alice-chat")
    missing = await mallory("memory_trace", kind="session", target="never-a-session")
    assert foreign["events"] == missing["events"] == []
    assert {k: v for k, v in foreign.items() if k != "target"} == {k: v for k, v in missing.items() if k != "target"}
    own = await caller(rt, agent="alice", session="alice-chat")("memory_trace", kind="session", target="alice-chat")
    assert fact in {e["memory_id"] for e in own["events"]}


async def test_a_superseded_chain_never_crosses_into_another_agents_memory(rt: aleph.Aleph) -> None:
    old = await remember(rt, "alice lives in Rome", subject="user.city")
    alice = caller(rt, agent="alice", session="alice-chat")
    replaced = await alice("remember", action="replace", old_text="lives in Rome", content="alice lives in Oslo")
    new = replaced["entries"][0]["id"]
    mallory = caller(rt, agent="mallory", session="mallory-chat")
    await mallory("remember", action="add", content="mallory lives in Rome", subject="user.city")
    for fact in (old, new):
        assert "no memory item" in await refusal(mallory, "memory_timeline", fact_id=fact)
    # mallory's replace finds only her own fact to supersede
    await mallory("remember", action="replace", old_text="lives in Rome", content="mallory lives in Paris")
    versions = (await alice("memory_timeline", fact_id=new))["versions"]
    assert [v["content"] for v in versions] == ["alice lives in Rome", "alice lives in Oslo"]
    assert (await mallory("memory_search", query="Oslo"))["facts"] == []


async def test_session_new_on_another_agents_session_key_is_refused_and_changes_nothing(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    try:
        store.append_message("alice-chat", "user", "my PIN is 1234", agent="alice")
    finally:
        store.close()
    await caller(rt, agent="alice", session="alice-chat")("session_list")  # core binds the key to alice
    mallory = caller(rt, agent="mallory", session="alice-chat")
    for name, payload in (
        ("session_new", {"topic": "hijack"}),
        ("session_rename", {"topic": "hijack"}),
        ("session_complete", {"outcome": "hijacked"}),
        ("session_compact", {"extractive": True}),
        ("session_list", {}),
    ):
        text = await refusal(mallory, name, **payload)
        assert "belongs to another agent" in text, name
        assert "1234" not in text
    assert "belongs to another agent" in await refusal(mallory, "recall_events", query="PIN")
    listed = await caller(rt, agent="alice", session="alice-chat")("session_list")
    (row,) = listed["sessions"]
    assert row["key"] == "alice-chat" and "closed_at" not in row and "topic" not in row
    assert "completed_at" not in row and row["message_count"] == 1


async def test_the_next_epoch_key_of_another_agent_is_not_taken_over(rt: aleph.Aleph) -> None:
    alice = caller(rt, agent="alice", session="shared:s1")
    await alice("session_rename", topic="alice's")
    mallory = caller(rt, agent="mallory", session="shared")
    assert "belongs to another agent" in await refusal(mallory, "session_new")
    listed = {s["key"]: s for s in (await alice("session_list"))["sessions"]}
    assert listed["shared:s1"]["topic"] == "alice's" and "parent" not in listed["shared:s1"]
    assert "shared" not in {
        s["key"] for s in (await caller(rt, agent="mallory", session="m")("session_list"))["sessions"]
    }


async def test_a_session_a_host_wrote_for_one_agent_is_not_anothers(rt: aleph.Aleph) -> None:
    """Core has never seen the key (only the host's transcript has): the family's own table still refuses."""
    store = MemoryStore.of(rt)
    try:
        store.append_message("host-chat", "user", "the PIN is 1234", agent="alice")
    finally:
        store.close()
    mallory = caller(rt, agent="mallory", session="host-chat")
    assert "belongs to another agent" in await refusal(mallory, "session_new", topic="hijack")
    events = await mallory("recall_events", query="PIN")
    assert events["hits"] == [] and "No active session context" in events["note"]
    sent = caller(rt, agent="mallory", session="m2")
    assert "No session found" in await refusal(sent, "session_send", session_key="host-chat", message="x")


async def test_a_hosts_transcript_for_another_agents_session_is_refused(rt: aleph.Aleph) -> None:
    store = MemoryStore.of(rt)
    try:
        store.append_message("alice-chat", "user", "hello", agent="alice")
        with pytest.raises(Exception, match="belongs to another agent"):
            store.append_message("alice-chat", "user", "injected", agent="mallory")
        assert [m.content for m in store.sessions.messages("alice-chat", owner="alice")] == ["hello"]
        assert store.sessions.messages("alice-chat", owner="mallory") == []
    finally:
        store.close()


async def test_a_private_note_does_not_exist_for_another_agent(rt: aleph.Aleph, workspace: Any) -> None:
    alice = caller(rt, agent="alice", session="alice-notes")
    await alice(
        "note_manage", action="create", path="plans/heist", title="Heist", content="vault code 4711", private=True
    )
    await alice("note_manage", action="create", path="plans/picnic", title="Picnic", content="Links [[plans/heist]].")
    mallory = caller(rt, agent="mallory", session="mallory-notes")
    listed = await mallory("note_manage", action="list")
    assert [n["path"] for n in listed["notes"]] == ["plans/picnic"]
    assert (await mallory("note_manage", action="query", query="vault code"))["notes"] == []
    assert (await mallory("memory_browse", path="plans"))["entries"] == ["picnic"]
    orient = await mallory("note_orient")
    assert "heist" not in orient["index"].lower() and "heist" not in orient["recent_log"]
    assert (await mallory("note_graph_query", op="schema"))["total_notes"] == 1
    for name, payload in (
        ("note_manage", {"action": "get"}),
        ("note_manage", {"action": "update", "content": "mine now"}),
        ("note_manage", {"action": "delete"}),
        ("note_manage", {"action": "rename", "new_path": "plans/taken"}),
        ("memory_browse", {"action": "read"}),
        ("note_graph_query", {"op": "neighbors"}),
    ):
        field = "target" if name == "note_graph_query" else "path"
        foreign = await refusal(mallory, name, **payload, **{field: "plans/heist"})
        missing = await refusal(mallory, name, **payload, **{field: "plans/nothere"})
        assert foreign == missing.replace("nothere", "heist"), name
    # writing over it is refused, never done
    assert "already exists" in await refusal(mallory, "note_manage", action="append", path="plans/heist", facts=["x"])
    assert "already exists" in await refusal(
        mallory, "note_manage", action="rename", path="plans/picnic", new_path="plans/heist"
    )
    got = await alice("note_manage", action="get", path="plans/heist")
    assert got["content"].strip() == "vault code 4711"
    await alice("note_manage", action="update", path="plans/heist", content="vault code 1234")
    text = (workspace / "notes" / "plans" / "heist.md").read_text()
    assert "private: true" in text and "owner: alice" in text and "1234" in text
    assert [n["path"] for n in (await mallory("note_manage", action="list"))["notes"]] == ["plans/picnic"]
