"""Team tools that move whole structures: templates, snapshots and the JSON Canvas export/import."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aleph import ToolArgs, ToolFacts
from aleph_teams._store import StoreError
from aleph_teams._store._common import TERMINAL
from aleph_teams._tools._base import TeamsTool, caller, drop_empty, refs
from aleph_teams._tools._teams import check_agent_id

__all__ = ["TeamFromTemplateTool", "TeamSnapshotTool", "TeamWorkflowCanvasTool", "load_template"]

_STATUSES = (
    "pending",
    "blocked",
    "in_progress",
    "waiting_review",
    "completed",
    "failed",
    "cancelled",
    "skipped",
    "paused",
    "unsatisfiable",
)


class TemplateMember(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    role: str = ""
    runner: str | None = None


class TemplateTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: str
    subject: str
    description: str = ""
    owner: str
    depends_on: list[str] = Field(default_factory=list)


class Template(BaseModel):
    """A team template (built in, or ``<templates_dir>/<name>.json``)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    description: str = ""
    default_goal: str | None = None
    leader: TemplateMember
    workers: list[TemplateMember] = Field(default_factory=list, max_length=100)
    tasks: list[TemplateTask] = Field(default_factory=list, max_length=500)


def load_template(name: str, extra_dir: str | None) -> Template:
    """The template ``name``: a user file in ``extra_dir`` wins over a built-in one."""
    if not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"template name '{name[:60]}' may hold only letters, digits, - and _")
    text = None
    if extra_dir:
        path = Path(extra_dir) / f"{name}.json"
        if path.is_file():
            text = path.read_text(encoding="utf-8")
    if text is None:
        builtin = resources.files("aleph_teams") / "templates" / f"{name}.json"
        if not builtin.is_file():
            known = sorted(
                p.name[:-5]
                for p in (resources.files("aleph_teams") / "templates").iterdir()
                if p.name.endswith(".json")
            )
            raise ValueError(f"unknown template '{name}' (built in: {', '.join(known)})")
        text = builtin.read_text(encoding="utf-8")
    try:
        return Template.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise ValueError(f"template '{name}' is malformed: {exc}") from None


class TeamFromTemplateArgs(ToolArgs):
    template: str = Field(max_length=100)
    """software-dev, code-review, research-paper, strategy-room, or a template in [teams] templates_dir."""
    team_name: str = Field(min_length=1, max_length=200)
    """The new team's name."""
    goal: str | None = Field(default=None, max_length=20_000)
    """Replaces {goal} in the template (default: its default_goal, else the team name)."""
    description: str | None = Field(default=None, max_length=10_000)
    """Team description."""


class TeamFromTemplateTool(TeamsTool[TeamFromTemplateArgs]):
    NAME = "team_from_template"
    DESCRIPTION = (
        "Create a team you lead from a template (its leader must be 'self'): workers and an initial task "
        "DAG, with {goal}, {team_name} and {leader} filled in."
    )
    Args = TeamFromTemplateArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamFromTemplateArgs) -> dict[str, Any]:
        try:
            tpl = load_template(args.template, self.host.config.templates_dir)
        except ValueError as exc:
            raise self.fail(f"team_from_template: {exc}") from None
        me = caller()
        if tpl.leader.id not in ("self", me):
            # a team is led by whoever creates it: making another agent lead one would act in its name
            raise self.fail(
                f"team_from_template: the template names leader '{tpl.leader.id}'; a team you create is led by you "
                '(set leader.id = "self")'
            )
        leader = me
        goal = args.goal or tpl.default_goal or args.team_name

        def fill(text: str) -> str:
            return text.replace("{goal}", goal).replace("{team_name}", args.team_name).replace("{leader}", leader)

        for w in tpl.workers:
            if check_agent_id(w.id):
                raise self.fail(f"team_from_template: materialization failed: {check_agent_id(w.id)}")
        await self.consent_to_join(args.team_name, leader, [w.id for w in tpl.workers if w.id != leader])
        try:
            team = self.store.create_team(
                name=args.team_name,
                leader_id=leader,
                description=args.description or fill(tpl.description),
                members=[{"agent_id": w.id, "role": w.role, "runner": w.runner or ""} for w in tpl.workers],
            )
            ids: dict[str, str] = {}
            with self.store.bulk() as tx:
                pending = list(tpl.tasks)
                while pending:
                    ready = [t for t in pending if all(d in ids for d in t.depends_on)]
                    if not ready:
                        raise StoreError("the template's tasks form a cycle or name unknown steps")
                    for t in ready:
                        owner = leader if t.owner in ("self", "leader") else t.owner
                        made = self.store.create_task(
                            subject=fill(t.subject),
                            description=fill(t.description),
                            team_id=team["id"],
                            owner=owner,
                            blocked_by=[ids[d] for d in t.depends_on],
                            metadata={"managed_by": "aleph_teams", "template_step": t.step},
                            tx=tx,
                        )
                        ids[t.step] = made["id"]
                        pending.remove(t)
        except StoreError as exc:
            raise self.fail(f"team_from_template: materialization failed: {exc}") from None
        refs(team_id=team["id"])
        return {
            "team_id": team["id"],
            "team_name": team["name"],
            "leader_id": leader,
            "member_ids": [w.id for w in tpl.workers],
            "task_ids": [[s, i] for s, i in ids.items()],
            "message": f"Team '{team['name']}' created from template '{tpl.id}' with {len(tpl.workers)} worker(s) and "
            f"{len(ids)} task(s).",
        }


class TeamSnapshotArgs(ToolArgs):
    action: Literal["create", "list", "get", "restore", "delete"]
    """What to do."""
    team_id: str | None = Field(default=None, max_length=100)
    """The team (create, list)."""
    snapshot_id: str | None = Field(default=None, max_length=100)
    """The snapshot (get, restore, delete)."""
    tag: str | None = Field(default=None, max_length=200)
    """A label (create)."""
    note: str | None = Field(default=None, max_length=10_000)
    """A note (create)."""
    apply: bool = False
    """For restore: apply the diff (default: a dry run that only reports it)."""


class TeamSnapshotTool(TeamsTool[TeamSnapshotArgs]):
    NAME = "team_snapshot"
    DESCRIPTION = (
        "Snapshot a team's members and tasks, list or read snapshots, restore one (a dry-run diff unless apply: "
        "members added or removed, missing tasks re-added as pending; running or finished tasks never overwritten)."
    )
    Args = TeamSnapshotArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamSnapshotArgs) -> dict[str, Any]:
        act = args.action
        if act in ("create", "list"):
            if not args.team_id:
                raise self.invalid(f"team_snapshot({act}): team_id is required")
            team = self.team_for(args.team_id)
            if act == "list":
                return {"snapshots": self.store.snapshots(team["id"])}
            payload = {
                "team": {k: team[k] for k in ("id", "name", "description", "leader_id", "protocol", "budget")},
                "members": [{k: m[k] for k in ("agent_id", "role", "runner", "budget")} for m in team["members"]],
                "tasks": [
                    {
                        k: t[k]
                        for k in ("id", "subject", "description", "owner", "priority", "dependencies", "stored_status")
                    }
                    for t in self.store.team_tasks(team["id"])
                ],
            }
            return self.store.save_snapshot(team["id"], args.tag, args.note, payload)
        if not args.snapshot_id:
            raise self.invalid(f"team_snapshot({act}): snapshot_id is required")
        found = self.store.get_snapshot(args.snapshot_id)
        if found is None or self.store.authorize(found[0]["team_id"], caller()) is None:
            raise self.fail(f"snapshot `{args.snapshot_id}` not found")
        meta, payload = found
        refs(team_id=meta["team_id"], snapshot_id=meta["snapshot_id"])
        if act == "get":
            return {"meta": meta, "payload": payload}
        if act == "delete":
            return {"snapshot_id": meta["snapshot_id"], "existed": self.store.delete_snapshot(meta["snapshot_id"])}
        return await self._restore(meta, payload, args.apply)

    async def _restore(self, meta: dict[str, Any], payload: dict[str, Any], apply: bool) -> dict[str, Any]:
        team = self.store.get_team(meta["team_id"])
        assert team is not None
        if apply and team["leader_id"] != caller():
            # It adds and removes members and re-creates tasks: the leader's changes (team_member_add/remove).
            raise self.fail(f"only the team leader ('{team['leader_id']}') can apply a snapshot restore")
        now_members = {m["agent_id"] for m in team["members"]}
        then = {m["agent_id"]: m for m in payload.get("members", [])}
        add = [a for a in then if a not in now_members]
        remove = [a for a in now_members if a not in then and a != team["leader_id"]]
        existing = {t["id"]: t for t in self.store.team_tasks(team["id"])}
        readd = [t for t in payload.get("tasks", []) if t["id"] not in existing]
        kept = [
            t["id"]
            for t in payload.get("tasks", [])
            if t["id"] in existing
            and (existing[t["id"]]["stored_status"] == "in_progress" or existing[t["id"]]["stored_status"] in TERMINAL)
        ]
        if apply:
            await self.consent_to_join(team["name"], team["leader_id"], add)
            try:
                for a in add:
                    m = then[a]
                    self.store.add_member(
                        team["id"],
                        a,
                        m.get("role", ""),
                        runner=m.get("runner", ""),
                        budget=m.get("budget"),
                        actor=caller(),
                    )
                for a in remove:
                    self.store.remove_member(team["id"], a, caller())
                restored: set[str] = set(existing)
                with self.store.bulk() as tx:
                    for t in readd:
                        deps = [d for d in t.get("dependencies", []) if d in restored]
                        self.store.create_task(
                            subject=t["subject"],
                            description=t.get("description", ""),
                            team_id=team["id"],
                            owner=t.get("owner"),
                            priority=t.get("priority", "normal"),
                            blocked_by=deps,
                            task_id=t["id"],
                            tx=tx,
                        )
                        restored.add(t["id"])
            except StoreError as exc:
                raise self.store_error(exc) from None
        return {
            "snapshot_id": meta["snapshot_id"],
            "applied": apply,
            "members_added": add,
            "members_removed": remove,
            "tasks_added": [t["id"] for t in readd],
            "tasks_kept": kept,
        }


class CanvasNode(BaseModel):
    """A JSON Canvas node (text nodes become tasks; other types are ignored)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(max_length=200)
    type: str = Field(default="text", max_length=20)
    text: str | None = Field(default=None, max_length=100_000)
    x: float = 0
    y: float = 0
    width: float = 280
    height: float = 120
    color: str | None = Field(default=None, max_length=20)
    status: str | None = Field(default=None, max_length=40)


class CanvasEdge(BaseModel):
    """A JSON Canvas edge: the task at toNode waits for the one at fromNode."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(max_length=400)
    fromNode: str = Field(max_length=200)
    toNode: str = Field(max_length=200)
    fromSide: str | None = Field(default=None, max_length=10)
    toSide: str | None = Field(default=None, max_length=10)
    label: str | None = Field(default=None, max_length=1000)


class CanvasDoc(BaseModel):
    """A JSON Canvas document."""

    model_config = ConfigDict(extra="forbid")
    nodes: list[CanvasNode] = Field(default_factory=list, max_length=2000)
    edges: list[CanvasEdge] = Field(default_factory=list, max_length=10_000)


class TeamWorkflowCanvasArgs(ToolArgs):
    action: Literal["export", "import"]
    """export the team's tasks as a JSON Canvas, or import one as tasks."""
    team_id: str = Field(max_length=100)
    """The team."""
    status: str | None = Field(default=None, max_length=40)
    """For export: only tasks with this status."""
    canvas: CanvasDoc | None = None
    """For import: a JSON Canvas ({nodes, edges}); each text node a task, each edge a dependency."""
    dry_run: bool = False
    """For import: show the tasks that would be created, create nothing."""


class TeamWorkflowCanvasTool(TeamsTool[TeamWorkflowCanvasArgs]):
    NAME = "team_workflow_canvas"
    DESCRIPTION = (
        "Export a team's task DAG as a JSON Canvas document (nodes = tasks, edges = dependencies), or import a canvas "
        "as tasks (text nodes become tasks, an edge from A to B makes B wait for A)."
    )
    Args = TeamWorkflowCanvasArgs
    FACTS = ToolFacts(tags=("teams",))

    async def call(self, args: TeamWorkflowCanvasArgs) -> dict[str, Any]:
        team = self.team_for(args.team_id)
        if args.action == "export":
            if args.status is not None and args.status not in _STATUSES:
                raise self.invalid(
                    f"Invalid status filter '{args.status[:40]}'. Expected one of: {', '.join(_STATUSES)}."
                )
            tasks = self.store.team_tasks(team["id"])
            if args.status:
                tasks = [t for t in tasks if t["status"] == args.status]
            ids = {t["id"] for t in tasks}
            nodes = [
                {
                    "id": t["id"],
                    "type": "text",
                    "text": t["subject"],
                    "x": (i % 6) * 320,
                    "y": (i // 6) * 200,
                    "width": 280,
                    "height": 120,
                    "status": t["status"],
                }
                for i, t in enumerate(tasks)
            ]
            edges = [
                {"id": f"{d}->{t['id']}", "fromNode": d, "toNode": t["id"]}
                for t in tasks
                for d in t["dependencies"]
                if d in ids
            ]
            return {
                "team_id": team["id"],
                "canvas": {"nodes": nodes, "edges": edges},
                "node_count": len(nodes),
                "edge_count": len(edges),
            }
        if args.canvas is None:
            raise self.invalid("import action requires a `canvas` document")
        nodes = {n.id: n for n in args.canvas.nodes if n.type == "text" and n.text}
        deps: dict[str, list[str]] = {k: [] for k in nodes}
        for e in args.canvas.edges:
            a, b = e.fromNode, e.toNode
            if a in nodes and b in nodes:
                deps[b].append(a)
        planned = []
        for key, n in nodes.items():
            text = (n.text or "").strip()
            subject, _, rest = text.partition("\n")
            planned.append(
                {
                    "canvas_id": key,
                    "subject": subject[:2000],
                    "description": rest.strip(),
                    "blocked_by": deps[key],
                    "metadata": {"canvas_node": key},
                }
            )
        if args.dry_run:
            return {"team_id": team["id"], "created": 0, "dry_run": True, "tasks": planned}
        made: dict[str, str] = {}
        with self.store.bulk() as tx:
            remaining = list(planned)
            while remaining:
                ready = [p for p in remaining if all(d in made for d in p["blocked_by"])]
                if not ready:
                    break
                for p in ready:
                    task = self.store.create_task(
                        subject=p["subject"],
                        description=p["description"],
                        team_id=team["id"],
                        blocked_by=[made[d] for d in p["blocked_by"]],
                        metadata=p["metadata"],
                        tx=tx,
                    )
                    made[p["canvas_id"]] = task["id"]
                    remaining.remove(p)
            if remaining:
                raise self.fail(f"canvas import: {len(remaining)} tasks unresolvable (cyclic or stranded)")
        return drop_empty(
            {
                "team_id": team["id"],
                "created": len(made),
                "tasks": [{"id": made[p["canvas_id"]], "subject": p["subject"]} for p in planned],
            }
        ) | {"dry_run": False}
