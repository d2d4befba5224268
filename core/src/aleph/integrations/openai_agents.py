"""Aleph's tools as OpenAI Agents SDK function tools, with Aleph's "ask" as the SDK's approval interruption.

::

    aleph_tools = AlephAgentTools(rt.tool_service(agent="main"))
    agent = Agent(name="main", model=model, tools=await aleph_tools.tools())
    result = await Runner.run(agent, "tidy the notes", context=Chat(session_key="chat-42"))
    while result.interruptions:                      # the run stopped on calls that need a human
        state = result.to_state()
        for item in result.interruptions:
            state.approve(item)                      # or: await aleph_tools.reject(state, item, "keep them")
        result = await Runner.run(agent, state)

Each tool's ``needs_approval`` asks the chokepoint (:meth:`aleph.ScopedToolService.decision_for`) whether
the call would need a human; if so the SDK interrupts the run with its own ``ToolApprovalItem``. A tool the
chokepoint allows whatever its arguments (:meth:`aleph.ScopedToolService.decision_by_name`) gets
``needs_approval=False`` when :meth:`AlephAgentTools.tools` builds it; if the policy changes under a run so
that such a call would ask, the call is refused (never run unasked): take the tools again. An approved
call reaches Aleph as an answer for exactly that call (tool + canonical arguments). The SDK's
``always_approve=True`` approves a tool for any arguments, which Aleph's gate never does: such a call is
refused with a message telling the model so, and is never run unseen. :meth:`AlephAgentTools.reject`
passes the "no" through the chokepoint (ledger, denial memory) before the SDK tells the model; a plain
``state.reject`` works too, but Aleph never hears of it. The session key comes from the run's context:
its ``session_key`` attribute or key, else the run config's ``group_id``, else the service's turn.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aleph import (
    ApprovalDenied,
    ApprovalOutcome,
    ApprovalRequired,
    ApprovalResponse,
    ScopedToolService,
    ToolDefinition,
    ToolError,
)
from aleph.integrations._common import CallBridge, missing

try:
    from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised by the import-error test in a subprocess
    raise missing("openai-agents", "openai-agents", exc) from exc

__all__ = ["AlephAgentTools"]

SessionKeyFrom = Callable[[RunContextWrapper[Any]], str | None]

# A call id no model ever sends: the SDK reports it approved only when a whole tool is approved for good.
_PROBE = f"aleph-standing-approval-probe-{uuid.uuid4().hex}"
_APPROVED = ApprovalResponse(ApprovalOutcome.APPROVED)


def _default_session_key(ctx: RunContextWrapper[Any]) -> str | None:
    context = ctx.context
    key = context.get("session_key") if isinstance(context, Mapping) else getattr(context, "session_key", None)
    if isinstance(key, str) and key:
        return key
    config = getattr(ctx, "run_config", None)
    group = getattr(config, "group_id", None)
    return group if isinstance(group, str) and group else None


class AlephAgentTools:
    """The tools of one :class:`aleph.ScopedToolService` as Agents SDK function tools.

    :param service: the chokepoint for this agent; its turn supplies what the run context does not.
    :param session_key: how to read the session key from the run context (default: the context's
        ``session_key`` attribute or key, else the run config's ``group_id``).
    """

    def __init__(self, service: ScopedToolService, *, session_key: SessionKeyFrom | None = None) -> None:
        self._bridge = CallBridge(service)
        self._session_key = session_key or _default_session_key

    @property
    def service(self) -> ScopedToolService:
        """The scoped service every call passes."""
        return self._bridge.service

    async def tools(self) -> list[FunctionTool]:
        """One function tool per tool the chokepoint lists now, with Aleph's schema."""
        return [self._function_tool(definition) for definition in await self._bridge.definitions()]

    def _function_tool(self, definition: ToolDefinition) -> FunctionTool:
        name = definition.name
        bridge, session_key = self._bridge, self._session_key
        # A tool every call of which the chokepoint allows, whatever its arguments, never needs the SDK's
        # approval: the runner is told so once, and no call of it pays for the question. execute still
        # judges each call; should the policy have changed since, an ask refuses (it never runs unasked).
        never_asks = bridge.service.decision_by_name(name) == "allow"

        async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            # The chokepoint's own decision for this call (what execute will decide), nothing asked or run;
            # nothing is recorded under the call id, so the run's turn serves as it is.
            service = bridge.scoped(name, params, session_key=session_key(ctx))
            return service.decision_for(name, params) == "ask"

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            try:
                params = json.loads(arguments or "{}")
            except ValueError as exc:
                return f"invalid input for tool {name}: the arguments are not JSON ({exc})"
            if not isinstance(params, dict):
                return f"invalid input for tool {name}: the arguments must be a JSON object"
            # A standing approval (always_approve) is asked about only where it matters: an approved call,
            # or one the chokepoint asks about. Most calls are neither, and each question costs a lookup.
            # A tool that never asks was never put to a human by the SDK, so there is no answer to carry.
            standing: bool | None = None
            answer = None
            if not never_asks and ctx.is_tool_approved(name, ctx.tool_call_id) is True:
                standing = ctx.is_tool_approved(name, _PROBE) is True
                answer = None if standing else _APPROVED
            try:
                output = await bridge.execute(
                    name, params, session_key=session_key(ctx), call_id=ctx.tool_call_id, answer=answer
                )
            except ApprovalRequired as exc:
                if standing is None:
                    standing = ctx.is_tool_approved(name, _PROBE) is True
                if standing:
                    return (
                        f"tool {name} needs a human's approval of these exact arguments; a standing approval "
                        "of the whole tool does not cover them, so it was not run. Ask the user to approve "
                        "this call on its own."
                    )
                return f"tool {name} needs a human's approval that this run did not ask for: {exc.request.reason}"
            except ToolError as exc:
                return str(exc)
            return output.text

        return FunctionTool(
            name=name,
            description=definition.description,
            params_json_schema=definition.input_schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,  # Aleph's schemas are sent as they are; Aleph validates the input
            needs_approval=False if never_asks else needs_approval,
        )

    async def reject(self, state: RunState[Any, Any], item: ToolApprovalItem, reason: str | None = None) -> str:
        """Reject ``item`` on ``state`` through the chokepoint, which records the "no"; returns what the model is told.

        The SDK then answers the model with Aleph's refusal instead of running the tool.
        """
        name = item.tool_name or getattr(item.raw_item, "name", None)
        call_id = getattr(item.raw_item, "call_id", None)
        if not isinstance(name, str) or not isinstance(call_id, str):
            raise ValueError(f"not a function tool approval item: {item!r}")
        try:
            params = json.loads(getattr(item.raw_item, "arguments", "") or "{}")
        except ValueError as exc:
            raise ValueError(f"the approval item's arguments are not JSON: {exc}") from exc
        context = getattr(state, "_context", None)
        session = self._session_key(context) if isinstance(context, RunContextWrapper) else None
        no = ApprovalResponse(ApprovalOutcome.DENIED, reason)
        message = f"The user did not approve running `{name}`."
        try:
            await self._bridge.execute(name, params, session_key=session, call_id=call_id, answer=no)
        except ApprovalDenied as exc:
            message = str(exc)
        except ToolError as exc:  # refused for another reason first (policy changed, bad input): say that
            message = str(exc)
        state.reject(item, rejection_message=message)
        return message
