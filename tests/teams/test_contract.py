from __future__ import annotations

from typing import Any

import aleph_teams.plugin

from aleph.testing import ToolContractTests


class TestTeamsContract(ToolContractTests):
    plugin = aleph_teams.plugin
    families = ("team", "message", "inbox", "plan", "lifecycle", "task", "workflow", "cron", "heartbeat")
    no_example = {
        "team_delegate": "needs an agent runner; tests/teams/test_runners.py runs members on all three runners",
        "team_from_template": "enrols other agents, which needs core's delegation door (no door outside the "
        "chokepoint the kit calls around); covered in tests/teams/test_tools.py",
        "team_disband": "asks for confirmation; tests/teams/test_tools.py approves it through a requester",
        "team_member_remove": "needs a member id of a team made in this run; covered in tests/teams/test_tools.py",
        "plan_resolve": "needs the id of a plan message; covered in tests/teams/test_tools.py",
        "lifecycle_request_shutdown": "a leader may not call it, and the kit calls as one agent; test_tools.py",
        "lifecycle_resolve_shutdown": "needs a shutdown request id; covered in tests/teams/test_tools.py",
        "task_update": "needs a task id; covered in tests/teams/test_tools.py",
        "task_comment": "needs a task id; covered in tests/teams/test_tools.py",
        "task_read_artifact": "needs a task id; covered in tests/teams/test_tools.py",
        "task_submit": "needs a task id (a missing one is refused); covered in tests/teams/test_tools.py",
        "task_review": "needs a task id; covered in tests/teams/test_tools.py",
        "workflow_step_review": "needs a task id; covered in tests/teams/test_tools.py",
        "team_status": "needs a team id; covered in tests/teams/test_tools.py",
        "team_set_protocol": "needs a team id; covered in tests/teams/test_tools.py",
        "team_member_add": "needs a team id; covered in tests/teams/test_tools.py",
        "team_digest": "needs a team id; covered in tests/teams/test_tools.py",
        "team_snapshot": "needs a team id; covered in tests/teams/test_tools.py",
        "team_usage": "needs a team id; covered in tests/teams/test_tools.py",
        "team_workflow_canvas": "needs a team id; covered in tests/teams/test_tools.py",
        "message_send": "needs a team id; covered in tests/teams/test_tools.py",
        "inbox_read": "needs a team id; covered in tests/teams/test_tools.py",
        "plan_submit": "needs a team id; covered in tests/teams/test_tools.py",
        "lifecycle_idle": "needs a team id; covered in tests/teams/test_tools.py",
        "heartbeat_update": "needs a heartbeat id; covered in tests/teams/test_tools.py",
        "heartbeat_delete": "needs a heartbeat id; covered in tests/teams/test_tools.py",
        "heartbeat_toggle": "needs a heartbeat id; covered in tests/teams/test_tools.py",
    }

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("team_create", {"name": "kit", "members": []}),
            ("task_create", {"subject": "loose task", "priority": "high"}),
            ("task_list", {}),
            ("task_wait", {"task_ids": ["missing"], "timeout_seconds": 1}),
            (
                "workflow",
                {
                    "action": "save",
                    "definition": {"name": "Kit Flow", "steps": [{"id": "a", "agent": "w1", "prompt": "do {input}"}]},
                },
            ),
            ("workflow", {"action": "list"}),
            (
                "cron_manage",
                {"action": "create", "name": "n", "prompt": "p", "schedule": {"type": "every", "every_ms": 60000}},
            ),
            ("cron_manage", {"action": "list"}),
            ("heartbeat_create", {"name": "hb", "probe_tool_name": "task_list", "interval_ms": 60000}),
            ("heartbeat_list", {}),
            ("heartbeat_report", {"action": "silent"}),
        ]
