"""The ``teams`` plugin: teams, tasks, mail, workflows and schedules over a durable store."""

from __future__ import annotations

from typing import Any

import aleph
from aleph_teams import hookspec
from aleph_teams._config import TeamsConfig
from aleph_teams._member import TeamsHost, build_runners
from aleph_teams._runners import AgentRunner
from aleph_teams._tools._mail import (
    InboxReadTool,
    LifecycleIdleTool,
    LifecycleRequestShutdownTool,
    LifecycleResolveShutdownTool,
    MessageSendTool,
    PlanResolveTool,
    PlanSubmitTool,
)
from aleph_teams._tools._schedule import (
    CronManageTool,
    HeartbeatCreateTool,
    HeartbeatDeleteTool,
    HeartbeatListTool,
    HeartbeatReportTool,
    HeartbeatToggleTool,
    HeartbeatUpdateTool,
)
from aleph_teams._tools._tasks import (
    TaskCommentTool,
    TaskCreateTool,
    TaskListTool,
    TaskReadArtifactTool,
    TaskReviewTool,
    TaskSubmitTool,
    TaskUpdateTool,
    TaskWaitTool,
    WorkflowStepReviewTool,
)
from aleph_teams._tools._team_extra import TeamFromTemplateTool, TeamSnapshotTool, TeamWorkflowCanvasTool
from aleph_teams._tools._teams import (
    TeamCreateTool,
    TeamDelegateTool,
    TeamDigestTool,
    TeamDisbandTool,
    TeamMemberAddTool,
    TeamMemberRemoveTool,
    TeamSetProtocolTool,
    TeamStatusTool,
    TeamUsageTool,
)
from aleph_teams._tools._workflow import WorkflowTool

ALEPH_PLUGIN_NAME = "teams"
ALEPH_HOOKSPECS = (hookspec,)

TOOLS = (
    TeamCreateTool,
    TeamDelegateTool,
    TeamStatusTool,
    TeamDisbandTool,
    TeamSetProtocolTool,
    TeamMemberAddTool,
    TeamMemberRemoveTool,
    TeamDigestTool,
    TeamFromTemplateTool,
    TeamSnapshotTool,
    TeamUsageTool,
    TeamWorkflowCanvasTool,
    MessageSendTool,
    InboxReadTool,
    PlanSubmitTool,
    PlanResolveTool,
    LifecycleIdleTool,
    LifecycleRequestShutdownTool,
    LifecycleResolveShutdownTool,
    TaskCreateTool,
    TaskUpdateTool,
    TaskListTool,
    TaskWaitTool,
    TaskCommentTool,
    TaskSubmitTool,
    TaskReadArtifactTool,
    TaskReviewTool,
    WorkflowTool,
    WorkflowStepReviewTool,
    CronManageTool,
    HeartbeatListTool,
    HeartbeatCreateTool,
    HeartbeatUpdateTool,
    HeartbeatDeleteTool,
    HeartbeatToggleTool,
    HeartbeatReportTool,
)


def collect_runners(context: aleph.PluginContext, config: TeamsConfig) -> dict[str, AgentRunner]:
    """Configured runners plus every runner a plugin registers through ``aleph_teams_agent_runners``."""
    runners = build_runners(config, str(context.workspace))

    def register(name: str, runner: Any) -> None:
        if not isinstance(name, str) or not name or not hasattr(runner, "run"):
            raise ValueError("register(name, runner) needs a non-empty name and an AgentRunner (an object with run)")
        if name in runners:
            raise ValueError(f"agent runner {name!r} is registered twice")
        runners[name] = runner

    context.call_hook("aleph_teams_agent_runners", register=register)
    return runners


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register the teams tools, the dispatcher and the scheduler services over one store."""
    config = context.config.section("teams", TeamsConfig)
    host = TeamsHost(context, config, collect_runners(context, config))
    context.add_cleanup(host.aclose)
    register(*(cls(host) for cls in TOOLS))
    from aleph_teams._service import Dispatcher, Scheduler

    context.add_service("teams-dispatcher", lambda: Dispatcher(host).run())
    if config.scheduler.enabled:
        context.add_service("teams-scheduler", lambda: Scheduler(host).run())


@aleph.hookimpl
def aleph_cli_commands(register: Any) -> None:
    """``aleph scheduler``: run the teams scheduler and dispatcher in the foreground."""
    from aleph_teams._cli import add_scheduler_parser

    register("scheduler", add_scheduler_parser)
