"""The store's behaviour, run against SQLite and a real PostgreSQL server alike."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aleph_teams._store import StoreError, TeamStore, open_store


def _team(store: TeamStore, **kw: Any) -> dict[str, Any]:
    members = kw.pop("members", [{"agent_id": "w1", "role": "worker"}, {"agent_id": "w2", "role": "worker"}])
    return store.create_team(name=kw.pop("name", "alpha"), leader_id="lead", members=members, **kw)


def test_team_names_are_unique_and_the_leader_is_enrolled(store: TeamStore) -> None:
    team = _team(store)
    assert [m["agent_id"] for m in team["members"]] == ["lead", "w1", "w2"]
    assert team["members"][0]["role"] == "leader"
    with pytest.raises(StoreError, match=f"a team named 'alpha' already exists \\(id {team['id']}\\)"):
        _team(store)


def test_member_rules_leader_stays_duplicates_and_disbanded_refused(store: TeamStore) -> None:
    team = _team(store)
    with pytest.raises(StoreError, match="already a member"):
        store.add_member(team["id"], "w1")
    with pytest.raises(StoreError, match="cannot be removed"):
        store.remove_member(team["id"], "lead")
    with pytest.raises(StoreError, match="not a member"):
        store.remove_member(team["id"], "ghost")
    store.remove_member(team["id"], "w2")
    assert store.member_ids(team["id"]) == ["lead", "w1"]
    assert store.disband(team["id"], "lead") is True
    assert store.disband(team["id"], "lead") is False
    with pytest.raises(StoreError, match="disbanded"):
        store.add_member(team["id"], "w3")


def test_authorize_hides_a_team_from_outsiders(store: TeamStore) -> None:
    team = _team(store)
    assert store.authorize(team["id"], "w1") is not None
    assert store.authorize(team["id"], "outsider") is None
    assert store.authorize("no-such-team", "lead") is None


def test_dependencies_derive_blocked_and_unsatisfiable(store: TeamStore) -> None:
    team = _team(store)
    a = store.create_task(subject="a", team_id=team["id"])
    b = store.create_task(subject="b", team_id=team["id"], blocked_by=[a["id"]])
    assert (b["status"], b["blocked_by"]) == ("blocked", [a["id"]])
    store.update_task(a["id"], status="skipped")
    assert store.get_task(b["id"])["status"] == "pending"  # type: ignore[index]
    c = store.create_task(subject="c", team_id=team["id"])
    d = store.create_task(subject="d", team_id=team["id"], blocked_by=[c["id"]])
    store.update_task(c["id"], status="failed")
    assert store.get_task(d["id"])["status"] == "unsatisfiable"  # type: ignore[index]
    assert [t["subject"] for t in store.list_tasks(team_id=team["id"], status="unsatisfiable")] == ["d"]
    # Writing a derived status stores pending.
    assert store.update_task(d["id"], status="blocked")["stored_status"] == "pending"  # type: ignore[index]
    with pytest.raises(StoreError, match="does not exist"):
        store.create_task(subject="e", team_id=team["id"], blocked_by=["nope"])


def test_lists_order_by_priority_then_age(store: TeamStore) -> None:
    team = _team(store)
    for subject, priority in (("n1", "normal"), ("l1", "low"), ("c1", "critical"), ("h1", "high"), ("n2", "normal")):
        store.create_task(subject=subject, team_id=team["id"], priority=priority)
    assert [t["subject"] for t in store.list_tasks(team_id=team["id"])] == ["c1", "h1", "n1", "n2", "l1"]
    with pytest.raises(StoreError, match="unknown priority 'urgent'"):
        store.create_task(subject="x", priority="urgent")


def test_metadata_is_a_merge_patch(store: TeamStore) -> None:
    task = store.create_task(subject="m", metadata={"a": 1, "b": [1], "keep": True})
    after = store.update_task(task["id"], metadata={"a": None, "b": [2], "c": "x"})
    assert after is not None and after["metadata"] == {"b": [2], "c": "x", "keep": True}


def test_claims_are_exclusive(store: TeamStore) -> None:
    task = store.create_task(subject="claim me")
    assert store.claim_task(task["id"], "worker-1") is not None
    assert store.claim_task(task["id"], "worker-2") is None
    assert store.get_task(task["id"])["locked_by"] == "worker-1"  # type: ignore[index]


def test_task_budgets_are_reserved_from_the_members_pool(store: TeamStore) -> None:
    team = store.create_team(
        name="budgeted",
        leader_id="lead",
        budget={"calls": 100},
        members=[{"agent_id": "w1", "budget": {"calls": 60}}, {"agent_id": "w2", "budget": {"calls": 40}}],
    )
    with pytest.raises(StoreError, match="the team has only 0 unreserved of 100"):
        store.add_member(team["id"], "w3", budget={"calls": 1})
    first = store.create_task(subject="t1", team_id=team["id"], owner="w1", budget={"calls": 50})
    with pytest.raises(StoreError, match="member 'w1' has only 10 left of 60"):
        store.create_task(subject="t2", team_id=team["id"], owner="w1", budget={"calls": 11})
    # A finished task gives back what it did not spend.
    store.add_task_usage(first["id"], calls=5)
    store.update_task(first["id"], status="completed")
    store.create_task(subject="t3", team_id=team["id"], owner="w1", budget={"calls": 55})
    with pytest.raises(StoreError, match="unknown key 'dollars'"):
        store.create_task(subject="t4", budget={"dollars": 1})


def test_mail_is_delivered_once_per_recipient_in_order(store: TeamStore) -> None:
    team = _team(store)
    for i in range(5):
        store.send_message(
            team_id=team["id"], from_agent="lead", recipients=[("w1", "to"), ("w2", "cc")], subject=f"s{i}", content="c"
        )
    assert store.unread_counts(team["id"], "w2") == {"to": 0, "cc": 5}
    peeked = store.inbox(team["id"], "w1", mark_read=False)
    assert [m["subject"] for m in peeked] == [f"s{i}" for i in range(5)]
    assert [m["subject"] for m in store.inbox(team["id"], "w1")] == [f"s{i}" for i in range(5)]
    assert store.inbox(team["id"], "w1") == []
    assert store.unread_counts(team["id"], "w2")["cc"] == 5


def test_replies_join_the_thread_of_their_parent(store: TeamStore) -> None:
    team = _team(store)
    root = store.send_message(
        team_id=team["id"], from_agent="w1", recipients=[("lead", "to")], subject="q", content="?"
    )
    r1 = store.send_message(
        team_id=team["id"],
        from_agent="lead",
        recipients=[("w1", "to")],
        subject="a",
        content="!",
        reply_to=root["message_id"],
    )
    r2 = store.send_message(
        team_id=team["id"],
        from_agent="w1",
        recipients=[("lead", "to")],
        subject="b",
        content=".",
        reply_to=r1["message_id"],
    )
    assert r1["thread_id"] == r2["thread_id"] == root["message_id"]
    assert [m["subject"] for m in store.thread(team["id"], root["message_id"], "w1")] == ["q", "a", "b"]
    with pytest.raises(StoreError, match="not in this team"):
        store.send_message(
            team_id=team["id"],
            from_agent="w1",
            recipients=[("lead", "to")],
            subject="x",
            content="",
            reply_to="missing",
        )


def test_disband_expires_unread_mail_and_cancels_open_tasks(store: TeamStore) -> None:
    team = _team(store)
    store.send_message(team_id=team["id"], from_agent="lead", recipients=[("w1", "to")], subject="s", content="c")
    task = store.create_task(subject="open", team_id=team["id"])
    store.disband(team["id"], "lead")
    time.sleep(0.01)
    assert store.inbox(team["id"], "w1") == []
    assert store.get_task(task["id"])["status"] == "cancelled"  # type: ignore[index]


def test_snapshots_round_trip_newest_first(store: TeamStore) -> None:
    team = _team(store)
    a = store.save_snapshot(team["id"], "v1", None, {"members": ["x"]})
    b = store.save_snapshot(team["id"], "v2", "n", {"members": ["y"]})
    assert [s["snapshot_id"] for s in store.snapshots(team["id"])] == [b["snapshot_id"], a["snapshot_id"]]
    assert store.get_snapshot(a["snapshot_id"])[1] == {"members": ["x"]}  # type: ignore[index]
    assert store.delete_snapshot(a["snapshot_id"]) is True
    assert store.delete_snapshot(a["snapshot_id"]) is False


def test_schedule_claims_are_won_once_per_due_time(store: TeamStore, store_url: str, tmp_path: Any) -> None:
    job = store.create_cron(
        {
            "name": "j",
            "prompt": "p",
            "schedule": {"type": "every", "every_ms": 1000},
            "agent_id": "main",
            "created_by": "main",
            "missed": "run_once",
            "next_run": time.time() - 1,
        }
    )
    other = open_store(store_url, tmp_path)  # a second scheduler (another process or host)
    try:
        due = store.due("cron", time.time())
        assert [j["id"] for j in due] == [job["id"]]
        won = [s.claim_run("cron", job["id"], due[0]["next_run"], 60, time.time() + 1) for s in (store, other)]
        assert sum(1 for w in won if w) == 1
        run_id = next(w for w in won if w)
        store.finish_schedule_run("cron", job["id"], run_id, "ok", "done", None)
        assert store.get_cron(job["id"])["run_count"] == 1  # type: ignore[index]
    finally:
        other.close()


@pytest.mark.anyio
async def test_a_waiter_wakes_on_a_write_from_another_connection(
    store: TeamStore, store_url: str, tmp_path: Any
) -> None:
    team = _team(store)
    writer = open_store(store_url, tmp_path)  # another process would hold its own connection
    try:
        seen = store.version

        async def write_later() -> None:
            await asyncio.sleep(0.1)
            await asyncio.to_thread(
                writer.send_message,
                team_id=team["id"],
                from_agent="w1",
                recipients=[("lead", "to")],
                subject="s",
                content="c",
            )

        task = asyncio.ensure_future(write_later())
        assert await store.wait_changed(seen, 10) is True
        await task
    finally:
        writer.close()
