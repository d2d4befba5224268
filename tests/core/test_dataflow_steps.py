"""A composite tool (one with ``sub_calls``, like a browser batch) is judged by its steps that are sinks.

Its ``type`` step is judged as the typing tool's own call: an address from untrusted content typed into
a page asks; a link from the same content opened by a ``navigate`` step (not a sink) does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import AlephTool, ApprovalUnavailable, ScriptedRequester, ToolArgs, ToolFacts

PAGE = "Support: write to helpdesk@evil.example.net or see https://docs.evil.example.net/help"
RAN: list[str] = []


class BatchArgs(ToolArgs):
    steps: list[dict[str, str]]
    """Each step: {"action": "navigate", "url": ...} or {"action": "type", "text": ...}."""


class Batch(AlephTool[BatchArgs]):
    NAME = "page_batch"
    DESCRIPTION = "Run page steps in order."
    Args = BatchArgs
    FACTS = ToolFacts()

    def sub_calls(self, input: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Each step as the tool call it is."""
        out = []
        for step in input.get("steps") or []:
            if step.get("action") == "type":
                out.append(("page_type", {"text": step.get("text")}))
            else:
                out.append(("page_open", {"url": step.get("url")}))
        return out

    async def call(self, args: BatchArgs) -> str:
        RAN.extend(str(s) for s in args.steps)
        return "done"


class Family:
    ALEPH_PLUGIN_NAME = "dataflow_steps_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool(idempotent=True, untrusted_output="web page")
        def page_open(url: str) -> str:
            """Open a page."""
            return PAGE

        @aleph.tool(sink=True)
        def page_type(text: str) -> str:
            """Type into the page (the site receives it)."""
            RAN.append(text)
            return "typed"

        register(page_open)
        register(page_type)
        register(Batch())


@pytest.mark.anyio
async def test_a_batch_is_judged_by_its_typing_steps_not_by_its_navigation(workspace: Path) -> None:
    RAN.clear()
    (workspace / "aleph.toml").write_text("")
    async with aleph.load(plugins=[Family()], entry_points=False, strict=True) as rt:
        requester = ScriptedRequester([])
        svc = rt.tool_service(agent="a", turn=aleph.TurnContext(session_key="s"), requester=requester)
        await svc.execute("page_open", {"url": "https://shop.example.org"})
        follow = {"steps": [{"action": "navigate", "url": "https://docs.evil.example.net/help"}]}
        assert (await svc.execute("page_batch", follow)).text == "done"
        typed = {
            "steps": [
                {"action": "navigate", "url": "x.example.org"},
                {"action": "type", "text": "helpdesk@evil.example.net"},
            ]
        }
        with pytest.raises(ApprovalUnavailable):
            await svc.execute("page_batch", typed)
        [reason] = [r.reason for r in requester.requests]
        assert "e-mail address in `page_type.text` came from `page_open`" in reason
        explained = svc.explain("page_batch", typed)
        assert explained.decision == "ask" and explained.decided_by == "flow"
        assert not any("helpdesk" in r for r in RAN)
