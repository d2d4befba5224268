"""Who runs a team member: the agent-runner protocol and the in-process and subprocess runners.

Aleph is a tool system, not an agent loop: the host provides the loop. A runner receives a
:class:`MemberTask` (what to do, and ``task.tools`` to call tools through the chokepoint as the member)
and returns a :class:`RunResult`. The A2A runner for remote agents lives in :mod:`aleph_teams._a2a`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from aleph import ExecutionFailed, ToolError

if TYPE_CHECKING:
    from aleph import ToolOutput

__all__ = ["AgentRunner", "CallableRunner", "MemberTask", "MemberToolbox", "RunResult", "SubprocessRunner"]

_MAX_LINE = 1_000_000


class MemberToolbox(Protocol):
    """Tools called as the member, through the chokepoint (the teams host's ``MemberTools`` has this shape)."""

    async def call(self, name: str, input: dict[str, Any], *, step: int | None = None) -> ToolOutput:
        """Call ``name`` as the member; raises :class:`~aleph.ToolError` like ``execute``."""
        ...

    def call_sync(
        self, name: str, input: dict[str, Any], *, step: int | None = None, timeout: float = 600
    ) -> ToolOutput:
        """:meth:`call` from a worker thread."""
        ...

    def report_usage(self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0) -> None:
        """Charge model usage to the task's budget."""
        ...


@dataclass(frozen=True, slots=True)
class MemberTask:
    """One task handed to a member's runner."""

    team_id: str
    task_id: str
    agent_id: str
    subject: str
    description: str
    protocol: str | None
    """The team protocol, to put into the member's context verbatim."""
    timeout_seconds: float
    attempt: int
    """1 for the first run; higher when a crashed or failed run is resumed (replayed calls answer at once)."""
    tools: MemberToolbox
    """Call tools as the member: ``await task.tools.call(name, input)``."""
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the task is cancelled; a runner stops its work when it sees it."""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def report_usage(self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0) -> None:
        """Report what the member's model spent; it counts against the task's budget at once."""
        self.tools.report_usage(input_tokens=input_tokens, output_tokens=output_tokens, cost=cost)

    def to_json(self) -> dict[str, Any]:
        """The task as a subprocess or remote agent receives it."""
        return {
            "type": "task",
            "team_id": self.team_id,
            "task_id": self.task_id,
            "agent_id": self.agent_id,
            "subject": self.subject,
            "description": self.description,
            "protocol": self.protocol,
            "timeout_seconds": self.timeout_seconds,
            "attempt": self.attempt,
        }


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a member produced: its reply, and the usage its model reported."""

    reply: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


@runtime_checkable
class AgentRunner(Protocol):
    """Runs one task for a member; raises :class:`aleph.ToolError` (or any exception) on failure."""

    async def run(self, task: MemberTask) -> RunResult:
        """Do the task; return the member's reply."""
        ...


class CallableRunner:
    """An in-process runner around a host function: ``fn(task) -> str | RunResult`` (sync or async).

    A sync function runs in a worker thread; it may call tools with ``task.tools.call_sync(...)``.
    """

    def __init__(self, fn: Callable[[MemberTask], Any]) -> None:
        if not callable(fn):
            raise TypeError("CallableRunner needs a callable")
        self.fn = fn

    async def run(self, task: MemberTask) -> RunResult:
        """Call the function and normalise its result."""
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(task)
        else:
            out = await asyncio.to_thread(self.fn, task)
            if inspect.isawaitable(out):
                out = await out
        return _as_result(out)


def _as_result(out: Any) -> RunResult:
    if isinstance(out, RunResult):
        return out
    if out is None:
        return RunResult("(No reply content)")
    return RunResult(out if isinstance(out, str) else json.dumps(out, ensure_ascii=False))


class SubprocessRunner:
    """A CLI agent as a child process, spoken to in JSON lines.

    The runner writes the task as one JSON line on the child's stdin. The child prints JSON lines:
    ``{"type": "tool_call", "id", "name", "input", "step"?}`` (answered on stdin with
    ``{"type": "tool_result", "id", "ok", "output" | "error", "kind"}``), ``{"type": "usage",
    "input_tokens", "output_tokens", "cost"}``, and finally ``{"type": "result", "reply"}``. Other
    output is taken as plain reply text, so a plain CLI that just prints works too. The child runs
    in its own process group: a timeout or a cancellation ends the whole group.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = 4_000_000,
        kill_grace_seconds: float = 2.0,
    ) -> None:
        if not command:
            raise ValueError("SubprocessRunner needs a command")
        self.command = list(command)
        self.cwd = cwd
        self.env = dict(env or {})
        self.max_output_bytes = max_output_bytes
        self.kill_grace_seconds = kill_grace_seconds

    async def run(self, task: MemberTask) -> RunResult:
        """Start the child, serve its tool calls, and return its result."""
        env = {
            **os.environ,
            **self.env,
            "ALEPH_TEAMS_TASK_ID": task.task_id,
            "ALEPH_TEAMS_TEAM_ID": task.team_id,
            "ALEPH_TEAMS_AGENT_ID": task.agent_id,
        }
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
                limit=_MAX_LINE,
            )
        except OSError as exc:
            raise ExecutionFailed(
                "team_delegate", f"agent runner not available: cannot start {self.command[0]!r}: {exc}"
            ) from exc
        try:
            return await self._converse(proc, task)
        finally:
            await self._stop(proc)

    async def _converse(self, proc: asyncio.subprocess.Process, task: MemberTask) -> RunResult:
        assert proc.stdin and proc.stdout and proc.stderr
        stderr_task = asyncio.ensure_future(proc.stderr.read(64_000))
        await _send(proc, task.to_json())
        plain: list[str] = []
        seen = 0
        reply: str | None = None
        while True:
            line = await proc.stdout.readline()
            if not line:
                break
            seen += len(line)
            if seen > self.max_output_bytes:
                raise ExecutionFailed("team_delegate", f"the agent printed more than {self.max_output_bytes} bytes")
            text = line.decode("utf-8", errors="replace").rstrip("\n")
            message = _parse(text)
            if message is None:
                plain.append(text)
                continue
            kind = message.get("type")
            if kind == "tool_call":
                await _send(proc, await self._tool_result(task, message))
            elif kind == "usage":  # reported at once, so the budget sees it before the next call
                task.report_usage(**_usage(message))
            elif kind == "result":
                reply = str(message.get("reply", ""))
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            else:
                plain.append(text)
        code = await proc.wait()
        err = (await stderr_task).decode("utf-8", errors="replace").strip()
        if code != 0 and reply is None:
            tail = f": {err[-1500:]}" if err else ""
            raise ExecutionFailed("team_delegate", f"the agent exited with status {code}{tail}")
        text = reply if reply is not None else "\n".join(plain).strip()
        return RunResult(text or "(No reply content)")

    async def _tool_result(self, task: MemberTask, message: dict[str, Any]) -> dict[str, Any]:
        call_id = message.get("id")
        name, payload, step = message.get("name"), message.get("input", {}), message.get("step")
        if (
            not isinstance(name, str)
            or not isinstance(payload, dict)
            or (step is not None and not isinstance(step, int))
        ):
            return {
                "type": "tool_result",
                "id": call_id,
                "ok": False,
                "kind": "validation",
                "error": "a tool_call needs a string `name`, an object `input` and an optional integer `step`",
            }
        try:
            output = await task.tools.call(name, payload, step=step)
        except ToolError as exc:
            return {"type": "tool_result", "id": call_id, "ok": False, "kind": exc.kind, "error": str(exc)}
        return {"type": "tool_result", "id": call_id, "ok": True, "output": output.value}

    async def _stop(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, self.kill_grace_seconds), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(proc.wait(), wait)
                return
            except TimeoutError:
                continue


async def _send(proc: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write((json.dumps(message, ensure_ascii=False) + "\n").encode())
        await proc.stdin.drain()


def _parse(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("type"), str) else None


def _usage(message: Mapping[str, Any]) -> dict[str, Any]:
    def num(key: str, kind: type) -> Any:
        value = message.get(key, 0)
        return kind(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else kind(0)

    return {
        "input_tokens": num("input_tokens", int),
        "output_tokens": num("output_tokens", int),
        "cost": num("cost", float),
    }
