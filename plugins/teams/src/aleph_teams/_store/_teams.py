"""The store interface: teams, members, mail, events, snapshots and usage (tasks and schedules mixed in)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from aleph_teams._store._common import StoreError, check_protocol, dumps, loads, new_id, now
from aleph_teams._store._db import Database, IntegrityError, Tx
from aleph_teams._store._schedules import ScheduleStore
from aleph_teams._store._tasks import TaskStore, check_budget

__all__ = ["TeamStore"]

_MSG_COLS = (
    "m.seq, m.id, m.team_id, m.from_agent, m.msg_type, m.subject, m.content, m.reply_to, m.thread_id, "
    "m.attachments, m.created_at, m.expires_at"
)


def _team(row: tuple[Any, ...]) -> dict[str, Any]:
    keys = ("id", "name", "description", "leader_id", "status", "protocol", "budget", "created_at", "disbanded_at")
    team = dict(zip(keys, row, strict=True))
    team["budget"] = loads(team["budget"], {})
    return team


_TEAM_COLS = "id, name, description, leader_id, status, protocol, budget, created_at, disbanded_at"


class TeamStore(TaskStore, ScheduleStore):
    """Everything the teams family keeps, over one :class:`~aleph_teams._store._db.Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def close(self) -> None:
        """Close the backend."""
        self.db.close()

    # -- waiting --------------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Read before checking state; pass to :meth:`wait_changed`."""
        return self.db.wakeup.version

    async def wait_changed(self, seen: int, timeout: float) -> bool:
        """Wait for any committed change after ``seen`` (here or in another process); False on timeout."""
        return await self.db.wakeup.wait(seen, max(0.0, timeout))

    async def wait_until(self, check: Any, timeout: float) -> Any:
        """Re-run ``check()`` after every change until it returns a truthy value or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.version
            value = await asyncio.to_thread(check) if _blocking(self.db) else check()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                return value
            await self.wait_changed(seen, left)

    # -- teams and members ----------------------------------------------------------------------------

    def create_team(
        self,
        *,
        name: str,
        leader_id: str,
        description: str = "",
        members: Sequence[dict[str, Any]] = (),
        protocol: str | None = None,
        budget: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Create a team with its leader and members; a duplicate name is refused."""
        name = name.strip()
        if not name:
            raise StoreError("a team needs a non-empty name")
        team_budget = check_budget(budget, "team")
        team_id = new_id()
        ts = now()
        with self.db.write() as tx:
            clash = tx.one("SELECT id FROM teams WHERE name = ?", (name,))
            if clash is not None:
                raise StoreError(f"a team named '{name}' already exists (id {clash[0]})")
            try:
                tx.execute(
                    "INSERT INTO teams (id, name, description, leader_id, protocol, budget, created_at) "
                    "VALUES (?,?,?,?,?,?,?)",
                    (team_id, name, description, leader_id, protocol or None, dumps(team_budget), ts),
                )
            except IntegrityError as exc:
                raise StoreError(f"a team named '{name}' already exists") from exc
            self._insert_member(tx, team_id, team_budget, leader_id, "leader", "agent", "", None)
            for m in members:
                if m["agent_id"] == leader_id:
                    continue
                self._insert_member(
                    tx,
                    team_id,
                    team_budget,
                    m["agent_id"],
                    m.get("role", ""),
                    m.get("kind", "agent"),
                    m.get("runner", ""),
                    m.get("budget"),
                )
            self.add_event(team_id, "team_created", leader_id, {"name": name}, tx=tx)
            team = self.get_team(team_id, tx)
        assert team is not None
        return team

    def _insert_member(
        self,
        tx: Tx,
        team_id: str,
        team_budget: dict[str, Any],
        agent_id: str,
        role: str,
        kind: str,
        runner: str,
        budget: dict[str, Any] | None,
    ) -> None:
        member_budget = check_budget(budget, f"member '{agent_id}'")
        if member_budget and team_budget:
            # members' budgets are carved out of the team's pool: together they never exceed it
            rows = tx.execute(f"SELECT budget FROM team_members WHERE team_id = ?{tx.for_update}", (team_id,))
            for dim, amount in member_budget.items():
                if dim not in team_budget:
                    continue
                held = sum(loads(r[0], {}).get(dim, 0) for r in rows)
                if held + amount > team_budget[dim]:
                    raise StoreError(
                        f"member '{agent_id}' asks for {amount:g} {dim} but the team has only "
                        f"{max(0, team_budget[dim] - held):g} unreserved of {team_budget[dim]:g}"
                    )
        try:
            tx.execute(
                "INSERT INTO team_members (team_id, agent_id, role, kind, runner, budget, joined_at) VALUES "
                "(?,?,?,?,?,?,?)",
                (team_id, agent_id, role, kind, runner, dumps(member_budget), now()),
            )
        except IntegrityError as exc:
            raise StoreError(f"agent '{agent_id}' is already a member of team '{team_id}'") from exc

    def get_team(self, team_id: str, tx: Tx | None = None) -> dict[str, Any] | None:
        """The team with its members, or None."""
        if tx is None:
            with self.db.read() as rtx:
                return self.get_team(team_id, rtx)
        row = tx.one(f"SELECT {_TEAM_COLS} FROM teams WHERE id = ?", (team_id,))
        if row is None:
            return None
        team = _team(row)
        team["members"] = [
            {"agent_id": r[0], "role": r[1], "kind": r[2], "runner": r[3], "budget": loads(r[4], {}), "joined_at": r[5]}
            for r in tx.execute(
                "SELECT agent_id, role, kind, runner, budget, joined_at FROM team_members WHERE team_id = ? "
                "ORDER BY joined_at, agent_id",
                (team_id,),
            )
        ]
        return team

    def list_teams(self) -> list[dict[str, Any]]:
        """Every team, oldest first (without members)."""
        with self.db.read() as tx:
            return [_team(r) for r in tx.execute(f"SELECT {_TEAM_COLS} FROM teams ORDER BY created_at")]

    def authorize(self, team_id: str, caller: str) -> dict[str, Any] | None:
        """The team when ``caller`` leads it or is a member; None otherwise (indistinguishable from missing)."""
        team = self.get_team(team_id)
        if team is None:
            return None
        if caller == team["leader_id"] or any(m["agent_id"] == caller for m in team["members"]):
            return team
        return None

    def set_protocol(self, team_id: str, protocol: str | None) -> None:
        """Set or clear (None / blank) the team protocol."""
        with self.db.write() as tx:
            tx.execute("UPDATE teams SET protocol = ? WHERE id = ?", ((protocol or "").strip() or None, team_id))

    def disband(self, team_id: str, actor: str) -> bool:
        """Mark the team disbanded (history kept), expire its unread mail, cancel unfinished tasks."""
        ts = now()
        with self.db.write() as tx:
            rows = tx.execute(
                "UPDATE teams SET status = 'disbanded', disbanded_at = ? WHERE id = ? AND status = 'active' "
                "RETURNING id",
                (ts, team_id),
            )
            if not rows:
                return False
            tx.execute(
                "UPDATE team_messages SET expires_at = ? WHERE team_id = ? AND expires_at IS NULL", (ts, team_id)
            )
            tx.execute(
                "UPDATE tasks SET status = 'cancelled' WHERE team_id = ? AND status IN "
                "('pending', 'in_progress', 'waiting_review', 'paused')",
                (team_id,),
            )
            self.add_event(team_id, "team_disbanded", actor, {}, tx=tx)
            tx.execute("DELETE FROM team_events WHERE team_id = ? AND created_at < ?", (team_id, ts - 86400))
        return True

    def add_member(
        self,
        team_id: str,
        agent_id: str,
        role: str = "",
        *,
        kind: str = "agent",
        runner: str = "",
        budget: dict[str, Any] | None = None,
        actor: str = "",
    ) -> None:
        """Enrol a member (refused on a disbanded team, for a duplicate, or over the team's budget)."""
        with self.db.write() as tx:
            row = tx.one(f"SELECT status, budget FROM teams WHERE id = ?{tx.for_update}", (team_id,))
            if row is None:
                raise StoreError(f"team not found: {team_id}")
            if row[0] != "active":
                raise StoreError(f"team '{team_id}' is disbanded; members cannot be added")
            self._insert_member(tx, team_id, loads(row[1], {}), agent_id, role, kind, runner, budget)
            self.add_event(team_id, "member_added", actor, {"agent_id": agent_id, "role": role}, tx=tx)

    def remove_member(self, team_id: str, agent_id: str, actor: str = "") -> None:
        """Remove a member; the leader cannot be removed, a non-member is an error."""
        with self.db.write() as tx:
            row = tx.one("SELECT status, leader_id FROM teams WHERE id = ?", (team_id,))
            if row is None:
                raise StoreError(f"team not found: {team_id}")
            if row[0] != "active":
                raise StoreError(f"team '{team_id}' is disbanded; members cannot be removed")
            if row[1] == agent_id:
                raise StoreError(f"'{agent_id}' leads team '{team_id}' and cannot be removed")
            gone = tx.execute(
                "DELETE FROM team_members WHERE team_id = ? AND agent_id = ? RETURNING agent_id", (team_id, agent_id)
            )
            if not gone:
                raise StoreError(f"agent '{agent_id}' is not a member of team '{team_id}'")
            self.add_event(team_id, "member_removed", actor, {"agent_id": agent_id}, tx=tx)

    # -- mail -------------------------------------------------------------------------------------------

    def send_message(
        self,
        *,
        team_id: str,
        from_agent: str,
        recipients: Sequence[tuple[str, str]],
        subject: str,
        content: str,
        msg_type: str = "message",
        reply_to: str | None = None,
        attachments: Sequence[str] = (),
        ttl_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Deliver one message to (agent, role) recipients atomically; a reply joins its parent's thread.

        Protocol messages are checked here, where every sender passes: a leader's decisions
        (``plan_approved``, ``shutdown_approved``, ...) come from the team's leader only.
        """
        if not recipients:
            raise StoreError("message_send: at least one recipient (to or cc) is required")
        message_id = new_id()
        ts = now()
        with self.db.write() as tx:
            leader = tx.one("SELECT leader_id FROM teams WHERE id = ?", (team_id,))
            if leader is None:
                raise StoreError(f"team not found: {team_id}")
            check_protocol(msg_type, from_agent, leader[0], [a for a, _ in recipients])
            thread_id = None
            if reply_to:
                parent = tx.one(
                    "SELECT id, thread_id FROM team_messages WHERE id = ? AND team_id = ?", (reply_to, team_id)
                )
                if parent is None:
                    raise StoreError(f"reply_to names message '{reply_to}', which is not in this team")
                thread_id = parent[1] or parent[0]
            rows = tx.execute(
                "INSERT INTO team_messages (id, team_id, from_agent, msg_type, subject, content, reply_to, thread_id, "
                "attachments, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING seq",
                (
                    message_id,
                    team_id,
                    from_agent,
                    msg_type,
                    subject,
                    content,
                    reply_to,
                    thread_id,
                    dumps(list(attachments)),
                    ts,
                    ts + ttl_seconds if ttl_seconds else None,
                ),
            )
            seq = rows[0][0]
            for agent_id, role in recipients:
                tx.execute(
                    "INSERT INTO message_recipients (message_seq, team_id, agent_id, role) VALUES (?,?,?,?) "
                    "ON CONFLICT (message_seq, agent_id) DO NOTHING",
                    (seq, team_id, agent_id, role),
                )
        return {"message_id": message_id, "thread_id": thread_id, "seq": seq}

    def _messages(self, tx: Tx, where: str, params: Sequence[Any], limit: int) -> list[dict[str, Any]]:
        rows = tx.execute(
            f"SELECT {_MSG_COLS}, r.role, r.read_at FROM team_messages m "
            f"LEFT JOIN message_recipients r ON r.message_seq = m.seq AND r.agent_id = ? "
            f"WHERE {where} ORDER BY m.seq LIMIT ?",
            [*params, limit],
        )
        keys = (
            "seq",
            "id",
            "team_id",
            "from_agent",
            "msg_type",
            "subject",
            "content",
            "reply_to",
            "thread_id",
            "attachments",
            "created_at",
            "expires_at",
            "role",
            "read_at",
        )
        out = []
        for r in rows:
            msg = dict(zip(keys, r, strict=True))
            msg["attachments"] = loads(msg["attachments"], [])
            out.append(msg)
        return out

    def inbox(
        self, team_id: str, agent_id: str, *, msg_type: str | None = None, mark_read: bool = True, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Unread, unexpired messages for ``agent_id`` in order; marked read in the same transaction."""
        ts = now()
        where = "r.team_id = ? AND r.agent_id = ? AND r.read_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > ?)"
        params: list[Any] = [agent_id, team_id, agent_id, ts]
        if msg_type:
            where += " AND m.msg_type = ?"
            params.append(msg_type)
        with self.db.write() if mark_read else self.db.read() as tx:
            messages = self._messages(tx, where, params, limit)
            if mark_read and messages:
                seqs = [m["seq"] for m in messages]
                marks = ",".join("?" * len(seqs))
                tx.execute(
                    f"UPDATE message_recipients SET read_at = ? WHERE agent_id = ? AND message_seq IN ({marks})",
                    [ts, agent_id, *seqs],
                )
        return messages

    def thread(self, team_id: str, thread_id: str, agent_id: str, limit: int = 500) -> list[dict[str, Any]]:
        """The messages of a thread (the root and its replies) that ``agent_id`` sent or received, in order.

        A message between two other members is not part of a third member's thread.
        """
        with self.db.read() as tx:
            return self._messages(
                tx,
                "m.team_id = ? AND (m.id = ? OR m.thread_id = ?) AND (m.from_agent = ? OR r.agent_id IS NOT NULL)",
                [agent_id, team_id, thread_id, thread_id, agent_id],
                limit,
            )

    def unread_counts(self, team_id: str, agent_id: str) -> dict[str, int]:
        """Unread messages addressed to ``agent_id``, by role."""
        with self.db.read() as tx:
            rows = tx.execute(
                "SELECT r.role, COUNT(*) FROM message_recipients r JOIN team_messages m ON m.seq = r.message_seq "
                "WHERE r.team_id = ? AND r.agent_id = ? AND r.read_at IS NULL AND (m.expires_at IS NULL OR "
                "m.expires_at > ?) "
                "GROUP BY r.role",
                (team_id, agent_id, now()),
            )
        counts = {"to": 0, "cc": 0}
        counts.update({role: int(n) for role, n in rows})
        return counts

    def get_message(self, team_id: str, message_id: str) -> dict[str, Any] | None:
        """One message of the team, or None."""
        with self.db.read() as tx:
            found = self._messages(tx, "m.team_id = ? AND m.id = ?", ["", team_id, message_id], 1)
        return found[0] if found else None

    # -- events, usage, snapshots ---------------------------------------------------------------------

    def add_event(self, team_id: str, event_type: str, agent_id: str, payload: dict[str, Any], tx: Tx) -> None:
        """Append to the team's event log (inside the caller's transaction)."""
        tx.execute(
            "INSERT INTO team_events (team_id, event_type, agent_id, payload, created_at) VALUES (?,?,?,?,?)",
            (team_id, event_type, agent_id, dumps(payload), now()),
        )

    def log_event(self, team_id: str, event_type: str, agent_id: str, payload: dict[str, Any]) -> None:
        """Append one event in its own transaction."""
        with self.db.write() as tx:
            self.add_event(team_id, event_type, agent_id, payload, tx)

    def events(self, team_id: str, since: float, until: float, limit: int = 1000) -> list[dict[str, Any]]:
        """The team's events in [since, until], oldest first."""
        with self.db.read() as tx:
            rows = tx.execute(
                "SELECT event_type, agent_id, payload, created_at FROM team_events WHERE team_id = ? "
                "AND created_at >= ? AND created_at <= ? ORDER BY seq LIMIT ?",
                (team_id, since, until, limit),
            )
        return [{"event_type": r[0], "agent_id": r[1], "payload": loads(r[2], {}), "created_at": r[3]} for r in rows]

    def add_usage(
        self,
        team_id: str,
        agent_id: str,
        task_id: str | None,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        calls: int = 0,
    ) -> None:
        """Record usage the host reported for a member (and task)."""
        with self.db.write() as tx:
            tx.execute(
                "INSERT INTO team_usage (team_id, agent_id, task_id, input_tokens, output_tokens, cost, calls, "
                "created_at) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (team_id, agent_id, task_id, input_tokens, output_tokens, cost, calls, now()),
            )

    def usage(self, team_id: str, since: float | None, until: float | None) -> list[dict[str, Any]]:
        """Usage per agent of the team in [since, until]."""
        with self.db.read() as tx:
            rows = tx.execute(
                "SELECT agent_id, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost), SUM(calls) FROM "
                "team_usage "
                "WHERE team_id = ? AND created_at >= ? AND created_at <= ? GROUP BY agent_id ORDER BY agent_id",
                (team_id, since or 0.0, until if until is not None else 1e18),
            )
        return [
            {
                "agent_id": r[0],
                "reports": int(r[1]),
                "input_tokens": int(r[2] or 0),
                "output_tokens": int(r[3] or 0),
                "cost": float(r[4] or 0),
                "tool_calls": int(r[5] or 0),
            }
            for r in rows
        ]

    def save_snapshot(self, team_id: str, tag: str | None, note: str | None, payload: dict[str, Any]) -> dict[str, Any]:
        """Store a snapshot; its metadata."""
        text = dumps(payload)
        meta = {
            "snapshot_id": new_id(),
            "team_id": team_id,
            "tag": tag,
            "note": note,
            "created_at": now(),
            "size_bytes": len(text.encode()),
        }
        with self.db.write() as tx:
            tx.execute(
                "INSERT INTO team_snapshots (id, team_id, tag, note, created_at, size_bytes, payload) VALUES "
                "(?,?,?,?,?,?,?)",
                (meta["snapshot_id"], team_id, tag, note, meta["created_at"], meta["size_bytes"], text),
            )
        return meta

    def snapshots(self, team_id: str) -> list[dict[str, Any]]:
        """Snapshot metadata of a team, newest first."""
        with self.db.read() as tx:
            rows = tx.execute(
                "SELECT id, team_id, tag, note, created_at, size_bytes FROM team_snapshots WHERE team_id = ? "
                "ORDER BY created_at DESC",
                (team_id,),
            )
        return [
            dict(zip(("snapshot_id", "team_id", "tag", "note", "created_at", "size_bytes"), r, strict=True))
            for r in rows
        ]

    def get_snapshot(self, snapshot_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(metadata, payload) of a snapshot, or None."""
        with self.db.read() as tx:
            r = tx.one(
                "SELECT id, team_id, tag, note, created_at, size_bytes, payload FROM team_snapshots WHERE id = ?",
                (snapshot_id,),
            )
        if r is None:
            return None
        keys = ("snapshot_id", "team_id", "tag", "note", "created_at", "size_bytes")
        return dict(zip(keys, r[:6], strict=True)), loads(r[6], {})

    def delete_snapshot(self, snapshot_id: str) -> bool:
        """Delete a snapshot; whether a row was removed."""
        with self.db.write() as tx:
            return bool(tx.execute("DELETE FROM team_snapshots WHERE id = ? RETURNING id", (snapshot_id,)))

    def member_ids(self, team_id: str) -> list[str]:
        """Agent ids of the team's members (leader included)."""
        team = self.get_team(team_id)
        return [m["agent_id"] for m in team["members"]] if team else []

    def team_tasks(self, team_id: str) -> list[dict[str, Any]]:
        """Every task of the team."""
        return self.list_tasks(team_id=team_id, limit=100_000)

    def bulk(self) -> Any:
        """A write transaction for several store calls at once (pass it as ``tx=``)."""
        return self.db.write()


def _blocking(db: Database) -> bool:
    return db.dialect == "postgres"
