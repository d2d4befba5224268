"""bash and code_exec through the scoped chokepoint: the command-policy floor sees their shell text."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import make_runtime


@pytest.mark.anyio
async def test_floor_blocks_a_hardline_command_before_the_sandbox_runs_it(workspace: Path) -> None:
    (workspace / "keep.txt").write_text("still here")
    async with make_runtime(workspace) as rt:
        service = rt.tool_service(tier="full")
        bash = await service.call("bash", {"command": "cd / && rm -rf / --no-preserve-root"})
        shell = await service.call("code_exec", {"language": "sh", "code": "rm -rf ~"})
        allowed = await service.call("bash", {"command": "cat keep.txt"})
    assert ("permission_denied", "permission_denied") == (bash.error_kind, shell.error_kind)
    assert allowed.success and '"stdout":"still here"' in (allowed.output or "")
