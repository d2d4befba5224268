"""Aleph's tools as LangChain tools, with Aleph's "ask" as a LangGraph ``interrupt()``.

::

    tools = await langchain_tools(rt.tool_service(agent="main"))
    agent = create_agent(model, tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "chat-42"}}
    result = await agent.ainvoke({"messages": [("user", "tidy the notes")]}, config)
    while "__interrupt__" in result:                                   # stopped on an ask
        answers = {i.id: {"type": "approve"} for i in result["__interrupt__"]}   # or {"type": "reject", ...}
        result = await agent.ainvoke(Command(resume=answers), config)

Each tool runs its call through the chokepoint. When the chokepoint asks, the tool calls LangGraph's
``interrupt()`` with a request in the human-in-the-loop middleware's per-call shape (``type:
"tool_approval"``, ``tool_call_id``, ``name``, ``args``, ``description``, plus Aleph's request under
``aleph``), so clients built for that middleware can answer it. The resume value is one of the middleware's
decisions (``approve``, ``edit`` with the human's arguments, ``reject`` with a message, ``respond``), or
``True`` / ``False`` / an :class:`aleph.ApprovalResponse`. The answer goes back to the chokepoint for exactly
that call, which records it (a "no" included). The session key is the thread's ``thread_id``. Interrupts
need a checkpointer, as in any LangGraph graph; the tools are async (``ainvoke``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aleph import ApprovalOutcome, ApprovalRequired, ApprovalResponse, ScopedToolService, ToolDefinition, ToolError
from aleph.integrations._common import CallBridge, approval_payload, missing, response_from

try:
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, ToolException
    from langgraph.types import interrupt
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised by the import-error test in a subprocess
    raise missing("langchain", "langchain", exc) from exc

__all__ = ["AlephTool", "langchain_tools"]


async def langchain_tools(service: ScopedToolService) -> list[AlephTool]:
    """One LangChain tool per tool the chokepoint lists now for ``service``, with Aleph's schema."""
    bridge = CallBridge(service)
    return [AlephTool.from_definition(bridge, definition) for definition in await bridge.definitions()]


class AlephTool(BaseTool):
    """One Aleph tool as a LangChain tool; every call passes the chokepoint (build with :func:`langchain_tools`)."""

    handle_tool_error: bool = True
    _bridge: CallBridge = PrivateAttr()

    @classmethod
    def from_definition(cls, bridge: CallBridge, definition: ToolDefinition) -> AlephTool:
        """The tool for ``definition``, calling through ``bridge``."""
        tool = cls(name=definition.name, description=definition.description, args_schema=definition.input_schema)
        tool._bridge = bridge
        return tool

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # Aleph validates the input itself; the tool call id keys the turn and the approval request.
        if not isinstance(tool_input, dict):
            raise ToolException(f"invalid input for tool {self.name}: give the arguments as a JSON object")
        return (), {"arguments": dict(tool_input), "call_id": tool_call_id}

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise ToolException(
            f"tool {self.name} is asynchronous: run the agent or graph with ainvoke / astream, not invoke"
        )

    async def _arun(self, arguments: dict[str, Any], call_id: str | None, config: RunnableConfig) -> Any:
        configurable = config.get("configurable") or {}
        thread = configurable.get("thread_id")
        session_key = str(thread) if thread is not None else None
        run_id = config.get("run_id")
        run = str(run_id) if run_id else None
        try:
            try:
                output = await self._bridge.execute(
                    self.name, arguments, session_key=session_key, run_id=run, call_id=call_id
                )
            except ApprovalRequired as exc:
                decision = interrupt(_request(self.name, call_id, exc))
                answer, arguments, said = _decision(decision, self.name, arguments)
                if said is not None:
                    return said
                output = await self._bridge.execute(
                    self.name, arguments, session_key=session_key, run_id=run, call_id=call_id, answer=answer
                )
        except ApprovalRequired as exc:
            # Approved, but for other arguments than the call now has: never run it unseen.
            raise ToolException(f"{exc} The answer given was for a different call.") from None
        except ToolError as exc:
            raise ToolException(str(exc)) from None
        return output.value if isinstance(output.value, str) else output.text


def _request(name: str, call_id: str | None, exc: ApprovalRequired) -> dict[str, Any]:
    request = exc.request
    return {
        "type": "tool_approval",
        "tool_call_id": call_id or "",
        "name": name,
        "args": request.arguments,
        "description": f"{request.summary}\n\n{request.reason}",
        "aleph": approval_payload(request),
    }


def _decision(value: Any, name: str, arguments: dict[str, Any]) -> tuple[ApprovalResponse, dict[str, Any], str | None]:
    """(answer, arguments to run with, text to answer with instead of running) from a resume value."""
    if not (isinstance(value, Mapping) and isinstance(value.get("type"), str)):
        try:
            return response_from(value), arguments, None
        except ValueError as exc:
            raise ToolException(str(exc)) from None
    kind = value["type"]
    message = value.get("message")
    if kind == "approve":
        return ApprovalResponse(ApprovalOutcome.APPROVED), arguments, None
    if kind == "reject":
        return ApprovalResponse(ApprovalOutcome.DENIED, message if isinstance(message, str) else None), arguments, None
    if kind == "edit":
        action = value.get("edited_action")
        args = action.get("args") if isinstance(action, Mapping) else None
        if not isinstance(action, Mapping) or not isinstance(args, Mapping) or action.get("name", name) != name:
            raise ToolException(f"an edit decision for {name} must carry edited_action with name {name!r} and args")
        # The human wrote these arguments: their approval covers exactly them.
        return ApprovalResponse(ApprovalOutcome.APPROVED), dict(args), None
    if kind == "respond":
        if not isinstance(message, str):
            raise ToolException(f"a respond decision for {name} must carry a message")
        return ApprovalResponse(ApprovalOutcome.DENIED), arguments, message
    raise ToolException(f"unknown decision type {kind!r} for {name}; use approve, edit, reject or respond")
