"""A tool name that is not text (a lone surrogate) is "tool not found" on every path a name takes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph._contract._names import repair_tool_name, suggest_candidates
from aleph.testing import isolated_runtime

NAMES = ["\udcff", "alpha\udcff", "al\udcffpha", "ALPHA.\udcff", "\ud800" * 3, "a" * 4_000 + "\udcff", "x__\udcff__y"]


class _Plugin:
    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        async def handler(data: dict[str, Any]) -> dict[str, Any]:
            return {"ok": True}

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        register(aleph.LoopTool("alpha", "The alpha tool.", schema, handler))


def test_repair_and_suggestions_give_up_on_text_that_is_not_utf8() -> None:
    for name in NAMES:
        assert (None, []) == (repair_tool_name(name, ["alpha"]), suggest_candidates(name, ["alpha"]))


@pytest.mark.anyio
@pytest.mark.parametrize("name", NAMES)
async def test_services_answer_not_found_and_the_ledger_and_events_keep_working(workspace: Path, name: str) -> None:
    async with isolated_runtime(workspace, _Plugin()) as rt:
        for service in (rt.tool_service(), aleph.UnscopedToolService(rt.registry)):
            with pytest.raises(aleph.ToolNotFound) as info:
                await service.execute(name, {})
            str(info.value).encode()  # the message is printable and recordable
            assert "\\udc" in str(info.value) or "\\ud8" in str(info.value)
            assert await service.describe(name) is None
        result = await rt.tool_service().execute("alpha", {})
        assert {"ok": True} == json.loads(result.text)


def test_the_cli_says_not_found_for_a_name_that_is_not_utf8(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(workspace / "data").as_posix()}"\n')
    for action in (b"call", b"describe"):
        codes = []
        for name in (b"alp\xffha", b"nosuch"):  # argv bytes that are not UTF-8 arrive as lone surrogates
            argv = [sys.executable.encode(), b"-m", b"aleph", b"tools", action, name]
            done = subprocess.run(argv, cwd=workspace, capture_output=True, timeout=120, check=False)
            assert b"tool not found" in done.stderr and b"Traceback" not in done.stderr, done.stderr[-600:]
            codes.append(done.returncode)
        assert codes[0] == codes[1] != 0  # answered like any unknown name
