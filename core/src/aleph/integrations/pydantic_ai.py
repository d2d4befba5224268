"""Aleph's tools as a pydantic-ai toolset, with Aleph's "ask" as pydantic-ai's deferred approval.

::

    toolset = AlephToolset(rt.tool_service(agent="main"))
    agent = Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    result = await agent.run("tidy the notes")
    if isinstance(result.output, DeferredToolRequests):            # the run stopped on an ask
        answers = approvals(result.output, {call.tool_call_id: True for call in result.output.approvals})
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answers)

The toolset lists what the chokepoint lists (a denied tool is absent and refused if called anyway), with
the schemas Aleph sends. A call that needs a human raises pydantic-ai's ``ApprovalRequired`` with Aleph's
request (summary, reason, rule, fingerprint) as its metadata; the resumed call carries the human's answer
back to the chokepoint, which applies it to exactly that call and records it in the ledger. Retryable
Aleph errors and input the model can fix become ``ModelRetry``; everything else is a ``ToolFailed`` the
model sees. The session key is the run's ``conversation_id`` (it spans the runs of one conversation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aleph import (
    ApprovalOutcome,
    ApprovalRequired,
    ApprovalResponse,
    ScopedToolService,
    ToolError,
    ToolNotFound,
    ValidationFailed,
)
from aleph.integrations._common import CallBridge, approval_payload, missing, response_from

try:
    import pydantic_ai
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, ModelRetry, RunContext, ToolApproved
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # pragma: no cover - exercised by the import-error test in a subprocess
    raise missing("pydantic-ai", "pydantic-ai", exc) from exc

__all__ = ["AlephToolset", "approvals"]

# Aleph validates the arguments itself (and says what was wrong); pydantic-ai passes them through.
_PASS_THROUGH = SchemaValidator(schema=core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
_ANSWER_KEY = "aleph_answer"


class AlephToolset(AbstractToolset[Any]):
    """The tools of one :class:`aleph.ScopedToolService` as a pydantic-ai toolset.

    :param service: the chokepoint for this agent (``rt.tool_service(agent=..., channel=..., turn=...)``);
        its turn supplies whatever the run context does not (a conversation id replaces its session key).
    :param id: the toolset's id, unique among the agent's toolsets (needed for durable execution).
    :param max_retries: how often the model may retry a call that failed in a way it can fix.
    """

    def __init__(self, service: ScopedToolService, *, id: str | None = None, max_retries: int = 1) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self._bridge = CallBridge(service)
        self._id = id
        self._max_retries = max_retries

    @property
    def id(self) -> str | None:
        """The id given at construction."""
        return self._id

    @property
    def service(self) -> ScopedToolService:
        """The scoped service every call passes."""
        return self._bridge.service

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """What the chokepoint lists now, as pydantic-ai tools with Aleph's schemas."""
        tools: dict[str, ToolsetTool[Any]] = {}
        for definition in await self._bridge.definitions():
            tools[definition.name] = ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=definition.name,
                    description=definition.description,
                    parameters_json_schema=definition.input_schema,
                ),
                max_retries=self._max_retries,
                args_validator=_PASS_THROUGH,
            )
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the call through the chokepoint; an ask suspends the run, an answer resumes it."""
        answer: ApprovalResponse | None = None
        if ctx.tool_call_approved:
            meta = ctx.tool_call_metadata
            chosen = meta.get(_ANSWER_KEY) if isinstance(meta, Mapping) else None
            answer = response_from(chosen) if chosen is not None else ApprovalResponse(ApprovalOutcome.APPROVED)
        try:
            output = await self._bridge.execute(
                name,
                tool_args,
                session_key=ctx.conversation_id,
                run_id=ctx.run_id,
                call_id=ctx.tool_call_id,
                answer=answer,
            )
        except ApprovalRequired as exc:
            raise pydantic_ai.ApprovalRequired(metadata={"aleph": approval_payload(exc.request)}) from None
        except ToolError as exc:
            if exc.is_retryable or isinstance(exc, ValidationFailed | ToolNotFound):
                raise ModelRetry(str(exc)) from None
            raise ToolFailed(str(exc)) from None
        return output.value


def approvals(requests: DeferredToolRequests, answers: Mapping[str, Any]) -> DeferredToolResults:
    """pydantic-ai's results for a stopped run, carrying each human answer to Aleph's chokepoint.

    ``answers`` maps a tool call id of ``requests.approvals`` to ``True`` / ``False``, an
    :class:`aleph.ApprovalResponse` (e.g. ``APPROVED_FOR_SESSION``, or ``DENIED`` with the human's reason)
    or an outcome's value. Every answer, a "no" included, goes back through the tool, so the chokepoint
    applies it to exactly that call, records it in the ledger and tells the model what happened. (A plain
    ``ToolDenied`` also works, but pydantic-ai then answers the model itself and Aleph never sees the "no".)
    """
    pending = {call.tool_call_id for call in requests.approvals}
    unknown = sorted(set(answers) - pending)
    if unknown:
        raise ValueError(f"answers name tool calls that are not awaiting approval: {unknown}")
    results = DeferredToolResults()
    for call_id, answer in answers.items():
        response = response_from(answer)
        results.approvals[call_id] = ToolApproved()
        results.metadata[call_id] = {_ANSWER_KEY: {"outcome": response.outcome.value, "reason": response.deny_reason}}
    return results
