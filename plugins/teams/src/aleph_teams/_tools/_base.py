"""What every teams tool shares: the host, the caller's identity, ledger references, error helpers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ValidationFailed
from aleph_teams._acting import caller_principal, consent
from aleph_teams._member import TeamsHost
from aleph_teams._store import StoreError
from aleph_teams._store._owned import OwnedStore

__all__ = ["ArgsT", "TeamsTool", "caller", "drop_empty", "json_object", "refs"]

ArgsT = TypeVar("ArgsT", bound=ToolArgs)


def caller() -> str:
    """The owner key of the running call's principal: everything this family stores for it is owned by it.

    ``main`` when the host named no agent (see :func:`aleph_teams._acting.caller_principal`).
    """
    return caller_principal().owner


def refs(**values: Any) -> None:
    """Put ids (team_id, task_id, ...) on the running call's signed ledger row."""
    call = aleph.current_call()
    if call is None:
        return
    clean = {k: str(v)[:256] for k, v in values.items() if v}
    if clean:
        call.annotate(**clean)


def drop_empty(value: dict[str, Any]) -> dict[str, Any]:
    """The mapping without None, empty-string, empty-list and False entries (the original omits them)."""
    return {k: v for k, v in value.items() if v is not None and v != "" and v != [] and v is not False}


def json_object(tool: TeamsTool[Any], field: str, text: str | None) -> dict[str, Any]:
    """A JSON object given as text (strict tool schemas cannot hold free-form objects); {} for None."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise tool.invalid(f"{field}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise tool.invalid(f"{field}: must be a JSON object, got {type(value).__name__}")
    return value


class TeamsTool(AlephTool[ArgsT]):
    """Base of the family's tools: holds the host; maps store refusals to the tool's errors."""

    FAMILY: ClassVar[str] = "teams"

    def __init__(self, host: TeamsHost) -> None:
        super().__init__()
        self.host = host

    @property
    def store(self) -> OwnedStore:
        """The family's store as the calling principal sees it (what it does not own looks missing)."""
        return OwnedStore(self.host.store, caller_principal())

    def fail(self, message: str) -> ExecutionFailed:
        """An error for the model (raise it)."""
        return ExecutionFailed(self.NAME, message)

    def invalid(self, message: str) -> ValidationFailed:
        """An input error naming what was wrong (raise it)."""
        return ValidationFailed(self.NAME, message)

    def team_for(self, team_id: str, who: str | None = None) -> dict[str, Any]:
        """The team if the caller leads it or is a member; else the same "not found" as for a missing team."""
        team = self.store.authorize(team_id, who)
        if team is None:
            raise self.fail(f"team `{team_id}` not found")
        refs(team_id=team_id)
        return team

    def task_for(self, task_id: str, who: str | None = None) -> dict[str, Any]:
        """A task the caller can reach (a foreign task looks exactly like a missing one)."""
        task = self.store.get_task(task_id) if who in (None, caller()) else None
        if task is None:
            raise self.fail(f"task '{task_id}' not found")
        refs(team_id=task["team_id"], task_id=task_id)
        return task

    def reachable(self, task: dict[str, Any], who: str) -> bool:
        """Whether ``who`` (the caller) reaches ``task`` (see :class:`OwnedStore`)."""
        return who == caller() and self.store.reachable(task)

    async def consent_to_join(self, team_name: str, leader: str, agent_ids: Iterable[str]) -> None:
        """Each agent other than the caller must accept running this team's work for the caller (core's door).

        An ACP reference (``acp:<harness>``) is an external CLI session the team starts itself, not a
        principal of this install: it runs as itself acting for the task's creator, with no consent to ask.
        """
        for agent in dict.fromkeys(agent_ids):
            if not agent.startswith("acp:"):
                await consent(
                    self.NAME, agent, f"join team '{team_name}' led by {leader} and run the tasks it is given"
                )

    def store_error(self, exc: StoreError) -> ExecutionFailed:
        """A store refusal as this tool's error."""
        return ExecutionFailed(self.NAME, str(exc))
