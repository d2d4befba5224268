"""Plugin with the reference tools the conformance suite's server scenarios call (test_simple_text, ...).

Loaded into a real ``aleph serve --http`` through a throw-away dist-info entry point (see test_conformance.py).
"""

from __future__ import annotations

import anyio

import aleph
from aleph import ExecutionFailed, ToolArgs, ToolFacts

_READ = ToolFacts(idempotent=True, concurrent_safe=True, tags=("conformance",))


class NoArgs(ToolArgs):
    pass


class SimpleText(aleph.AlephTool[NoArgs]):
    NAME = "test_simple_text"
    DESCRIPTION = "Return a simple text response (conformance fixture)."
    Args = NoArgs
    FACTS = _READ

    async def call(self, args: NoArgs) -> str:
        return "This is a simple text response for testing."


class ErrorHandling(aleph.AlephTool[NoArgs]):
    NAME = "test_error_handling"
    DESCRIPTION = "Always fail with a message (conformance fixture)."
    Args = NoArgs
    FACTS = _READ

    async def call(self, args: NoArgs) -> str:
        raise ExecutionFailed(self.NAME, "This tool intentionally returns an error for testing")


class WithProgress(aleph.AlephTool[NoArgs]):
    NAME = "test_tool_with_progress"
    DESCRIPTION = "Report progress three times (conformance fixture)."
    Args = NoArgs
    FACTS = _READ

    async def call(self, args: NoArgs) -> str:
        for step in (0, 50, 100):
            aleph.notify_tool_streaming_chunk(self.NAME, f"{step}%")
            await anyio.sleep(0.05)
        return "Progress complete"


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar) -> None:
    register(SimpleText(), ErrorHandling(), WithProgress())
