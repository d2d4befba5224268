"""Aleph as the ACP client: an external coding agent's hands are Aleph's own tools, through the chokepoint.

Every ``fs/read_text_file`` is a ``file_read``, every ``fs/write_text_file`` a ``file_write``, and every
``terminal/create`` a ``bash`` call, each submitted with :meth:`aleph.CallContext.subcall` from the
``acp_delegate`` call that is prompting the agent: the same principal, policy, tier, transactions,
command floor, approvals and ledger (each action its own row, naming the delegate call as its parent).
The agent's ``session/request_permission`` questions are answered by Aleph's policy for the action they
describe; a question the policy would ask a human goes to Aleph's approval gate. A refusal reaches the
agent as an error it can act on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    DeniedOutcome,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

import aleph

__all__ = ["Activity", "AlephAcpClient"]

MAX_TERMINALS = 16
MAX_TERMINAL_OUTPUT = 1024 * 1024
MAX_TRACKED_CALLS = 1000
_FS_ACTIONS = frozenset({"file_read", "file_write", "file_ops"})
_KIND_TO_TOOL = {
    "edit": "file_write",
    "delete": "file_ops",
    "move": "file_ops",
    "execute": "bash",
    "fetch": "web_fetch",
}


@dataclass
class Activity:
    """What the agent did during one prompt, for the delegate call's result."""

    text: list[str] = field(default_factory=list)
    thoughts: int = 0
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    permissions: list[dict[str, str]] = field(default_factory=list)
    tool_calls: int = 0


@dataclass
class _Terminal:
    command: str
    task: asyncio.Task[aleph.ToolOutput]
    output: str = ""
    exit_code: int | None = None
    truncated: bool = False


def _err(message: str) -> RequestError:
    return RequestError.invalid_params({"message": message})


class AlephAcpClient:
    """The ``acp.Client`` an external agent talks to; one per agent process, bound to a call per prompt."""

    def __init__(self, workspace: Path, *, contained: bool) -> None:
        self.workspace = workspace.resolve()
        self.contained = contained
        """The agent cannot write the workspace itself (bubblewrap): its edits can only come through fs/*."""
        self.call: aleph.CallContext | None = None
        self.activity = Activity()
        self._terminals: dict[str, _Terminal] = {}
        self._tool_calls: dict[str, dict[str, Any]] = {}

    def bind(self, call: aleph.CallContext | None) -> Activity:
        """Serve the agent's requests under ``call`` (None between prompts: every request is refused)."""
        self.call = call
        self.activity = Activity()
        return self.activity

    def _running(self) -> aleph.CallContext:
        if self.call is None:
            raise RequestError.invalid_request({"message": "no Aleph call is prompting this agent now"})
        return self.call

    def _relative(self, path: str) -> str:
        p = Path(path)
        if not p.is_absolute():
            return path
        try:
            return str(p.relative_to(self.workspace))
        except ValueError:
            # Outside the workspace: the files family refuses it with its own message.
            return path

    async def _subcall(self, name: str, payload: dict[str, Any], what: str) -> aleph.ToolOutput:
        call = self._running()
        try:
            return await call.subcall(name, payload)
        except aleph.ToolError as exc:
            self.activity.refused.append(f"{what}: {exc}")
            raise _err(str(exc)) from None

    # --- fs ---

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        rel = self._relative(path)
        whole = line is None and limit is None
        # A whole file is read as bytes (base64), so its line endings and last newline come back exactly.
        payload: dict[str, Any] = {"path": rel, "encoding": "base64"} if whole else {"path": rel, "line_numbers": False}
        if line is not None:
            payload["offset"] = max(1, line)
        if limit is not None:
            payload["limit"] = limit
        out = await self._subcall("file_read", payload, f"read {rel}")
        self.activity.reads.append(rel)
        content = _file_content(out)
        if whole:
            try:
                content = base64.b64decode(content).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                raise _err(f"{rel} is not UTF-8 text") from None
        elif content:
            content += "\n"
        return ReadTextFileResponse(content=content)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse | None:
        rel = self._relative(path)
        await self._subcall("file_write", {"path": rel, "content": content}, f"write {rel}")
        self.activity.writes.append(rel)
        return WriteTextFileResponse()

    # --- terminals: each one a bash call through the chokepoint ---

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        call = self._running()
        if len(self._terminals) >= MAX_TERMINALS:
            raise _err(f"at most {MAX_TERMINALS} terminals at once; release one first")
        line = shlex.join([command, *(args or [])]) if args else command
        if env:
            line = " ".join(shlex.quote(f"{e.name}={e.value}") for e in env) + " " + line
            line = "env " + line
        if cwd:
            line = f"cd {shlex.quote(self._relative(cwd))} && {line}"
        terminal_id = uuid.uuid4().hex[:12]
        task = asyncio.ensure_future(call.subcall("bash", {"command": line}))
        self._terminals[terminal_id] = _Terminal(line, task)
        self.activity.commands.append(line)
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def _settle(self, terminal_id: str, wait: bool) -> _Terminal:
        term = self._terminals.get(terminal_id)
        if term is None:
            raise _err(f"no terminal {terminal_id!r}")
        if wait:
            await asyncio.wait({term.task})
        if term.task.done() and term.exit_code is None:
            exc = term.task.exception() if not term.task.cancelled() else None
            if term.task.cancelled():
                term.output, term.exit_code = "(killed)", 137
            elif exc is not None:
                self.activity.refused.append(f"run {term.command}: {exc}")
                term.output, term.exit_code = f"refused by Aleph: {exc}", 126
            else:
                term.output, term.exit_code = _bash_result(term.task.result())
            if len(term.output.encode()) > MAX_TERMINAL_OUTPUT:
                term.output = term.output.encode()[-MAX_TERMINAL_OUTPUT:].decode(errors="ignore")
                term.truncated = True
        return term

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        term = await self._settle(terminal_id, wait=False)
        status = TerminalExitStatus(exit_code=term.exit_code) if term.exit_code is not None else None
        return TerminalOutputResponse(output=term.output, truncated=term.truncated, exit_status=status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        term = await self._settle(terminal_id, wait=True)
        return WaitForTerminalExitResponse(exit_code=term.exit_code)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse | None:
        term = self._terminals.get(terminal_id)
        if term is None:
            raise _err(f"no terminal {terminal_id!r}")
        term.task.cancel()  # cancelling the bash call kills its process
        await asyncio.wait({term.task})
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse | None:
        term = self._terminals.pop(terminal_id, None)
        if term is not None and not term.task.done():
            term.task.cancel()
            await asyncio.wait({term.task})
        return ReleaseTerminalResponse()

    async def release_all(self) -> None:
        """Kill every terminal still running (the prompt ended or was cancelled)."""
        for terminal_id in list(self._terminals):
            await self.release_terminal("", terminal_id)

    # --- permission questions: answered by Aleph's policy ---

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        call = self._running()
        known = self._tool_calls.get(tool_call.tool_call_id, {})
        merged = {**known, **{k: v for k, v in tool_call.model_dump().items() if v is not None}}
        name, payload = self._action_of(merged)
        allow = next((o for o in options if o.kind == "allow_once"), None) or next(
            (o for o in options if o.kind.startswith("allow")), None
        )
        reject = next((o for o in options if o.kind.startswith("reject")), None)
        title = str(merged.get("title") or name)
        try:
            if self.contained and name in _FS_ACTIONS:
                # The edit itself will come through fs/* and meet every gate then (a human too, when the
                # policy asks): here only a policy that refuses it outright says no, so nobody is asked twice.
                verdict = call.explain(name, payload)
                if verdict.decision == "deny":
                    reason = verdict.reason
                    await call.record("acp_permission_refused", f"{name} {payload.get('path', '')}: {reason}"[:500])
                    raise aleph.PermissionDenied(name, reason)
            else:
                await call.authorize(name, payload)  # policy decides; asks Aleph's human when it says "ask"
        except aleph.ToolError as exc:
            self.activity.permissions.append({"action": title, "answer": "rejected", "why": str(exc)})
            if reject is None:
                return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=reject.option_id))
        self.activity.permissions.append({"action": title, "answer": "allowed"})
        if allow is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    def _action_of(self, tool_call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The Aleph action a permission question describes; an unknown kind is judged as ``bash`` (fail closed)."""
        raw = tool_call.get("raw_input") if isinstance(tool_call.get("raw_input"), dict) else {}
        assert isinstance(raw, dict)
        kind = str(tool_call.get("kind") or "other")
        locations = tool_call.get("locations") or []
        first = locations[0].get("path") if locations and isinstance(locations[0], dict) else None
        path = first or raw.get("path") or raw.get("file_path")
        if kind == "read" and path:
            return "file_read", {"path": self._relative(str(path))}
        if kind == "edit" and path:
            return "file_write", {"path": self._relative(str(path)), "content": str(raw.get("content", ""))}
        if kind == "delete" and path:
            return "file_ops", {"action": "delete", "path": self._relative(str(path))}
        if kind == "fetch" and raw.get("url"):
            return "web_fetch", {"url": str(raw["url"])}
        command = raw.get("command")
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        if not command:
            command = str(tool_call.get("title") or "an unnamed action of the ACP agent")
        return _KIND_TO_TOOL.get(kind, "bash") if kind == "execute" else "bash", {"command": str(command)}

    # --- what the agent says ---

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", "")
        if kind == "agent_message_chunk":
            text = getattr(getattr(update, "content", None), "text", None)
            if text:
                self.activity.text.append(text)
                if self.call is not None:
                    aleph.notify_tool_streaming_chunk(self.call.tool, text)
        elif kind == "agent_thought_chunk":
            self.activity.thoughts += 1
        elif kind in ("tool_call", "tool_call_update"):
            data = update.model_dump()
            call_id = str(data.get("tool_call_id", ""))
            if call_id and (call_id in self._tool_calls or len(self._tool_calls) < MAX_TRACKED_CALLS):
                entry = self._tool_calls.setdefault(call_id, {})
                entry.update({k: v for k, v in data.items() if v is not None})
            if kind == "tool_call":
                self.activity.tool_calls += 1
            if self.call is not None:
                aleph.notify_tool_streaming_chunk(self.call.tool, f"[{getattr(update, 'title', 'tool call')}]\n")

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: acp.Agent) -> None:
        return None


def _file_content(out: aleph.ToolOutput) -> str:
    """``file_read``'s ``content`` field (the whole text when it does not answer JSON)."""
    text = out.text
    if text[:1] == "{":
        try:
            data = json.loads(text)
        except ValueError:
            return text
        if isinstance(data, dict) and isinstance(data.get("content"), str):
            return data["content"]
    return text


def _bash_result(out: aleph.ToolOutput) -> tuple[str, int]:
    try:
        data = json.loads(out.text)
    except ValueError:
        return out.text, 0
    if not isinstance(data, dict):
        return out.text, 0
    stdout = str(data.get("stdout", "") or data.get("output", ""))
    stderr = str(data.get("stderr", ""))
    code = data.get("exit_code", data.get("returncode", 0))
    changes = data.get("changes")
    if isinstance(changes, dict) and changes.get("status") not in (None, "committed", "empty", "unchanged"):
        # The command ran, but Aleph did not let its changes reach the workspace: the agent must know.
        note = changes.get("reason") or changes.get("status")
        return f"{stdout}{stderr}\n[aleph: the command's changes were not applied: {note}]", code or 1
    return stdout + stderr, int(code) if isinstance(code, int) else 0
