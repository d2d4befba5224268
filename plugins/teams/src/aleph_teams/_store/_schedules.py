"""Workflow templates and runs, cron jobs, heartbeats, and the scheduler's run claims."""

from __future__ import annotations

from typing import Any

from aleph_teams._store._common import StoreError, dumps, loads, new_id, now
from aleph_teams._store._db import Database

__all__ = ["ScheduleStore"]

_CRON_COLS = (
    "id, name, prompt, schedule, agent_id, enabled, missed, next_run, running_until, run_count, last_run_at, "
    "last_status, last_error, run_requested, source_channel_id, source_conversation_id, created_at, updated_at, "
    "created_by, acting_for"
)
_HB_COLS = (
    "id, name, agent_id, enabled, interval_ms, probe, next_run, running_until, last_probe_at, last_probe_result, "
    "last_l2_at, last_l2_status, consecutive_errors, last_error, created_at, updated_at, created_by, acting_for"
)


def _cron(row: tuple[Any, ...]) -> dict[str, Any]:
    job = dict(zip([k.strip() for k in _CRON_COLS.split(",")], row, strict=True))
    job["schedule"] = loads(job["schedule"], {})
    job["enabled"] = bool(job["enabled"])
    job["run_requested"] = bool(job["run_requested"])
    return job


def _hb(row: tuple[Any, ...]) -> dict[str, Any]:
    task = dict(zip([k.strip() for k in _HB_COLS.split(",")], row, strict=True))
    task["probe"] = loads(task["probe"], {})
    task["enabled"] = bool(task["enabled"])
    return task


class _Busy(Exception):
    """Rolls a claim back: the job is leased by another scheduler."""


class ScheduleStore:
    """Schedule operations; mixed into :class:`~aleph_teams._store.TeamStore`."""

    db: Database

    # -- workflows ------------------------------------------------------------------------------------

    def save_workflow(self, owner: str, name: str, definition: dict[str, Any]) -> None:
        """Insert or replace ``owner``'s workflow template ``name`` (each principal has its own names)."""
        with self.db.write() as tx:
            tx.execute(
                "INSERT INTO workflows (owner, name, definition, updated_at) VALUES (?,?,?,?) "
                "ON CONFLICT (owner, name) DO UPDATE SET definition = excluded.definition, "
                "updated_at = excluded.updated_at",
                (owner, name, dumps(definition), now()),
            )

    def get_workflow(self, owner: str, name: str) -> dict[str, Any] | None:
        """``owner``'s workflow template, or None."""
        with self.db.read() as tx:
            row = tx.one("SELECT definition FROM workflows WHERE owner = ? AND name = ?", (owner, name))
        return loads(row[0]) if row else None

    def list_workflows(self, owner: str) -> list[dict[str, Any]]:
        """``owner``'s templates, by name."""
        with self.db.read() as tx:
            rows = tx.execute("SELECT definition FROM workflows WHERE owner = ? ORDER BY name", (owner,))
        return [loads(r[0]) for r in rows]

    def delete_workflow(self, owner: str, name: str) -> bool:
        """Delete ``owner``'s template; whether it existed."""
        with self.db.write() as tx:
            return bool(tx.execute("DELETE FROM workflows WHERE owner = ? AND name = ? RETURNING name", (owner, name)))

    def add_workflow_run(self, run_id: str, name: str, team_id: str, steps: dict[str, str], tx: Any) -> None:
        """Record which task runs each step of a workflow run (inside the caller's transaction)."""
        tx.execute(
            "INSERT INTO workflow_runs (run_id, name, team_id, steps, created_at) VALUES (?,?,?,?,?)",
            (run_id, name, team_id, dumps(steps), now()),
        )

    def workflow_run(self, name: str, team_id: str, run_id: str | None) -> dict[str, Any] | None:
        """A run (default: the latest of ``name`` in the team) as ``{run_id, steps: {step: task_id}}``."""
        with self.db.read() as tx:
            if run_id:
                row = tx.one(
                    "SELECT run_id, steps FROM workflow_runs WHERE run_id = ? AND name = ? AND team_id = ?",
                    (run_id, name, team_id),
                )
            else:
                row = tx.one(
                    "SELECT run_id, steps FROM workflow_runs WHERE name = ? AND team_id = ? ORDER BY created_at "
                    "DESC LIMIT 1",
                    (name, team_id),
                )
        return {"run_id": row[0], "steps": loads(row[1], {})} if row else None

    # -- cron jobs ------------------------------------------------------------------------------------

    def create_cron(self, job: dict[str, Any]) -> dict[str, Any]:
        """Persist a validated cron job (``next_run`` already computed)."""
        ts = now()
        job_id = new_id()
        with self.db.write() as tx:
            tx.execute(
                "INSERT INTO cron_jobs (id, name, prompt, schedule, agent_id, enabled, missed, next_run, "
                "source_channel_id, source_conversation_id, created_at, updated_at, created_by, acting_for) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    job_id,
                    job["name"],
                    job["prompt"],
                    dumps(job["schedule"]),
                    job["agent_id"],
                    1,
                    job["missed"],
                    job["next_run"],
                    job.get("source_channel_id"),
                    job.get("source_conversation_id"),
                    ts,
                    ts,
                    job["created_by"],
                    job.get("acting_for", "[]"),
                ),
            )
        found = self.get_cron(job_id)
        assert found is not None
        return found

    def get_cron(self, job_id: str) -> dict[str, Any] | None:
        """A cron job, or None."""
        with self.db.read() as tx:
            row = tx.one(f"SELECT {_CRON_COLS} FROM cron_jobs WHERE id = ?", (job_id,))
        return _cron(row) if row else None

    def list_cron(self) -> list[dict[str, Any]]:
        """Every cron job, oldest first."""
        with self.db.read() as tx:
            return [_cron(r) for r in tx.execute(f"SELECT {_CRON_COLS} FROM cron_jobs ORDER BY created_at, id")]

    def update_cron(self, job_id: str, **fields: Any) -> dict[str, Any] | None:
        """Change columns of a cron job; the job after, or None if missing."""
        allowed = {"name", "prompt", "schedule", "agent_id", "enabled", "missed", "next_run", "run_requested"}
        bad = set(fields) - allowed
        if bad:
            raise StoreError(f"cannot update {sorted(bad)}")
        if not fields:
            return self.get_cron(job_id)
        values = [dumps(v) if k == "schedule" else int(v) if isinstance(v, bool) else v for k, v in fields.items()]
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.db.write() as tx:
            if not tx.execute(
                f"UPDATE cron_jobs SET {sets}, updated_at = ? WHERE id = ? RETURNING id", [*values, now(), job_id]
            ):
                return None
        return self.get_cron(job_id)

    def delete_cron(self, job_id: str) -> bool:
        """Delete a cron job; whether it existed."""
        with self.db.write() as tx:
            return bool(tx.execute("DELETE FROM cron_jobs WHERE id = ? RETURNING id", (job_id,)))

    # -- heartbeats -----------------------------------------------------------------------------------

    def create_heartbeat(self, task: dict[str, Any]) -> dict[str, Any]:
        """Persist a validated heartbeat task."""
        ts = now()
        task_id = new_id()
        with self.db.write() as tx:
            tx.execute(
                "INSERT INTO heartbeats (id, name, agent_id, enabled, interval_ms, probe, next_run, created_at, "
                "updated_at, created_by, acting_for) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    task_id,
                    task["name"],
                    task["agent_id"],
                    1,
                    task["interval_ms"],
                    dumps(task["probe"]),
                    ts + task["interval_ms"] / 1000,
                    ts,
                    ts,
                    task["created_by"],
                    task.get("acting_for", "[]"),
                ),
            )
        found = self.get_heartbeat(task_id)
        assert found is not None
        return found

    def get_heartbeat(self, task_id: str) -> dict[str, Any] | None:
        """A heartbeat task, or None."""
        with self.db.read() as tx:
            row = tx.one(f"SELECT {_HB_COLS} FROM heartbeats WHERE id = ?", (task_id,))
        return _hb(row) if row else None

    def list_heartbeats(self) -> list[dict[str, Any]]:
        """Every heartbeat task, oldest first."""
        with self.db.read() as tx:
            return [_hb(r) for r in tx.execute(f"SELECT {_HB_COLS} FROM heartbeats ORDER BY created_at, id")]

    def update_heartbeat(self, task_id: str, **fields: Any) -> dict[str, Any] | None:
        """Change columns of a heartbeat; the task after, or None if missing."""
        allowed = {
            "name",
            "agent_id",
            "interval_ms",
            "enabled",
            "next_run",
            "last_probe_at",
            "last_probe_result",
            "last_l2_at",
            "last_l2_status",
            "consecutive_errors",
            "last_error",
        }
        bad = set(fields) - allowed
        if bad:
            raise StoreError(f"cannot update {sorted(bad)}")
        if not fields:
            return self.get_heartbeat(task_id)
        values = [int(v) if isinstance(v, bool) else v for v in fields.values()]
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.db.write() as tx:
            if not tx.execute(
                f"UPDATE heartbeats SET {sets}, updated_at = ? WHERE id = ? RETURNING id", [*values, now(), task_id]
            ):
                return None
        return self.get_heartbeat(task_id)

    def delete_heartbeat(self, task_id: str) -> bool:
        """Delete a heartbeat; whether it existed."""
        with self.db.write() as tx:
            return bool(tx.execute("DELETE FROM heartbeats WHERE id = ? RETURNING id", (task_id,)))

    # -- the scheduler's claims ----------------------------------------------------------------------

    def due(self, kind: str, at: float) -> list[dict[str, Any]]:
        """Enabled jobs of ``kind`` ("cron" | "heartbeat") due by ``at`` (or asked to run) and not running."""
        table, cols, conv = ("cron_jobs", _CRON_COLS, _cron) if kind == "cron" else ("heartbeats", _HB_COLS, _hb)
        extra = " OR run_requested = 1" if kind == "cron" else ""
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {cols} FROM {table} WHERE enabled = 1 AND ((next_run IS NOT NULL AND next_run <= ?){extra}) "
                "AND (running_until IS NULL OR running_until < ?) ORDER BY next_run",
                (at, at),
            )
        return [conv(r) for r in rows]

    def next_due(self) -> float | None:
        """The earliest next_run of any enabled job (None when nothing is scheduled)."""
        with self.db.read() as tx:
            a = tx.one("SELECT MIN(next_run) FROM cron_jobs WHERE enabled = 1")
            b = tx.one("SELECT MIN(next_run) FROM heartbeats WHERE enabled = 1")
            asked = tx.one("SELECT COUNT(*) FROM cron_jobs WHERE enabled = 1 AND run_requested = 1")
        if asked and asked[0]:
            return now()
        times = [t[0] for t in (a, b) if t and t[0] is not None]
        return min(times) if times else None

    def claim_run(self, kind: str, job_id: str, due_at: float, lease_s: float, next_run: float | None) -> str | None:
        """Claim one due run of a job (every scheduler process races; one wins); the run id, or None.

        The job's ``next_run`` moves on in the same transaction, and the run is unique per (job, due time),
        so a run is never started twice even by two schedulers on different hosts.
        """
        table = "cron_jobs" if kind == "cron" else "heartbeats"
        ts = now()
        run_id = new_id()
        extra = ", run_requested = 0" if kind == "cron" else ""
        try:
            with self.db.write() as tx:
                fresh = tx.execute(
                    "INSERT INTO schedule_runs (id, kind, job_id, due_at, started_at, status) VALUES (?,?,?,?,?,?) "
                    "ON CONFLICT (kind, job_id, due_at) DO NOTHING RETURNING id",
                    (run_id, kind, job_id, due_at, ts, "running"),
                )
                if not fresh:
                    return None  # this due time already ran (or runs) somewhere
                leased = tx.execute(
                    f"UPDATE {table} SET running_until = ?, next_run = ?{extra} WHERE id = ? AND enabled = 1 "
                    "AND (running_until IS NULL OR running_until < ?) RETURNING id",
                    (ts + lease_s, next_run, job_id, ts),
                )
                if not leased:
                    raise _Busy  # another scheduler holds the job: undo the run row too
        except _Busy:
            return None
        return run_id

    def finish_schedule_run(
        self, kind: str, job_id: str, run_id: str, status: str, output: str | None, error: str | None
    ) -> None:
        """Close a scheduled run and release the job's lease."""
        table = "cron_jobs" if kind == "cron" else "heartbeats"
        ts = now()
        with self.db.write() as tx:
            tx.execute(
                "UPDATE schedule_runs SET ended_at = ?, status = ?, output = ?, error = ? WHERE id = ?",
                (ts, status, output, error, run_id),
            )
            if kind == "cron":
                tx.execute(
                    "UPDATE cron_jobs SET running_until = NULL, run_count = run_count + 1, last_run_at = ?, "
                    "last_status = ?, last_error = ? WHERE id = ?",
                    (ts, status, error, job_id),
                )
            else:
                tx.execute(f"UPDATE {table} SET running_until = NULL WHERE id = ?", (job_id,))

    def schedule_runs(self, kind: str, job_id: str) -> list[dict[str, Any]]:
        """The runs of one job, oldest first."""
        keys = ("id", "due_at", "started_at", "ended_at", "status", "output", "error")
        with self.db.read() as tx:
            rows = tx.execute(
                f"SELECT {', '.join(keys)} FROM schedule_runs WHERE kind = ? AND job_id = ? ORDER BY due_at",
                (kind, job_id),
            )
        return [dict(zip(keys, r, strict=True)) for r in rows]
