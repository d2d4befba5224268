"""Running a member: its tool calls through the chokepoint, its budget, and the task's life cycle.

A member is an agent to the chokepoint: every tool call it makes goes through
``context.tool_service(agent=<member>, turn=...)``, so ``[agents.<member>.tool_permissions]`` applies,
and the turn carries the task's budget, an idempotency key per step (``<task>:<step>``) and the team
and task ids for the ledger. A run that dies mid-task is resumed with the same step numbers, so every
call it had finished answers from the chokepoint's result store instead of running again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aleph
from aleph import Budget, ExecutionFailed, Principal, ToolError, ToolOutput, TurnContext
from aleph_teams._acting import run_as
from aleph_teams._runners import AgentRunner, CallableRunner, MemberTask, RunResult, SubprocessRunner
from aleph_teams._store import TERMINAL, TeamStore, open_store

if TYPE_CHECKING:
    from aleph_teams._config import TeamsConfig

__all__ = ["MemberTools", "TaskOutcome", "TeamsHost", "worker_alive", "worker_id"]

log = logging.getLogger("aleph.teams")


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "0"


def worker_id() -> str:
    """The lock-holder name of the running process: ``host:pid:start-time`` (a reused pid never matches)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def worker_alive(worker: str) -> bool | None:
    """Whether the process named by :func:`worker_id` still runs; None when it is on another host."""
    host, _, rest = worker.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _start_time(int(pid)) == started


class MemberTools:
    """A member's way to call tools during one task run (given to runners as ``task.tools``)."""

    def __init__(
        self,
        host: TeamsHost,
        *,
        team_id: str,
        task_id: str,
        agent_id: str,
        run_id: str,
        budget: Budget | None,
        unattended: bool,
        principal: Principal,
        outer: Budget | None = None,
    ) -> None:
        self.host = host
        self.team_id = team_id
        self.task_id = task_id
        self.agent_id = agent_id
        self.run_id = run_id
        self.budget = budget
        self.unattended = unattended
        self.principal = principal
        """Who the member's calls run as: the member acting for the task's creator and its chain."""
        self.outer = outer
        """The delegating call's budget (a live ``team_delegate``): every call is charged to it too."""
        self._step = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def _turn(self, key: str | None) -> TurnContext:
        return TurnContext(
            session_key=self.principal.session or "",
            run_id=self.run_id,
            caller_role=self.principal.role,
            unattended=self.unattended,
            budget=self.budget,
            idempotency_key=key,
            refs=tuple(
                (k, v) for k, v in (("team_id", self.team_id), ("task_id", self.task_id), ("run_id", self.run_id)) if v
            ),
        )

    async def call(self, name: str, input: dict[str, Any], *, step: int | None = None) -> ToolOutput:
        """Run ``name`` as the member through the chokepoint; raises :class:`aleph.ToolError`.

        Steps number the calls of a run from 1 (or the runner names them): a resumed run that makes the
        same calls in the same order gets the recorded results of those that had finished.
        """
        self._loop = asyncio.get_running_loop()
        with self._lock:
            if step is None:
                self._step += 1
                step = self._step
            else:
                self._step = max(self._step, step)
        service = self.host.context.tool_service(principal=self.principal, turn=self._turn(f"{self.task_id}:{step}"))
        if self.outer is not None:  # the budget of the call that delegated this run: nested, never bypassed
            try:
                self.outer.charge_call(name)
            except aleph.BudgetExhausted as exc:
                raise aleph.PermissionDenied(name, f"{exc} (the delegating call's budget)") from None
        try:
            output = await service.execute(name, input)
        except aleph.PermissionDenied:
            raise  # refused before it was charged (a policy, the budget) or before it ran (a human said no)
        except ToolError:
            self.host.store.add_task_usage(self.task_id, calls=1)
            raise
        if not output.metadata.get("replayed"):
            self.host.store.add_task_usage(self.task_id, calls=1)
        return output

    def call_sync(
        self, name: str, input: dict[str, Any], *, step: int | None = None, timeout: float = 600
    ) -> ToolOutput:
        """:meth:`call` from a worker thread (a sync :class:`CallableRunner` function)."""
        loop = self._loop or self.host.loop
        if loop is None:
            raise RuntimeError("call_sync needs the task's event loop; call it from the runner's worker thread")
        return asyncio.run_coroutine_threadsafe(self.call(name, input, step=step), loop).result(timeout)

    def report_usage(self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0) -> None:
        """Charge model usage to the task's budget and record it for ``team_usage``."""
        if self.budget is not None:
            self.budget.report(tokens=input_tokens + output_tokens, cost=cost)
        self.host.store.add_task_usage(self.task_id, tokens=input_tokens + output_tokens, cost=cost)
        self.host.store.add_usage(
            self.team_id, self.agent_id, self.task_id, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost
        )


@dataclass(slots=True)
class TaskOutcome:
    """How a run of a task ended."""

    task_id: str
    status: str
    """completed | waiting_review | failed | timeout | cancelled"""
    reply: str | None = None
    error: str | None = None
    replayed_calls: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class TeamsHost:
    """The teams family inside one runtime: the store, the runners, and live budget pools."""

    def __init__(self, context: aleph.PluginContext, config: TeamsConfig, runners: dict[str, AgentRunner]) -> None:
        self.context = context
        self.config = config
        self.runners = runners
        self._store: TeamStore | None = None
        self._store_lock = threading.Lock()
        self.worker = worker_id()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._pools: dict[tuple[str, str], Budget] = {}
        self._pool_lock = threading.Lock()
        self._running: dict[str, asyncio.Event] = {}

    @property
    def store(self) -> TeamStore:
        """The store, opened on first use (so loading the plugin does no I/O)."""
        if self._store is None:
            with self._store_lock:
                if self._store is None:
                    self._store = open_store(self.config.store, self.context.data_dir)
        return self._store

    async def aclose(self) -> None:
        """Stop running tasks' runners and close the store."""
        for cancel in list(self._running.values()):
            cancel.set()
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- runners --------------------------------------------------------------------------------------

    def runner_for(self, member: dict[str, Any]) -> tuple[str, AgentRunner]:
        """The runner a member uses; raises "agent runner not available: ..." when there is none."""
        name = member.get("runner") or self.config.default_runner
        if not name:
            known = ", ".join(sorted(self.runners)) or "none"
            raise ExecutionFailed(
                "team_delegate",
                f"agent runner not available: member '{member['agent_id']}' names no runner and [teams] "
                f"default_runner is not set (runners: {known}). Register one through the "
                "aleph_teams_agent_runners hook or configure [teams.runners.<name>].",
            )
        runner = self.runners.get(name)
        if runner is None:
            known = ", ".join(sorted(self.runners)) or "none"
            raise ExecutionFailed(
                "team_delegate",
                f"agent runner not available: no runner named '{name}' (runners: {known}). Register it through "
                "the aleph_teams_agent_runners hook or configure [teams.runners.<name>].",
            )
        return name, runner

    # -- budgets --------------------------------------------------------------------------------------

    def _spent(self, team_id: str, owner: str | None) -> dict[str, float]:
        tasks = self.store.list_tasks(team_id=team_id, owner=owner, limit=1_000_000)
        return {
            "calls": float(sum(t["used_calls"] for t in tasks)),
            "tokens": float(sum(t["used_tokens"] for t in tasks)),
            "cost": float(sum(t["used_cost"] for t in tasks)),
        }

    def _pool(self, team: dict[str, Any], member: dict[str, Any]) -> Budget | None:
        """The in-process pool a member's tasks draw from (the member's, under the team's), shared by its runs."""
        with self._pool_lock:
            key = (team["id"], "")
            team_pool = self._pools.get(key)
            if team_pool is None and team["budget"]:
                tb = team["budget"]
                spent = self._spent(team["id"], None)
                team_pool = Budget(
                    calls=tb.get("calls"),
                    tokens=tb.get("tokens"),
                    cost=tb.get("cost"),
                    wall_seconds=None,
                    name=f"team {team['name']}",
                    used_calls=int(spent["calls"]),
                    used_tokens=int(spent["tokens"]),
                    used_cost=spent["cost"],
                )
                self._pools[key] = team_pool
            mkey = (team["id"], member["agent_id"])
            pool = self._pools.get(mkey)
            if pool is None:
                mb = member.get("budget") or {}
                if not mb:
                    return team_pool
                spent = self._spent(team["id"], member["agent_id"])
                name = f"member {member['agent_id']}"
                if team_pool is not None:
                    pool = team_pool.reserve(
                        calls=mb.get("calls"), tokens=mb.get("tokens"), cost=mb.get("cost"), name=name, spent=spent
                    )
                else:
                    pool = Budget(
                        calls=mb.get("calls"),
                        tokens=mb.get("tokens"),
                        cost=mb.get("cost"),
                        name=name,
                        used_calls=int(spent["calls"]),
                        used_tokens=int(spent["tokens"]),
                        used_cost=spent["cost"],
                    )
                self._pools[mkey] = pool
            return pool

    def task_budget(
        self, team: dict[str, Any], member: dict[str, Any], task: dict[str, Any], wall: float | None
    ) -> Budget | None:
        """The budget one run of ``task`` is charged against (None when nothing caps it)."""
        pool = self._pool(team, member)
        tb = task.get("budget") or {}
        spent = {"calls": task["used_calls"], "tokens": task["used_tokens"], "cost": task["used_cost"]}
        wall_seconds = (
            min(x for x in (tb.get("wall_seconds"), wall) if x is not None)
            if (tb.get("wall_seconds") or wall)
            else None
        )
        name = f"task {task['id']}"
        if pool is None:
            if not tb and wall_seconds is None:
                return None
            return Budget(
                calls=tb.get("calls"),
                tokens=tb.get("tokens"),
                cost=tb.get("cost"),
                wall_seconds=wall_seconds,
                name=name,
                used_calls=task["used_calls"],
                used_tokens=task["used_tokens"],
                used_cost=task["used_cost"],
            )
        try:
            return pool.reserve(
                calls=tb.get("calls"),
                tokens=tb.get("tokens"),
                cost=tb.get("cost"),
                wall_seconds=wall_seconds,
                name=name,
                spent=spent,
            )
        except aleph.BudgetExhausted as exc:
            raise aleph.PermissionDenied("team_delegate", f"{exc}; the task was not started") from None

    # -- running a task -------------------------------------------------------------------------------

    async def run_task(
        self,
        task_id: str,
        *,
        timeout_seconds: float,
        review: bool = False,
        unattended: bool = False,
        claim: bool = True,
        outer: Budget | None = None,
    ) -> TaskOutcome:
        """Run a task on its owner's runner and settle it; resumes a crash orphan when its worker is dead.

        The run's tool calls are keyed ``<task>:<step>``, so a run resumed after a crash answers every call
        it had finished from the result store and repeats no side effect. They run as the owner acting for
        the task's creator and its chain (never as the owner alone); ``outer`` is the budget of the call
        that asked for the run now, which every call is charged to as well.
        """
        self.loop = asyncio.get_running_loop()
        store = self.store
        task = store.get_task(task_id)
        if task is None or not task["owner"]:
            raise ExecutionFailed("team_delegate", f"task '{task_id}' has no owner to run it")
        team = store.get_team(task["team_id"]) if task["team_id"] else None
        if team is None:  # a team-less task (a scheduled run): its agent's runner, no team pool
            team = {"id": "", "name": "", "budget": {}, "protocol": None, "members": []}
            member: dict[str, Any] | None = {
                "agent_id": task["owner"],
                "runner": task["metadata"].get("runner", ""),
                "budget": {},
            }
        else:
            member = next((m for m in team["members"] if m["agent_id"] == task["owner"]), None)
        if member is None:
            raise ExecutionFailed("team_delegate", f"Agent '{task['owner']}' is not a member of team '{team['id']}'")
        runner_name, runner = self.runner_for(member)
        if claim:
            claimed = store.claim_task(task_id, self.worker) or store.take_over(task_id, self.worker, worker_alive)
            if claimed is None:
                return TaskOutcome(task_id, task["status"], error="the task is not pending or is held by a live worker")
            task = claimed
        budget = self.task_budget(team, member, task, timeout_seconds)
        attempt = 1 + sum(1 for r in store.runs(task_id) if r["status"] in ("abandoned", "failed", "timeout"))
        run_id = store.start_run(task_id, member["agent_id"], runner_name, self.worker)
        tools = MemberTools(
            self,
            team_id=team["id"],
            task_id=task_id,
            agent_id=member["agent_id"],
            run_id=run_id,
            budget=budget,
            unattended=unattended,
            principal=run_as(member["agent_id"], task["acting_for"], session=f"task:{task_id}:{member['agent_id']}"),
            outer=outer.reserve(name=f"{member['agent_id']} for task {task_id}") if outer is not None else None,
        )
        cancel = asyncio.Event()
        self._running[task_id] = cancel
        job = MemberTask(
            team_id=team["id"],
            task_id=task_id,
            agent_id=member["agent_id"],
            subject=task["subject"],
            description=task["description"],
            protocol=team.get("protocol"),
            timeout_seconds=timeout_seconds,
            attempt=attempt,
            tools=tools,
            cancel=cancel,
            metadata=task["metadata"],
        )
        started = time.monotonic()
        try:
            result = await self._run_bounded(runner, job, timeout_seconds, cancel)
        except TimeoutError:
            cancel.set()
            message = f"Timed out after {timeout_seconds:g} seconds"
            store.finish_run(run_id, "timeout", error=message)
            store.update_task(task_id, status="failed", result=message, actor=member["agent_id"])
            return TaskOutcome(task_id, "timeout", error=message)
        except asyncio.CancelledError:
            store.finish_run(run_id, "cancelled", error="cancelled")
            raise
        except (ToolError, Exception) as exc:  # a runner's failure settles the task as failed, never the host
            message = (
                f"Execution failed: {exc}"
                if isinstance(exc, ToolError)
                else f"Task panicked: {type(exc).__name__}: {exc}"
            )
            store.finish_run(run_id, "failed", error=message)
            store.update_task(
                task_id, status="failed", result=message, only_if=["in_progress"], actor=member["agent_id"]
            )
            return TaskOutcome(task_id, "failed", error=message)
        finally:
            self._running.pop(task_id, None)
            if budget is not None:
                budget.release()
            if tools.outer is not None:
                tools.outer.release()
        if result.input_tokens or result.output_tokens or result.cost:
            tools.report_usage(input_tokens=result.input_tokens, output_tokens=result.output_tokens, cost=result.cost)
        reply = result.reply or "(No reply content)"
        store.finish_run(run_id, "completed", summary=reply[:4000])
        current = store.get_task(task_id)
        if current is not None and current["stored_status"] in TERMINAL:
            return TaskOutcome(task_id, current["stored_status"], reply=reply)  # cancelled while it ran: sticky
        final = "waiting_review" if review or task["metadata"].get("lead_review_required") else "completed"
        with contextlib.suppress(Exception):
            store.add_artifact(task_id, member["agent_id"], "report", f"Delegation result: {task['subject']}", reply)
        store.update_task(task_id, status=final, result=reply, only_if=["in_progress"], actor=member["agent_id"])
        log.debug("task %s finished in %.3fs", task_id, time.monotonic() - started)
        return TaskOutcome(task_id, final, reply=reply)

    async def _run_bounded(
        self, runner: AgentRunner, job: MemberTask, timeout: float, cancel: asyncio.Event
    ) -> RunResult:
        work = asyncio.ensure_future(runner.run(job))
        stop = asyncio.ensure_future(cancel.wait())
        try:
            done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                return work.result()
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            if stop in done:
                raise ExecutionFailed("team_delegate", "the task was cancelled")
            raise TimeoutError
        finally:
            stop.cancel()

    def cancel_running(self, task_ids: list[str]) -> int:
        """Stop the runs of these tasks that this process is running; how many were stopped."""
        n = 0
        for task_id in task_ids:
            cancel = self._running.get(task_id)
            if cancel is not None:
                cancel.set()
                n += 1
        return n


def build_runners(config: TeamsConfig, workspace: str) -> dict[str, AgentRunner]:
    """The runners configured under ``[teams.runners]``."""
    runners: dict[str, AgentRunner] = {}
    for name, spec in config.runners.items():
        if spec.type == "subprocess":
            runners[name] = SubprocessRunner(
                spec.command, cwd=spec.cwd or workspace, env=spec.env, max_output_bytes=spec.max_output_bytes
            )
        else:
            from aleph_teams._a2a import A2ARunner

            assert spec.url is not None
            runners[name] = A2ARunner(spec.url, timeout_seconds=spec.timeout_seconds)
    return runners


__all__ += ["CallableRunner", "build_runners"]
