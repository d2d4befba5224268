"""Background services: the dispatcher (runs ready tasks, resumes crash orphans) and the scheduler.

Both run inside ``aleph serve`` (through ``PluginContext.add_service``) or ``aleph scheduler``. Neither
polls: each sleeps until the store changes (here or in another process) or its next deadline.
A scheduled run is an unattended turn through the chokepoint: it never waits for a human, and a call
that would need one is refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from aleph import ToolError, TurnContext
from aleph_teams._acting import run_as
from aleph_teams._member import TeamsHost, worker_alive
from aleph_teams._tools._schedule import next_run

__all__ = ["Dispatcher", "Scheduler", "triggered"]

log = logging.getLogger("aleph.teams")
_STALE_S = 60.0
"""A due time older than this when the scheduler sees it was missed while no scheduler ran."""


class Dispatcher:
    """Runs managed tasks whose dependencies are met, on their owners' runners; resumes crash orphans."""

    def __init__(self, host: TeamsHost, *, concurrency: int = 8, idle_s: float = 30.0) -> None:
        self.host = host
        self.concurrency = concurrency
        self.idle_s = idle_s
        self._inflight: dict[str, asyncio.Task[Any]] = {}

    def ready(self) -> list[dict[str, Any]]:
        """Tasks this worker may start now: pending and unblocked, or in progress under a dead worker."""
        store = self.host.store
        out = []
        for task in store.list_tasks(status="pending", limit=500) + store.list_tasks(status="in_progress", limit=500):
            if task["id"] in self._inflight or not task["owner"] or task["metadata"].get("managed_by") != "aleph_teams":
                continue
            if task["status"] == "in_progress" and (
                not task["locked_by"] or worker_alive(task["locked_by"]) is not False
            ):
                continue
            out.append(task)
        return out

    async def run(self) -> None:
        """Dispatch until cancelled."""
        store = self.host.store
        try:
            while True:
                seen = store.version
                for task in self.ready():
                    if len(self._inflight) >= self.concurrency:
                        break
                    self._inflight[task["id"]] = asyncio.ensure_future(self._run_one(task))
                await store.wait_changed(seen, self.idle_s)
        finally:
            for job in self._inflight.values():
                job.cancel()
            await asyncio.gather(*self._inflight.values(), return_exceptions=True)

    async def _run_one(self, task: dict[str, Any]) -> None:
        try:
            timeout = float(task["metadata"].get("timeout_secs") or 300)
            outcome = await self.host.run_task(
                task["id"],
                timeout_seconds=timeout,
                review=bool(task["metadata"].get("lead_review_required")),
                unattended=True,
            )
            if outcome.status in ("failed", "timeout"):
                self._maybe_retry(task)
        except ToolError as exc:
            log.warning("task %s could not run: %s", task["id"], exc)
        except Exception:
            log.exception("task %s: the dispatcher failed", task["id"])
        finally:
            self._inflight.pop(task["id"], None)

    def _maybe_retry(self, task: dict[str, Any]) -> None:
        retries = task["metadata"].get("max_retries")
        if not isinstance(retries, int) or retries <= 0:
            return
        failures = sum(1 for r in self.host.store.runs(task["id"]) if r["status"] in ("failed", "timeout"))
        if failures <= retries:
            self.host.store.update_task(task["id"], status="pending", clear_result=True, only_if=["failed"])


def triggered(condition: Any, output: str, previous: str | None) -> bool:
    """Whether a heartbeat probe's output calls for the agent."""
    if condition in (None, "always"):
        return True
    if condition == "non_empty":
        return bool(output.strip()) and output.strip() not in ("null", "[]", "{}", '""')
    if condition == "changed":
        return output != previous
    if isinstance(condition, dict) and "greater_than" in condition:
        try:
            return float(json.loads(output)) > float(condition["greater_than"]["threshold"])
        except (ValueError, TypeError):
            return False
    if isinstance(condition, dict) and "contains" in condition:
        return str(condition["contains"]["text"]) in output
    return False


class Scheduler:
    """Runs due cron jobs and heartbeats; many schedulers may share one store (each run is claimed once)."""

    def __init__(self, host: TeamsHost) -> None:
        self.host = host
        self.config = host.config.scheduler

    async def run(self) -> None:
        """Schedule until cancelled."""
        store = self.host.store
        while True:
            seen = store.version
            now = time.time()
            for job in store.due("cron", now):
                await self._guarded(self.fire_cron(job, now))
            for beat in store.due("heartbeat", now):
                await self._guarded(self.fire_heartbeat(beat, now))
            nxt = store.next_due()
            idle = self.config.max_idle_seconds
            sleep = idle if nxt is None else min(idle, max(0.0, nxt - time.time()))
            await store.wait_changed(seen, sleep)

    async def _guarded(self, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("a scheduled run failed")

    def _due_times(self, job: dict[str, Any], now: float) -> list[float]:
        """The scheduled times from the job's next_run up to now (bounded), per the missed-run policy."""
        if job["run_requested"] and (job["next_run"] is None or job["next_run"] > now):
            return [now]
        times = [job["next_run"]]
        while len(times) <= self.config.max_catch_up:
            t = next_run(job["schedule"], times[-1])
            if t is None or t > now:
                break
            times.append(t)
        policy = job["missed"]
        if policy == "run_all":
            return times[-self.config.max_catch_up :]
        if policy == "skip":
            return [times[-1]] if now - times[-1] <= _STALE_S else []
        return [times[-1]]

    async def fire_cron(self, job: dict[str, Any], now: float) -> list[str]:
        """Run a due cron job (each due time at most once, across every scheduler); the run ids."""
        store = self.host.store
        after = next_run(job["schedule"], now) if job["schedule"]["type"] != "at" else None
        ran = []
        for due in self._due_times(job, now) or [None]:
            run_id = store.claim_run(
                "cron", job["id"], due if due is not None else job["next_run"], self.config.lease_seconds, after
            )
            if run_id is None or due is None:
                if run_id is not None:
                    store.finish_schedule_run(
                        "cron", job["id"], run_id, "skipped", None, "missed while no scheduler ran"
                    )
                continue
            ran.append(run_id)
            status, output, error = "ok", None, None
            try:
                task = store.create_task(
                    subject=job["name"],
                    description=job["prompt"],
                    owner=job["agent_id"],
                    metadata={"cron_job": job["id"], "schedule_run": run_id},
                    created_by=job["created_by"],
                    acting_for=job["acting_for"],
                )
                outcome = await self.host.run_task(
                    task["id"], timeout_seconds=self.config.lease_seconds, unattended=True
                )
                output = outcome.reply
                if outcome.status not in ("completed",):
                    status, error = "error", outcome.error or outcome.status
            except ToolError as exc:
                status, error = "error", str(exc)
                store.update_task(task["id"], status="failed", result=error, only_if=["pending", "in_progress"])
            store.finish_schedule_run("cron", job["id"], run_id, status, output, error)
        if job["schedule"]["type"] == "at":
            if job["schedule"].get("delete_after_run", True):
                store.delete_cron(job["id"])
            else:
                store.update_cron(job["id"], enabled=False, next_run=None)
        return ran

    async def fire_heartbeat(self, beat: dict[str, Any], now: float) -> str | None:
        """One beat: the probe call (unattended, as the heartbeat's agent), then the agent if it triggered."""
        store = self.host.store
        interval = beat["interval_ms"] / 1000
        due = beat["next_run"]
        following = due + interval * max(1, int((now - due) // interval) + 1)  # missed beats are never replayed
        run_id = store.claim_run("heartbeat", beat["id"], due, self.config.lease_seconds, following)
        if run_id is None:
            return None
        probe = beat["probe"]
        # the probe runs as the heartbeat's agent acting for whoever created it (never as the agent alone)
        principal = run_as(beat["agent_id"], beat["acting_for"], session=f"heartbeat:{beat['id']}")
        turn = TurnContext(
            session_key=principal.session or "",
            run_id=run_id,
            caller_role=principal.role,
            unattended=True,
            refs=(("heartbeat_id", beat["id"]), ("schedule_run", run_id)),
        )
        fields: dict[str, Any] = {"last_probe_at": time.time()}
        status, output, error = "ok", None, None
        try:
            service = self.host.context.tool_service(principal=principal, turn=turn)
            result = await service.execute(probe["tool_name"], probe.get("tool_params") or {})
            output = result.text[:20_000]
            fields.update(last_probe_result=output, consecutive_errors=0, last_error=None)
            if triggered(probe.get("trigger_condition"), output, beat["last_probe_result"]):
                fields["last_l2_at"] = time.time()
                fields["last_l2_status"] = await self._analyse(beat, output, run_id)
        except ToolError as exc:
            status, error = "error", str(exc)
            fields.update(consecutive_errors=beat["consecutive_errors"] + 1, last_error=error[:2000])
        store.update_heartbeat(beat["id"], **fields)
        store.finish_schedule_run("heartbeat", beat["id"], run_id, status, output, error)
        return run_id

    async def _analyse(self, beat: dict[str, Any], output: str, run_id: str) -> str:
        """The L2 step: the agent analyses the probe's output and ends with heartbeat_report."""
        store = self.host.store
        prompt = (
            f"Heartbeat '{beat['name']}': the probe `{beat['probe']['tool_name']}` returned:\n{output[:8000]}\n\n"
            "Analyse it. End by calling heartbeat_report with action 'silent' (nothing to tell) or 'notify' and a "
            "message."
        )
        task = store.create_task(
            subject=f"Heartbeat: {beat['name']}",
            description=prompt,
            owner=beat["agent_id"],
            metadata={"heartbeat_id": beat["id"], "schedule_run": run_id},
            created_by=beat["created_by"],
            acting_for=beat["acting_for"],
        )
        try:
            outcome = await self.host.run_task(task["id"], timeout_seconds=self.config.lease_seconds, unattended=True)
        except ToolError as exc:
            store.update_task(task["id"], status="failed", result=str(exc))
            return "no_runner" if "runner not available" in str(exc) else "error"
        return outcome.status
