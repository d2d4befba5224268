"""Aleph teams: teams, tasks, mail, workflows and schedules over a durable store, crash-safe and under budget.

Members are run by agent runners the host provides (:class:`CallableRunner`, :class:`SubprocessRunner`,
:class:`A2ARunner`, or your own :class:`AgentRunner`), registered through the
``aleph_teams_agent_runners`` hook (see :mod:`aleph_teams.hookspec`).
"""

from __future__ import annotations

from typing import Any

from aleph_teams._member import MemberTools, TaskOutcome, TeamsHost
from aleph_teams._runners import AgentRunner, CallableRunner, MemberTask, RunResult, SubprocessRunner
from aleph_teams._store import PostgresDatabase, SqliteDatabase, StoreError, TeamStore, open_store

__all__ = [
    "A2ARunner",
    "AgentRunner",
    "CallableRunner",
    "MemberTask",
    "MemberTools",
    "PostgresDatabase",
    "RunResult",
    "SqliteDatabase",
    "StoreError",
    "SubprocessRunner",
    "TaskOutcome",
    "TeamStore",
    "TeamsHost",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "A2ARunner":  # a2a-sdk is optional: import it only when asked for
        from aleph_teams._a2a import A2ARunner

        return A2ARunner
    raise AttributeError(name)
