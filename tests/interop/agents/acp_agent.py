"""A real ACP agent, built with the Python SDK, that does what its prompt says, one line a step.

Steps (one per line of the prompt):
  read PATH            fs/read_text_file and say how many characters came back
  ask-write PATH TEXT  session/request_permission (kind edit), then fs/write_text_file when allowed
  write PATH TEXT      fs/write_text_file without asking
  run CMD...           terminal/create, wait for exit, say the exit code and output
  ask-run CMD...       session/request_permission (kind execute) for CMD, then say the answer
  direct PATH TEXT     write the file itself with open(), behind the client's back
  say TEXT             just say it
  slow                 wait until cancelled
Each step's outcome is streamed as an agent message chunk; errors from the client are reported, not raised.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import acp
from acp import helpers
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PermissionOption, PromptResponse


class ScriptAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, **kwargs: Any) -> Any:
        return InitializeResponse(protocol_version=protocol_version, agent_capabilities=AgentCapabilities())

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        session_id = uuid.uuid4().hex
        self.cancelled[session_id] = asyncio.Event()
        self.cwd = cwd
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, helpers.update_agent_message_text(text + "\n"))

    def path(self, p: str) -> str:
        return p if p.startswith("/") else f"{self.cwd}/{p}"

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        text = "".join(getattr(block, "text", "") for block in prompt)
        for line in text.splitlines():
            verb, _, rest = line.strip().partition(" ")
            try:
                await self.step(session_id, verb, rest)
            except acp.RequestError as exc:
                await self.say(session_id, f"{verb} failed: {exc.data or exc}")
            if self.cancelled[session_id].is_set():
                return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def step(self, session_id: str, verb: str, rest: str) -> None:
        if verb == "read":
            out = await self.conn.read_text_file(session_id=session_id, path=self.path(rest))
            await self.say(session_id, f"read {len(out.content)} characters: {out.content[:40]!r}")
        elif verb in ("write", "ask-write"):
            path, _, content = rest.partition(" ")
            if verb == "ask-write":
                call_id = uuid.uuid4().hex[:8]
                await self.conn.session_update(
                    session_id, helpers.start_edit_tool_call(call_id, f"Write {path}", self.path(path), content)
                )
                answer = await self.conn.request_permission(
                    session_id=session_id,
                    tool_call=helpers.update_tool_call(call_id, status="pending"),
                    options=[
                        PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                        PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                    ],
                )
                chosen = getattr(answer.outcome, "option_id", "cancelled")
                await self.say(session_id, f"permission for {path}: {chosen}")
                if chosen != "yes":
                    return
            await self.conn.write_text_file(session_id=session_id, path=self.path(path), content=content)
            await self.say(session_id, f"wrote {path}")
        elif verb == "run":
            term = await self.conn.create_terminal(session_id=session_id, command="bash", args=["-c", rest])
            done = await self.conn.wait_for_terminal_exit(session_id=session_id, terminal_id=term.terminal_id)
            out = await self.conn.terminal_output(session_id=session_id, terminal_id=term.terminal_id)
            await self.conn.release_terminal(session_id=session_id, terminal_id=term.terminal_id)
            await self.say(session_id, f"exit {done.exit_code}: {out.output.strip()[:200]}")
        elif verb == "ask-run":
            call_id = uuid.uuid4().hex[:8]
            await self.conn.session_update(
                session_id, helpers.start_tool_call(call_id, f"Run {rest}", kind="execute", raw_input={"command": rest})
            )
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=helpers.update_tool_call(call_id, status="pending"),
                options=[
                    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                ],
            )
            await self.say(session_id, f"permission to run: {getattr(answer.outcome, 'option_id', 'cancelled')}")
        elif verb == "direct":
            path, _, content = rest.partition(" ")
            try:
                with open(self.path(path), "w") as fh:
                    fh.write(content)
                await self.say(session_id, f"direct write of {path} worked")
            except OSError as exc:
                await self.say(session_id, f"direct write of {path} failed: {exc.strerror}")
        elif verb == "say":
            await self.say(session_id, rest)
        elif verb == "slow":
            await self.say(session_id, "working slowly")
            await self.cancelled[session_id].wait()


async def main() -> None:
    await acp.run_agent(ScriptAgent())


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
