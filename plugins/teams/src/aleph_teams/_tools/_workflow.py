"""The ``workflow`` tool: declarative templates compiled into the task DAG, and their runs."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from aleph import ToolArgs, ToolFacts
from aleph_teams._store import StoreError
from aleph_teams._store._common import TERMINAL, new_id
from aleph_teams._tools._base import TeamsTool, caller, drop_empty, refs

__all__ = ["WorkflowDef", "WorkflowTool", "materialize"]

_NAME = re.compile(r"[^a-z0-9_-]+")
_OUTPUT_LIMIT = 4000


class WorkflowStep(BaseModel):
    """One step: a task for ``agent``, after the steps in ``depends_on``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")
    """Step id, unique in the workflow."""
    agent: str = Field(max_length=200)
    """The member who does it."""
    prompt: str = Field(max_length=50_000)
    """What to do; ``{input}`` is replaced by the run's input."""
    depends_on: list[str] = Field(default_factory=list, max_length=100)
    """Steps that must finish first."""
    review: bool = False
    """The leader reviews the result before it counts as done."""
    phase: str | None = Field(default=None, max_length=100)
    """A label grouping steps."""


class WorkflowDef(BaseModel):
    """A workflow template."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=100)
    """Storage key (lowercased; other characters than a-z 0-9 _ - become -)."""
    description: str = Field(default="", max_length=10_000)
    """What it does."""
    when_to_use: str | None = Field(default=None, max_length=10_000)
    """When to pick it."""
    steps: list[WorkflowStep] = Field(min_length=1, max_length=500)
    """The steps."""


class WorkflowArgs(ToolArgs):
    action: Literal["save", "list", "describe", "delete", "run", "status", "cancel", "pause", "resume"]
    """What to do."""
    definition: WorkflowDef | None = None
    """For save: the template."""
    name: str | None = Field(default=None, max_length=100)
    """The workflow (describe, delete, run, status, cancel, pause, resume)."""
    team_id: str | None = Field(default=None, max_length=100)
    """The team (run, status, cancel, pause, resume)."""
    input: str = Field(default="", max_length=100_000)
    """For run: text substituted for {input} in each prompt."""
    run_id: str | None = Field(default=None, max_length=100)
    """Which run (default: the latest)."""
    include_output: bool = False
    """For status: include each step's result (bounded)."""


def _key(name: str) -> str:
    return _NAME.sub("-", name.strip().lower()).strip("-")[:100] or "workflow"


def check_dag(definition: WorkflowDef) -> None:
    """Refuse duplicate ids, unknown dependencies and cycles, naming the step."""
    ids = [s.id for s in definition.steps]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate step id(s): {', '.join(sorted(dup))}")
    known = set(ids)
    for s in definition.steps:
        for d in s.depends_on:
            if d not in known:
                raise ValueError(f"step '{s.id}' depends on unknown step '{d}'")
    order(definition)


def order(definition: WorkflowDef) -> list[WorkflowStep]:
    """The steps in dependency order; a cycle is an error naming its steps."""
    pending = {s.id: s for s in definition.steps}
    done: list[WorkflowStep] = []
    placed: set[str] = set()
    while pending:
        ready = [s for s in pending.values() if all(d in placed for d in s.depends_on)]
        if not ready:
            raise ValueError(f"the steps form a cycle: {', '.join(sorted(pending))}")
        for s in ready:
            done.append(s)
            placed.add(s.id)
            del pending[s.id]
    return done


def materialize(
    tool: TeamsTool[Any], definition: WorkflowDef, team: dict[str, Any], text: str
) -> tuple[str, dict[str, str]]:
    """Create one task per step, in one transaction; (run id, step → task id)."""
    members = {m["agent_id"] for m in team["members"]}
    for s in definition.steps:
        if s.agent not in members:
            raise tool.fail(f"step '{s.id}': agent '{s.agent}' is not a member of team '{team['id']}'")
    run_id = new_id()
    steps: dict[str, str] = {}
    with tool.store.bulk() as tx:
        for s in order(definition):
            metadata = drop_empty(
                {
                    "workflow_name": definition.name,
                    "workflow_run": run_id,
                    "workflow_step": s.id,
                    "lead_review_required": s.review,
                    "phase": s.phase,
                    "managed_by": "aleph_teams",
                }
            )
            task = tool.store.create_task(
                subject=s.prompt.replace("{input}", text)[:2000],
                description=s.prompt.replace("{input}", text),
                team_id=team["id"],
                owner=s.agent,
                blocked_by=[steps[d] for d in s.depends_on],
                metadata=metadata,
                tx=tx,
            )
            steps[s.id] = task["id"]
        tool.store.add_workflow_run(run_id, definition.name, team["id"], steps, tx)
    return run_id, steps


class WorkflowTool(TeamsTool[WorkflowArgs]):
    NAME = "workflow"
    DESCRIPTION = (
        "Declarative workflows: save a template of steps (agent, prompt, depends_on), then run it for a team — each "
        "step becomes a task in the DAG, run by the team's members as dependencies finish. Also list, describe, "
        "delete, status, cancel, pause and resume."
    )
    Args = WorkflowArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: WorkflowArgs) -> dict[str, Any]:
        act = args.action
        if act == "save":
            if args.definition is None:
                raise self.invalid("workflow save: `definition` is required")
            definition = args.definition.model_copy(update={"name": _key(args.definition.name)})
            try:
                check_dag(definition)
            except ValueError as exc:
                raise self.invalid(f"workflow save: {exc}") from None
            self.store.save_workflow(definition.name, definition.model_dump(exclude_none=True))
            return {"action": act, "message": f"Workflow '{definition.name}' saved ({len(definition.steps)} steps)."}
        if act == "list":
            found = self.store.list_workflows()
            return {
                "action": act,
                "message": f"{len(found)} workflow(s)",
                "workflows": [
                    drop_empty(
                        {
                            "name": w["name"],
                            "description": w.get("description", ""),
                            "when_to_use": w.get("when_to_use"),
                            "steps": len(w["steps"]),
                        }
                    )
                    for w in found
                ],
            }
        if not args.name:
            raise self.invalid(f"workflow {act}: `name` is required")
        name = _key(args.name)
        if act == "delete":
            existed = self.store.delete_workflow(name)
            return {"action": act, "message": f"Workflow '{name}' {'deleted' if existed else 'did not exist'}."}
        raw = self.store.get_workflow(name)
        if raw is None:
            raise self.fail(f"workflow '{name}' not found")
        definition = WorkflowDef.model_validate(raw)
        if act == "describe":
            return drop_empty(
                {
                    "action": act,
                    "message": definition.description or name,
                    "definition": definition.model_dump(exclude_none=True),
                    "when_to_use": definition.when_to_use,
                }
            )
        if not args.team_id:
            raise self.invalid(f"workflow {act}: `team_id` is required")
        team = self.team_for(args.team_id)
        if act == "run":
            try:
                run_id, steps = materialize(self, definition, team, args.input)
            except StoreError as exc:
                raise self.store_error(exc) from None
            refs(run_id=run_id)
            return {
                "action": act,
                "message": f"Workflow '{name}' started: {len(steps)} task(s).",
                "run_id": run_id,
                "task_ids": list(steps.values()),
            }
        run = self.store.workflow_run(name, team["id"], args.run_id)
        if run is None:
            raise self.fail(f"no run of workflow '{name}' in team '{team['id']}'")
        tasks = {t["id"]: t for t in self.store.get_tasks(list(run["steps"].values()))}
        if act == "status":
            phases = {s.id: s.phase for s in definition.steps}
            steps = []
            for step in [s.id for s in definition.steps if s.id in run["steps"]]:
                task_id = run["steps"][step]
                t = tasks.get(task_id)
                if t is None:
                    continue
                view = {
                    "step": step,
                    "task_id": task_id,
                    "status": t["status"],
                    "owner": t["owner"],
                    "phase": phases.get(step),
                }
                if t["status"] == "failed":
                    view["error"] = (t["result"] or "")[:_OUTPUT_LIMIT]
                if args.include_output and t["result"]:
                    view["output"] = t["result"][:_OUTPUT_LIMIT]
                steps.append(drop_empty(view) | {"status": t["status"]})
            return {"action": act, "message": f"Run {run['run_id']}", "run_id": run["run_id"], "steps": steps}
        changed = []
        with self.store.bulk() as tx:
            for task_id, t in tasks.items():
                stored = t["stored_status"]
                if act == "cancel" and stored not in TERMINAL:
                    self.store.update_task(task_id, status="cancelled", actor=caller(), tx=tx)
                elif act == "pause" and stored in ("pending", "waiting_review"):
                    self.store.update_task(
                        task_id, status="paused", metadata={"paused_from": stored}, actor=caller(), tx=tx
                    )
                elif act == "pause" and stored == "in_progress":
                    self.store.update_task(task_id, metadata={"paused_from": "in_progress"}, actor=caller(), tx=tx)
                    continue
                elif act == "resume" and stored == "paused":
                    back = t["metadata"].get("paused_from", "pending")
                    back = back if back in ("pending", "waiting_review") else "pending"
                    self.store.update_task(task_id, status=back, metadata={"paused_from": None}, actor=caller(), tx=tx)
                else:
                    continue
                changed.append(task_id)
        if act == "cancel":
            self.host.cancel_running(list(tasks))
        past = {"cancel": "cancelled", "pause": "paused", "resume": "resumed"}[act]
        return {
            "action": act,
            "message": f"{len(changed)} step(s) {past}.",
            "run_id": run["run_id"],
            "task_ids": changed,
        }
