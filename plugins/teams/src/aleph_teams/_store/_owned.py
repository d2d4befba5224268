"""The store as one principal sees it: the one place the teams family filters by owner.

Every tool reaches the store through :class:`OwnedStore` (``TeamsTool.store``), never through the
shared :class:`~aleph_teams._store.TeamStore` (the dispatcher and the scheduler use that one). What the
principal does not own or belong to answers exactly like what does not exist: ``None``, an empty list,
or the same :class:`StoreError` text, so an id is no oracle for another principal's objects.

Who owns what:

- a team: its leader and its members (through it, its tasks, mail, events, usage, snapshots, runs);
- a task without a team: the principal that created it and the agent that owns (runs) it;
- an artifact: its task's readers; a plan's artifact (no task yet): its team; else its author;
- a cron job, a heartbeat, a workflow template: the principal that created it.

A method that is not defined here is refused (``AttributeError``) unless it is in :data:`_RESOLVED`:
calls that tools make only after resolving their team or task through this view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aleph import Principal
from aleph_teams._acting import chain_record
from aleph_teams._store._common import StoreError
from aleph_teams._store._teams import TeamStore

__all__ = ["OwnedStore"]

_RESOLVED = frozenset(
    {
        "add_comment",
        "add_member",
        "add_workflow_run",
        "bulk",
        "create_team",
        "dependents_freed",
        "disband",
        "log_event",
        "remove_member",
        "review_run",
        "save_snapshot",
        "set_protocol",
        "version",
        "wait_changed",
        "wait_until",
    }
)
"""Store calls a tool makes after ``team_for``/``task_for`` resolved the object through this view
(or that create a new object owned by the caller): passed through unchanged."""


class OwnedStore:
    """:class:`TeamStore` filtered for ``principal`` (the running call's): ``who`` is the owner key it filters by."""

    __slots__ = ("_store", "principal", "who")

    def __init__(self, store: TeamStore, principal: Principal) -> None:
        self._store = store
        self.principal = principal
        self.who = principal.owner

    def __getattr__(self, name: str) -> Any:
        if name in _RESOLVED:
            return getattr(self._store, name)
        raise AttributeError(f"OwnedStore has no '{name}': add it with its ownership rule, not as a pass-through")

    # -- teams ----------------------------------------------------------------------------------------

    def authorize(self, team_id: str, who: str | None = None) -> dict[str, Any] | None:
        """The team when this principal leads it or is a member; else None (as for a missing team)."""
        if who is not None and who != self.who:
            return None  # a tool never asks on someone else's behalf
        return self._store.authorize(team_id, self.who)

    def get_team(self, team_id: str) -> dict[str, Any] | None:
        """The team, if this principal belongs to it."""
        return self.authorize(team_id)

    def member_ids(self, team_id: str) -> list[str]:
        """The members of a team this principal belongs to ([] otherwise)."""
        team = self.authorize(team_id)
        return [m["agent_id"] for m in team["members"]] if team else []

    # -- tasks ----------------------------------------------------------------------------------------

    def _member_of(self, team_id: str, tx: Any = None) -> bool:
        """Whether this principal leads or belongs to the team (read inside ``tx`` when one is open)."""
        team = self._store.get_team(team_id, tx) if tx is not None else self._store.get_team(team_id)
        return team is not None and (
            team["leader_id"] == self.who or any(m["agent_id"] == self.who for m in team["members"])
        )

    def reachable(self, task: dict[str, Any], tx: Any = None) -> bool:
        """A team's task is its leader's and members'; a task without a team, its creator's and owner's."""
        if task["team_id"] is None:
            return self.who in (task.get("created_by"), task["owner"])
        return self._member_of(task["team_id"], tx)

    def get_task(self, task_id: str) -> dict[str, Any] | None:
        """A task this principal can reach, or None."""
        task = self._store.get_task(task_id)
        return task if task is not None and self.reachable(task) else None

    def get_tasks(self, task_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The reachable tasks among ``task_ids``."""
        return [t for t in self._store.get_tasks(task_ids) if self.reachable(t)]

    def list_tasks(self, **filters: Any) -> list[dict[str, Any]]:
        """Tasks this principal can reach (``team_id``, ``status``, ``owner``, ``limit`` as the store takes them)."""
        return [t for t in self._store.list_tasks(**filters) if self.reachable(t)]

    def team_tasks(self, team_id: str) -> list[dict[str, Any]]:
        """Every task of a team this principal belongs to ([] otherwise)."""
        return self._store.team_tasks(team_id) if self.authorize(team_id) is not None else []

    def create_task(self, *, team_id: str | None = None, **fields: Any) -> dict[str, Any]:
        """Create a task in a team this principal belongs to (or without a team), owned by this principal."""
        if team_id is not None and not self._member_of(team_id, fields.get("tx")):  # tx: inside a bulk write
            raise StoreError(f"team `{team_id}` not found")
        return self._store.create_task(
            team_id=team_id, created_by=self.who, acting_for=chain_record(self.principal), **fields
        )

    def update_task(self, task_id: str, **fields: Any) -> dict[str, Any] | None:
        """Change a reachable task; None as for a missing one."""
        tx = fields.get("tx")  # inside a bulk write: read the task in that transaction
        task = self._store.get_task(task_id, tx) if tx is not None else self._store.get_task(task_id)
        if task is None or not self.reachable(task, tx):
            return None
        if fields.get("owner") not in (None, task["owner"]):
            self.check_hand_over(task)
        return self._store.update_task(task_id, **fields)

    def check_hand_over(self, task: dict[str, Any]) -> None:
        """Refuse to give a task without a team to another agent unless this principal created it.

        Such a task runs as its owner acting for the chain that created it, and its new owner's consent is
        asked for the caller's chain: only when the caller *is* that chain does the consent cover the run.
        Its owner handing it on would make a third agent work for the creator without the creator's chain
        ever being accepted.
        """
        if task["team_id"] is None and (
            task.get("created_by") != self.who or task.get("acting_for") != chain_record(self.principal)
        ):
            raise StoreError(
                f"task '{task['id']}' can be handed to another agent only by the principal that created it"
            )

    # -- artifacts ------------------------------------------------------------------------------------

    def _artifact_visible(self, artifact: dict[str, Any]) -> bool:
        if artifact["team_id"]:
            return self.authorize(artifact["team_id"]) is not None
        return bool(artifact["agent_id"] == self.who)

    def artifacts(self, task_id: str, artifact_id: str | None = None) -> list[dict[str, Any]]:
        """A task's artifacts (or the one named) when this principal can read them; [] otherwise."""
        task = self._store.get_task(task_id)
        if task is not None:
            return self._store.artifacts(task_id, artifact_id) if self.reachable(task) else []
        return [a for a in self._store.artifacts(task_id, artifact_id) if self._artifact_visible(a)]

    def add_artifact(
        self, task_id: str, agent_id: str, artifact_type: str, title: str, content: str, metadata: Any = None, **kw: Any
    ) -> str:
        """Store a deliverable for a reachable task, or a plan in one of this principal's teams."""
        if agent_id != self.who:
            raise StoreError("an artifact is submitted by the calling agent only")
        task = self._store.get_task(task_id)
        team_id = kw.get("team_id")
        if task is not None and not self.reachable(task):
            raise StoreError(f"task '{task_id}' not found")
        if task is None and (team_id is None or self.authorize(team_id) is None):
            raise StoreError(f"task '{task_id}' not found")
        return self._store.add_artifact(task_id, agent_id, artifact_type, title, content, metadata, **kw)

    # -- mail -----------------------------------------------------------------------------------------

    def send_message(self, *, team_id: str, from_agent: str, **fields: Any) -> dict[str, Any]:
        """Send as this principal, in a team it belongs to (the store checks protocol messages)."""
        if from_agent != self.who or self.authorize(team_id) is None:
            raise StoreError(f"team `{team_id}` not found")
        return self._store.send_message(team_id=team_id, from_agent=self.who, **fields)

    def inbox(self, team_id: str, agent_id: str, **kw: Any) -> list[dict[str, Any]]:
        """The caller's own unread messages in one of its teams."""
        if agent_id != self.who or self.authorize(team_id) is None:
            return []
        return self._store.inbox(team_id, agent_id, **kw)

    def thread(self, team_id: str, thread_id: str, agent_id: str, limit: int = 500) -> list[dict[str, Any]]:
        """A thread of one of this principal's teams."""
        if agent_id != self.who or self.authorize(team_id) is None:
            return []
        return self._store.thread(team_id, thread_id, agent_id, limit)

    def unread_counts(self, team_id: str, agent_id: str) -> dict[str, int]:
        """The caller's unread counts in one of its teams."""
        if agent_id != self.who or self.authorize(team_id) is None:
            return {"to": 0, "cc": 0}
        return self._store.unread_counts(team_id, agent_id)

    def get_message(self, team_id: str, message_id: str) -> dict[str, Any] | None:
        """One message of a team this principal belongs to."""
        return self._store.get_message(team_id, message_id) if self.authorize(team_id) is not None else None

    # -- events, usage, snapshots, workflow runs ------------------------------------------------------

    def events(self, team_id: str, since: float, until: float, limit: int = 1000) -> list[dict[str, Any]]:
        """A team's events, for its leader and members."""
        return self._store.events(team_id, since, until, limit) if self.authorize(team_id) is not None else []

    def usage(self, team_id: str, since: float | None, until: float | None) -> list[dict[str, Any]]:
        """A team's usage, for its leader and members."""
        return self._store.usage(team_id, since, until) if self.authorize(team_id) is not None else []

    def snapshots(self, team_id: str) -> list[dict[str, Any]]:
        """A team's snapshots, for its leader and members."""
        return self._store.snapshots(team_id) if self.authorize(team_id) is not None else []

    def get_snapshot(self, snapshot_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A snapshot of one of this principal's teams, or None."""
        found = self._store.get_snapshot(snapshot_id)
        return found if found is not None and self.authorize(found[0]["team_id"]) is not None else None

    def delete_snapshot(self, snapshot_id: str) -> bool:
        """Delete a snapshot of one of this principal's teams; False as for a missing one."""
        return self.get_snapshot(snapshot_id) is not None and self._store.delete_snapshot(snapshot_id)

    def workflow_run(self, name: str, team_id: str, run_id: str | None) -> dict[str, Any] | None:
        """A workflow run in one of this principal's teams."""
        return self._store.workflow_run(name, team_id, run_id) if self.authorize(team_id) is not None else None

    # -- workflow templates, cron jobs, heartbeats: the creator's -------------------------------------

    def save_workflow(self, name: str, definition: dict[str, Any]) -> None:
        """Save this principal's template ``name``."""
        self._store.save_workflow(self.who, name, definition)

    def get_workflow(self, name: str) -> dict[str, Any] | None:
        """The caller's template ``name``, or None."""
        return self._store.get_workflow(self.who, name)

    def list_workflows(self) -> list[dict[str, Any]]:
        """The caller's templates."""
        return self._store.list_workflows(self.who)

    def delete_workflow(self, name: str) -> bool:
        """Delete this principal's template ``name``."""
        return self._store.delete_workflow(self.who, name)

    def create_cron(self, job: dict[str, Any]) -> dict[str, Any]:
        """A cron job created by this principal."""
        return self._store.create_cron({**job, "created_by": self.who, "acting_for": chain_record(self.principal)})

    def get_cron(self, job_id: str) -> dict[str, Any] | None:
        """One of this principal's cron jobs, or None."""
        job = self._store.get_cron(job_id)
        return job if job is not None and job["created_by"] == self.who else None

    def list_cron(self) -> list[dict[str, Any]]:
        """The caller's cron jobs."""
        return [j for j in self._store.list_cron() if j["created_by"] == self.who]

    def update_cron(self, job_id: str, **fields: Any) -> dict[str, Any] | None:
        """Change one of this principal's cron jobs; None as for a missing one."""
        return self._store.update_cron(job_id, **fields) if self.get_cron(job_id) is not None else None

    def delete_cron(self, job_id: str) -> bool:
        """Delete one of this principal's cron jobs; False as for a missing one."""
        return self.get_cron(job_id) is not None and self._store.delete_cron(job_id)

    def create_heartbeat(self, beat: dict[str, Any]) -> dict[str, Any]:
        """A heartbeat created by this principal."""
        return self._store.create_heartbeat(
            {**beat, "created_by": self.who, "acting_for": chain_record(self.principal)}
        )

    def get_heartbeat(self, beat_id: str) -> dict[str, Any] | None:
        """One of this principal's heartbeats, or None."""
        beat = self._store.get_heartbeat(beat_id)
        return beat if beat is not None and beat["created_by"] == self.who else None

    def list_heartbeats(self) -> list[dict[str, Any]]:
        """The caller's heartbeats."""
        return [b for b in self._store.list_heartbeats() if b["created_by"] == self.who]

    def update_heartbeat(self, beat_id: str, **fields: Any) -> dict[str, Any] | None:
        """Change one of this principal's heartbeats; None as for a missing one."""
        return self._store.update_heartbeat(beat_id, **fields) if self.get_heartbeat(beat_id) is not None else None

    def delete_heartbeat(self, beat_id: str) -> bool:
        """Delete one of this principal's heartbeats; False as for a missing one."""
        return self.get_heartbeat(beat_id) is not None and self._store.delete_heartbeat(beat_id)
