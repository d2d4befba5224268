"""Tasks: the coordination DAG, its state machine, runs, comments, artifacts and budget reservations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from aleph_teams._store._common import (
    PRIORITIES,
    PRIORITY_ORDER,
    SATISFYING,
    SETTABLE,
    TERMINAL,
    StoreError,
    dumps,
    loads,
    merge_patch,
    new_id,
    now,
)
from aleph_teams._store._db import Database, Tx

__all__ = ["TaskStore"]

_TASK_COLS = (
    "id, team_id, subject, description, status, owner, priority, result, metadata, budget, "
    "used_calls, used_tokens, used_cost, steps, created_at, started_at, completed_at, locked_by, locked_at, "
    "created_by, acting_for"
)
_BUDGET_KEYS = ("calls", "wall_seconds", "tokens", "cost")


def _task(row: tuple[Any, ...]) -> dict[str, Any]:
    keys = [k.strip() for k in _TASK_COLS.split(",")]
    task = dict(zip(keys, row, strict=True))
    task["metadata"] = loads(task["metadata"], {})
    task["budget"] = loads(task["budget"], {})
    task["stored_status"] = task["status"]
    return task


def check_budget(budget: dict[str, Any] | None, what: str) -> dict[str, Any]:
    """A validated budget mapping (keys calls, wall_seconds, tokens, cost; numbers >= 0)."""
    if not budget:
        return {}
    out: dict[str, Any] = {}
    for key, value in budget.items():
        if key not in _BUDGET_KEYS:
            raise StoreError(f"{what} budget: unknown key {key!r} (expected one of: {', '.join(_BUDGET_KEYS)})")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise StoreError(f"{what} budget: {key} must be a number >= 0, got {value!r}")
        out[key] = int(value) if key in ("calls", "tokens") else float(value)
    return out


class TaskStore:
    """Task operations; mixed into :class:`~aleph_teams._store.TeamStore`."""

    db: Database

    # -- reading ------------------------------------------------------------------------------------

    def _derive(self, tx: Tx, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Fill ``dependencies`` and the derived status (blocked / unsatisfiable) of each task."""
        if not tasks:
            return tasks
        by_id = {t["id"]: t for t in tasks}
        for t in tasks:
            t["dependencies"] = []
        ids = list(by_id)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = tx.execute(
                f"SELECT d.task_id, d.depends_on, t.status FROM task_dependencies d "
                f"JOIN tasks t ON t.id = d.depends_on WHERE d.task_id IN ({marks}) ORDER BY d.depends_on",
                chunk,
            )
            for task_id, dep, dep_status in rows:
                task = by_id[task_id]
                task["dependencies"].append(dep)
                task.setdefault("_dep_status", []).append(dep_status)
        for t in tasks:
            statuses = t.pop("_dep_status", [])
            if t["status"] == "pending" and statuses:
                if any(s in ("failed", "cancelled") for s in statuses):
                    t["status"] = "unsatisfiable"
                elif any(s not in SATISFYING for s in statuses):
                    t["status"] = "blocked"
            t["blocked_by"] = [d for d, s in zip(t["dependencies"], statuses, strict=True) if s not in SATISFYING]
        return tasks

    def get_task(self, task_id: str, tx: Tx | None = None) -> dict[str, Any] | None:
        """The task with its dependencies and derived status, or None."""
        if tx is None:
            with self.db.read() as rtx:
                return self.get_task(task_id, rtx)
        row = tx.one(f"SELECT {_TASK_COLS} FROM tasks WHERE id = ?", (task_id,))
        return self._derive(tx, [_task(row)])[0] if row else None

    def get_tasks(self, task_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The tasks that exist among ``task_ids`` (in the order asked)."""
        with self.db.read() as tx:
            found = {}
            for start in range(0, len(task_ids), 500):
                chunk = list(task_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for row in tx.execute(f"SELECT {_TASK_COLS} FROM tasks WHERE id IN ({marks})", chunk):
                    found[row[0]] = _task(row)
            tasks = self._derive(tx, list(found.values()))
        by_id = {t["id"]: t for t in tasks}
        return [by_id[i] for i in task_ids if i in by_id]

    def list_tasks(
        self, *, team_id: str | None = None, status: str | None = None, owner: str | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Tasks by priority (critical first), then oldest first; ``status`` may be a derived one."""
        where, params = [], []
        if team_id is not None:
            where.append("team_id = ?")
            params.append(team_id)
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        if status in SETTABLE and status != "pending":
            where.append("status = ?")
            params.append(status)
        elif status in ("pending", "blocked", "unsatisfiable"):
            where.append("status = 'pending'")
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {_TASK_COLS} FROM tasks {clause} ORDER BY {PRIORITY_ORDER}, created_at, id LIMIT ?",
                [*params, limit],
            )
            tasks = self._derive(tx, [_task(r) for r in rows])
        if status in ("pending", "blocked", "unsatisfiable"):
            tasks = [t for t in tasks if t["status"] == status]
        return tasks

    # -- writing ------------------------------------------------------------------------------------

    def create_task(
        self,
        *,
        subject: str,
        description: str = "",
        team_id: str | None = None,
        owner: str | None = None,
        blocked_by: Iterable[str] = (),
        priority: str = "normal",
        metadata: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
        status: str = "pending",
        task_id: str | None = None,
        created_by: str = "",
        acting_for: str = "[]",
        tx: Tx | None = None,
    ) -> dict[str, Any]:
        """Create a task; dependencies must exist (so no cycle can form) and a budget must fit its owner's pool.

        ``created_by`` is the principal that asked for it: a task without a team is reachable by its creator
        and its owner only. ``acting_for`` is the creator's chain (``aleph_teams._acting``): the task runs as
        its owner acting for it.
        """
        if tx is None:
            with self.db.write() as wtx:
                return self.create_task(
                    subject=subject,
                    description=description,
                    team_id=team_id,
                    owner=owner,
                    blocked_by=blocked_by,
                    priority=priority,
                    metadata=metadata,
                    budget=budget,
                    status=status,
                    task_id=task_id,
                    created_by=created_by,
                    acting_for=acting_for,
                    tx=wtx,
                )
        if not subject.strip():
            raise StoreError("a task needs a non-empty subject")
        if priority not in PRIORITIES:
            raise StoreError(f"unknown priority '{priority}' (expected low|normal|high|critical)")
        if status not in SETTABLE:
            raise StoreError(f"unknown status '{status}'")
        budget = check_budget(budget, "task")
        task_id = task_id or new_id()
        deps = list(dict.fromkeys(blocked_by))
        if task_id in deps:
            raise StoreError("a task cannot depend on itself (dependency cycle)")
        for dep in deps:
            dep_team = tx.one("SELECT team_id FROM tasks WHERE id = ?", (dep,))
            if dep_team is None or (team_id is not None and dep_team[0] not in (team_id, None)):
                raise StoreError(f"blocked_by names task '{dep}', which does not exist in this team")
        if budget and owner is not None and team_id is not None:
            self._reserve_for_task(tx, team_id, owner, budget, subject)
        ts = now()
        tx.execute(
            "INSERT INTO tasks (id, team_id, subject, description, status, owner, priority, metadata, budget, "
            "created_at, started_at, created_by, acting_for) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                task_id,
                team_id,
                subject,
                description,
                status,
                owner,
                priority,
                dumps(metadata or {}),
                dumps(budget),
                ts,
                ts if status == "in_progress" else None,
                created_by or owner or "",
                acting_for,
            ),
        )
        for dep in deps:
            tx.execute("INSERT INTO task_dependencies (task_id, depends_on) VALUES (?, ?)", (task_id, dep))
        if team_id is not None:
            self.add_event(team_id, "task_created", owner or "", {"task_id": task_id, "subject": subject}, tx=tx)
        task = self.get_task(task_id, tx)
        assert task is not None
        return task

    def _reserve_for_task(self, tx: Tx, team_id: str, owner: str, budget: dict[str, Any], subject: str) -> None:
        """Refuse a task budget that does not fit in what its owner's pool has left (unfinished tasks hold theirs)."""
        member = tx.one(
            f"SELECT budget FROM team_members WHERE team_id = ? AND agent_id = ?{tx.for_update}", (team_id, owner)
        )
        pool = loads(member[0], {}) if member else {}
        if not pool:
            return
        rows = tx.execute(
            "SELECT status, budget, used_calls, used_tokens, used_cost FROM tasks WHERE team_id = ? AND owner = ?",
            (team_id, owner),
        )
        used = {"calls": 0.0, "tokens": 0.0, "cost": 0.0}
        for status, task_budget, calls, tokens, cost in rows:
            held = loads(task_budget, {})
            spent = {"calls": calls, "tokens": tokens, "cost": cost}
            for dim in used:
                # an unfinished task holds its whole reservation; a finished one only what it spent
                used[dim] += spent[dim] if status in TERMINAL or dim not in held else max(held[dim], spent[dim])
        for dim, amount in budget.items():
            if dim in pool and dim in used and used[dim] + amount > pool[dim]:
                raise StoreError(
                    f"task '{subject}' asks for {amount:g} {dim} but member '{owner}' has only "
                    f"{max(0, pool[dim] - used[dim]):g} left of {pool[dim]:g}"
                )

    def update_task(
        self,
        task_id: str,
        *,
        status: str | None = None,
        owner: str | None = None,
        result: str | None = None,
        metadata: dict[str, Any] | None = None,
        clear_result: bool = False,
        only_if: Iterable[str] | None = None,
        actor: str = "",
        tx: Tx | None = None,
    ) -> dict[str, Any] | None:
        """Apply a change (metadata is a merge patch); None when the task is missing or not in ``only_if``."""
        if tx is None:
            with self.db.write() as wtx:
                return self.update_task(
                    task_id,
                    status=status,
                    owner=owner,
                    result=result,
                    metadata=metadata,
                    clear_result=clear_result,
                    only_if=only_if,
                    actor=actor,
                    tx=wtx,
                )
        row = tx.one(f"SELECT {_TASK_COLS} FROM tasks WHERE id = ?{tx.for_update}", (task_id,))
        if row is None:
            return None
        current = _task(row)
        if only_if is not None and current["status"] not in set(only_if):
            return None
        if status in ("blocked", "unsatisfiable"):
            status = "pending"  # derived statuses store as pending
        if status is not None and status not in SETTABLE:
            raise StoreError(f"unknown status '{status}'")
        sets, params = [], []
        if status is not None and status != current["status"]:
            sets.append("status = ?")
            params.append(status)
            if status == "in_progress":
                sets.append("started_at = ?")
                params.append(now())
            if status == "completed":
                sets.append("completed_at = ?")
                params.append(now())
        if owner is not None:
            sets.append("owner = ?")
            params.append(owner)
        if result is not None or clear_result:
            sets.append("result = ?")
            params.append(result if result is not None else "")
        if metadata:
            sets.append("metadata = ?")
            params.append(dumps(merge_patch(current["metadata"], metadata)))
        if sets:
            tx.execute(f"UPDATE tasks SET {', '.join(sets)} WHERE id = ?", [*params, task_id])
            if current["team_id"]:
                verb = "task_updated"
                if status is not None and status != current["status"] and status in ("completed", "failed"):
                    verb = f"task_{status}"
                payload = {"task_id": task_id, "status": status or current["status"]}
                self.add_event(current["team_id"], verb, actor, payload, tx=tx)
        return self.get_task(task_id, tx)

    def claim_task(self, task_id: str, worker: str, *, tx: Tx | None = None) -> dict[str, Any] | None:
        """Move a pending task to in_progress under ``worker``'s lock; None if someone else has it."""
        with self.db.write() if tx is None else _same(tx) as wtx:
            ts = now()
            rows = wtx.execute(
                "UPDATE tasks SET status = 'in_progress', started_at = ?, locked_by = ?, locked_at = ? "
                "WHERE id = ? AND status = 'pending' RETURNING id",
                (ts, worker, ts, task_id),
            )
            return self.get_task(task_id, wtx) if rows else None

    def take_over(self, task_id: str, worker: str, alive: Any) -> dict[str, Any] | None:
        """Take an in_progress task whose lock holder is dead (``alive(lock) is False``) — a crash orphan."""
        with self.db.write() as tx:
            row = tx.one(f"SELECT status, locked_by FROM tasks WHERE id = ?{tx.for_update}", (task_id,))
            if row is None or row[0] != "in_progress" or (row[1] and alive(row[1]) is not False):
                return None
            tx.execute("UPDATE tasks SET locked_by = ?, locked_at = ? WHERE id = ?", (worker, now(), task_id))
            tx.execute(
                "UPDATE task_runs SET status = 'abandoned', ended_at = ? WHERE task_id = ? AND status = 'running'",
                (now(), task_id),
            )
            return self.get_task(task_id, tx)

    def next_step(self, task_id: str) -> int:
        """Reserve the next step number of a task (steps name its idempotency keys)."""
        with self.db.write() as tx:
            rows = tx.execute("UPDATE tasks SET steps = steps + 1 WHERE id = ? RETURNING steps", (task_id,))
            if not rows:
                raise StoreError(f"task '{task_id}' not found")
            return int(rows[0][0])

    def add_task_usage(self, task_id: str, *, calls: int = 0, tokens: int = 0, cost: float = 0.0) -> None:
        """Add what a run of the task spent (persisted per call, so a crash loses no accounting)."""
        with self.db.write() as tx:
            tx.execute(
                "UPDATE tasks SET used_calls = used_calls + ?, used_tokens = used_tokens + ?, "
                "used_cost = used_cost + ? WHERE id = ?",
                (calls, tokens, cost, task_id),
            )

    # -- runs, comments, artifacts --------------------------------------------------------------------

    def start_run(self, task_id: str, agent_id: str, runner: str, worker: str) -> str:
        """Open a run row; its id."""
        run_id = new_id()
        with self.db.write() as tx:
            tx.execute(
                "INSERT INTO task_runs (id, task_id, agent_id, runner, worker, started_at) VALUES (?,?,?,?,?,?)",
                (run_id, task_id, agent_id, runner, worker, now()),
            )
        return run_id

    def finish_run(self, run_id: str, status: str, *, summary: str | None = None, error: str | None = None) -> None:
        """Close a run: completed, failed, timeout, cancelled or abandoned."""
        with self.db.write() as tx:
            tx.execute(
                "UPDATE task_runs SET status = ?, ended_at = ?, summary = ?, error = ? WHERE id = ?",
                (status, now(), summary, error, run_id),
            )

    def review_run(self, task_id: str, verdict: str, reviewer_kind: str, reviewer_id: str, tx: Tx) -> None:
        """Record a review verdict on the task's latest run (when it has one)."""
        row = tx.one("SELECT id FROM task_runs WHERE task_id = ? ORDER BY started_at DESC LIMIT 1", (task_id,))
        if row is not None:
            tx.execute(
                "UPDATE task_runs SET review_verdict = ?, reviewer_kind = ?, reviewer_id = ? WHERE id = ?",
                (verdict, reviewer_kind, reviewer_id, row[0]),
            )

    def runs(self, task_id: str) -> list[dict[str, Any]]:
        """The task's runs, oldest first."""
        keys = ("id", "agent_id", "runner", "worker", "started_at", "ended_at", "status", "summary", "error")
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {', '.join(keys)} FROM task_runs WHERE task_id = ? ORDER BY started_at", (task_id,)
            )
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def add_comment(self, task_id: str, author: str, body: str, tx: Tx | None = None) -> dict[str, Any]:
        """A permanent comment on the task."""
        comment = {"comment_id": new_id(), "task_id": task_id, "author": author, "created_at": now()}
        with self.db.write() if tx is None else _same(tx) as wtx:
            wtx.execute(
                "INSERT INTO task_comments (id, task_id, author, body, created_at) VALUES (?,?,?,?,?)",
                (comment["comment_id"], task_id, author, body, comment["created_at"]),
            )
        return comment

    def comments(self, task_id: str) -> list[dict[str, Any]]:
        """The task's comments, oldest first."""
        with self.db.read() as tx:
            rows = tx.execute(
                "SELECT id, author, body, created_at FROM task_comments WHERE task_id = ? ORDER BY created_at, id",
                (task_id,),
            )
        return [{"id": r[0], "author": r[1], "body": r[2], "created_at": r[3]} for r in rows]

    def add_artifact(
        self,
        task_id: str,
        agent_id: str,
        artifact_type: str,
        title: str,
        content: str,
        metadata: Any = None,
        tx: Tx | None = None,
        team_id: str | None = None,
    ) -> str:
        """Store a deliverable for a task (``team_id``: the team of a plan that has no task yet); its id."""
        artifact_id = new_id()
        with self.db.write() if tx is None else _same(tx) as wtx:
            wtx.execute(
                "INSERT INTO task_artifacts (id, task_id, agent_id, artifact_type, title, content, metadata, "
                "created_at, team_id) VALUES (?,?,?,?,?,?,?,?,?)",
                (artifact_id, task_id, agent_id, artifact_type, title, content, dumps(metadata), now(), team_id),
            )
        return artifact_id

    def artifacts(self, task_id: str, artifact_id: str | None = None) -> list[dict[str, Any]]:
        """Artifacts of a task (oldest first), or the one named if it belongs to that task."""
        keys = (
            "id",
            "task_id",
            "agent_id",
            "artifact_type",
            "title",
            "content",
            "status",
            "metadata",
            "created_at",
            "team_id",
        )
        with self.db.read() as tx:
            if artifact_id is not None:
                rows = tx.execute(
                    f"SELECT {', '.join(keys)} FROM task_artifacts WHERE id = ? AND task_id = ?", (artifact_id, task_id)
                )
            else:
                rows = tx.execute(
                    f"SELECT {', '.join(keys)} FROM task_artifacts WHERE task_id = ? ORDER BY created_at, id",
                    (task_id,),
                )
        out = []
        for r in rows:
            item = dict(zip(keys, r, strict=True))
            item["metadata"] = loads(item["metadata"])
            out.append(item)
        return out

    def dependents_freed(self, task_id: str) -> list[str]:
        """Subjects of tasks that depend on ``task_id`` and have no unmet dependency left."""
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {_TASK_COLS} FROM tasks WHERE id IN (SELECT task_id FROM task_dependencies WHERE "
                f"depends_on = ?)",
                (task_id,),
            )
            tasks = self._derive(tx, [_task(r) for r in rows])
        return [t["subject"] for t in tasks if t["status"] == "pending"]

    # Provided by TeamStore.
    def add_event(self, team_id: str, event_type: str, agent_id: str, payload: dict[str, Any], tx: Tx) -> None:
        raise NotImplementedError


class _same:
    """Use an already open transaction as a context manager (no nested commit)."""

    def __init__(self, tx: Tx) -> None:
        self.tx = tx

    def __enter__(self) -> Tx:
        return self.tx

    def __exit__(self, *exc: object) -> None:
        return None
