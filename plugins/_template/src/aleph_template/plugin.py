"""The ``template`` plugin: one tool showing every part of the contract."""

from __future__ import annotations

from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts


class EchoArgs(ToolArgs):
    text: str = Field(max_length=10_000)
    """The text to send back (at most 10,000 characters)."""
    upper: bool = False
    """Return it in upper case."""


class TemplateEcho(AlephTool[EchoArgs]):
    NAME = "template_echo"
    DESCRIPTION = "Return the given text unchanged (or upper-cased). Replace me with a real tool."
    Args = EchoArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, inline=True)

    async def call(self, args: EchoArgs) -> dict[str, str]:
        return {"text": args.text.upper() if args.upper else args.text}


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register this family's tools; ``context`` gives config, workspace, data dir and cleanups."""
    register(TemplateEcho())
