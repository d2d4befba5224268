"""The inherited ownership contract (``aleph.testing.OwnershipContractTests``) on the teams family's stores."""

from __future__ import annotations

import json
from typing import Any

import aleph_teams.plugin

from aleph import ScopedToolService, ToolResult
from aleph.testing import OwnershipContractTests

EVERY_MINUTE = {"type": "every", "every_ms": 60_000}


def _value(result: ToolResult) -> Any:
    assert result.success, result.error
    return json.loads(result.output or "null")


class TestCronJobOwnership(OwnershipContractTests):
    """Cron jobs: created, read, listed, changed and deleted by their creator only."""

    plugin = aleph_teams.plugin

    async def create_object(self, service: ScopedToolService) -> str:
        made = await service.call(
            "cron_manage", {"action": "create", "name": "nightly", "prompt": "sum up", "schedule": EVERY_MINUTE}
        )
        return str(_value(made)["job_id"])

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("cron_manage", {"action": "get", "job_id": object_id})

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        listed = _value(await service.call("cron_manage", {"action": "list"}))
        return {j["id"] for j in listed["jobs"]}

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("cron_manage", {"action": "update", "job_id": object_id, "prompt": "sum up twice"})

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("cron_manage", {"action": "delete", "job_id": object_id})
