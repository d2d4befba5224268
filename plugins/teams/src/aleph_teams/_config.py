"""The ``[teams]`` configuration section."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["RunnerConfig", "SchedulerConfig", "TeamsConfig"]


class RunnerConfig(BaseModel):
    """``[teams.runners.<name>]``: a configured agent runner (programs register callables through the hook)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    type: Literal["subprocess", "a2a"]
    """``subprocess``: a CLI agent (the task on stdin, JSON lines out); ``a2a``: a remote A2A agent."""
    command: list[str] = Field(default_factory=list, max_length=256)
    """For ``subprocess``: the program and its arguments (no shell is involved)."""
    cwd: str | None = None
    """For ``subprocess``: the working directory (default: the workspace)."""
    env: dict[str, str] = Field(default_factory=dict)
    """For ``subprocess``: extra environment variables."""
    url: str | None = None
    """For ``a2a``: the agent's base URL (its card is read from ``/.well-known/agent-card.json``)."""
    timeout_seconds: float = Field(default=300.0, gt=0, le=86_400)
    """Default wall-clock limit of one task on this runner (a task's own timeout wins when shorter)."""
    max_output_bytes: int = Field(default=4_000_000, ge=1024, le=256_000_000)
    """For ``subprocess``: the most stdout a run may print before it is stopped."""

    @model_validator(mode="after")
    def _needs_target(self) -> RunnerConfig:
        if self.type == "subprocess" and not self.command:
            raise ValueError("a subprocess runner needs `command` (the program and its arguments)")
        if self.type == "a2a" and not self.url:
            raise ValueError("an a2a runner needs `url`")
        return self


class SchedulerConfig(BaseModel):
    """``[teams.scheduler]``: how cron jobs and heartbeats run inside ``aleph serve`` / ``aleph scheduler``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Run the scheduler as a background service of ``aleph serve``."""
    missed: Literal["skip", "run_once", "run_all"] = "run_once"
    """Runs missed while no scheduler was up: ``skip`` them, run the latest ``run_once``, or ``run_all`` (capped)."""
    max_catch_up: int = Field(default=10, ge=1, le=1000)
    """With ``run_all``, the most missed runs of one job replayed after a restart."""
    lease_seconds: float = Field(default=600.0, ge=5, le=86_400)
    """How long a claimed run keeps other schedulers off the job (a crashed scheduler's claim expires)."""
    max_idle_seconds: float = Field(default=30.0, gt=0, le=3600)
    """The longest the scheduler sleeps without re-reading jobs (changes wake it sooner)."""


class TeamsConfig(BaseModel):
    """``[teams]``: the store, the runners, the scheduler."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    store: str | None = None
    """``postgresql://…`` (or a libpq ``key=value`` string) for a store shared by several hosts; default:
    SQLite at ``<data_dir>/teams/teams.db``."""
    default_runner: str | None = None
    """The runner for members that name none."""
    runners: dict[str, RunnerConfig] = Field(default_factory=dict)
    """Configured runners by name."""
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    """Schedules."""
    templates_dir: str | None = None
    """A folder of extra team templates (``<name>.json``)."""
    max_wait_seconds: float = Field(default=600.0, ge=1, le=3600)
    """Upper bound of ``task_wait`` and ``inbox_read`` waits."""
