"""``acp_delegate`` and ``acp_switch``: external coding agents (Agent Client Protocol) under Aleph's policy.

An agent named in ``[interop.acp_agents.<name>]`` runs as a subprocess speaking ACP on stdio, by default
inside bubblewrap with the workspace read-only: its only way to change the workspace is through Aleph
(see :mod:`aleph_interop._acp_client`). A session lives as long as its agent process; it belongs to the
agent (principal) that started it, and another principal's session id answers like a missing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import acp
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation
from pydantic import Field

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts
from aleph_interop._acp_client import AlephAcpClient
from aleph_interop._config import AcpAgentSettings
from aleph_interop._owner import owner_of_call

__all__ = ["AcpDelegate", "AcpSessions", "AcpSwitch", "agent_command"]

MAX_SESSIONS = 16
MAX_REPLY_CHARS = 50_000
START_TIMEOUT_S = 60.0


def agent_command(settings: AcpAgentSettings, workspace: Path, hidden: list[Path]) -> list[str]:
    """The argv that starts the agent: inside bubblewrap (workspace read-only, ``hidden`` folders empty)."""
    program = shutil.which(settings.command) or settings.command
    argv = [program, *settings.args]
    if settings.isolation == "none":
        return argv
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ExecutionFailed(
            "acp_delegate",
            "ACP agent isolation not available: bubblewrap (bwrap) is not installed; install it, or set "
            'isolation = "none" for this agent if you trust it to write only through Aleph',
        )
    # A private /tmp, then the workspace again (read-only) in case it lives under /tmp.
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    cmd += ["--ro-bind", str(workspace), str(workspace)]
    for folder in hidden:
        if folder.is_dir():
            cmd += ["--tmpfs", str(folder)]
    for extra in settings.writable:
        path = Path(os.path.expanduser(extra)).resolve()
        if path == workspace or workspace in path.parents or path in workspace.parents:
            raise ExecutionFailed("acp_delegate", f"writable folder {extra!r} overlaps the workspace; it must not")
        path.mkdir(parents=True, exist_ok=True)
        cmd += ["--bind", str(path), str(path)]
    cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    if not settings.network:
        cmd.append("--unshare-net")
    return [*cmd, "--chdir", str(workspace), "--", *argv]


@dataclass
class _Session:
    id: str
    owner: str
    agent: str
    client: AlephAcpClient
    acp_session: str = ""
    conn: Any = None
    process: Any = None
    loop: asyncio.AbstractEventLoop | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    holder: asyncio.Task[None] | None = None
    started_at: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.time)
    prompts: int = 0
    running: bool = False

    def summary(self) -> dict[str, Any]:
        alive = self.process is not None and self.process.returncode is None
        return {
            "session_id": self.id,
            "agent": self.agent,
            "status": "prompting" if self.running else ("idle" if alive else "ended"),
            "prompts": self.prompts,
            "started_at": self.started_at,
            "last_used": self.last_used,
        }


class AcpSessions:
    """The running ACP agent sessions of one runtime; every lookup names the owner."""

    def __init__(self, agents: dict[str, AcpAgentSettings], workspace: Path, hidden: list[Path]) -> None:
        self.agents = agents
        self.workspace = workspace.resolve()
        self.hidden = hidden
        self._sessions: dict[str, _Session] = {}

    def get(self, owner: str, session_id: str) -> _Session | None:
        """The owner's session; another principal's answers like a missing one (None)."""
        session = self._sessions.get(session_id)
        return session if session is not None and session.owner == owner else None

    def owned(self, owner: str) -> list[_Session]:
        return [s for s in self._sessions.values() if s.owner == owner]

    async def start(self, owner: str, agent: str) -> _Session:
        settings = self.agents.get(agent)
        if settings is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ExecutionFailed(
                "acp_delegate", f"no ACP agent named {agent!r} (configured: {known}); add [interop.acp_agents.{agent}]"
            )
        if len(self._sessions) >= MAX_SESSIONS:
            raise ExecutionFailed(
                "acp_delegate", f"at most {MAX_SESSIONS} ACP sessions at once; close one (acp_switch)"
            )
        argv = agent_command(settings, self.workspace, self.hidden)
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TERM") if k in os.environ}
        env.update({k: os.environ[k] for k in settings.env if k in os.environ})
        client = AlephAcpClient(self.workspace, contained=settings.isolation == "bubblewrap")
        session = _Session(uuid.uuid4().hex[:12], owner, agent, client)
        session.loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = session.loop.create_future()

        async def hold() -> None:
            try:
                # stderr goes nowhere: an unread pipe would fill and stall a chatty agent.
                async with acp.spawn_agent_process(
                    session.client,
                    argv[0],
                    *argv[1:],
                    env=env,
                    cwd=self.workspace,
                    transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
                ) as (conn, process):
                    session.conn, session.process = conn, process
                    ready.set_result(None)
                    await session.closing.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        session.holder = asyncio.ensure_future(hold())
        try:
            await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
            init = await asyncio.wait_for(
                session.conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
                    ),
                    client_info=Implementation(name="aleph", title="Aleph", version=aleph.__version__),
                ),
                START_TIMEOUT_S,
            )
            del init
            new = await asyncio.wait_for(session.conn.new_session(cwd=str(self.workspace)), START_TIMEOUT_S)
        except (OSError, TimeoutError, acp.RequestError) as exc:
            await self._stop(session)
            raise ExecutionFailed(
                "acp_delegate",
                f"ACP agent {agent!r} did not start: {exc or 'timed out'} (run its command by hand to see its errors)",
            ) from None
        session.acp_session = new.session_id
        self._sessions[session.id] = session
        return session

    async def _stop(self, session: _Session) -> None:
        # The SDK's own shutdown closes the agent's stdin, waits, then terminates and kills.
        session.closing.set()
        if session.holder is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(session.holder), 10)
        process = session.process
        if process is not None:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(process.wait(), 10)
            # Nobody reads the agent's stdout any more: close its pipes now rather than when collected.
            transport = getattr(process, "_transport", None)
            if transport is not None:
                transport.close()

    async def close(self, owner: str, session_id: str) -> bool:
        session = self.get(owner, session_id)
        if session is None:
            return False
        self._sessions.pop(session_id, None)
        await self._stop(session)
        return True

    async def close_all(self) -> None:
        """Stop every agent process (the runtime is closing)."""
        for session in list(self._sessions.values()):
            self._sessions.pop(session.id, None)
            if session.loop is asyncio.get_running_loop():
                await self._stop(session)
            elif session.process is not None and session.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    session.process.kill()


class DelegateArgs(ToolArgs):
    task: str = Field(min_length=1, max_length=100_000)
    """What the agent should do, in plain words."""
    agent: str | None = Field(default=None, max_length=64)
    """Which configured ACP agent starts a new session (``[interop.acp_agents.<name>]``)."""
    session_id: str | None = Field(default=None, max_length=40)
    """Continue this session instead (from an earlier result or ``acp_switch``)."""
    timeout_s: int | None = Field(default=None, ge=10, le=7200)
    """Longest the agent may work on this prompt (default: the agent's ``timeout_s``)."""


class AcpDelegate(AlephTool[DelegateArgs]):
    NAME = "acp_delegate"
    DESCRIPTION = (
        "Hand a coding task to an external agent that speaks the Agent Client Protocol (Gemini CLI, Claude "
        "Code's ACP adapter, ...). Its file reads, writes and commands go through Aleph's own tools and policy; "
        "its progress streams back; its reply is untrusted content. Continue a session with session_id."
    )
    Args = DelegateArgs
    # A sink (the task goes to an agent outside this runtime). Its output is mixed: what the agent said and
    # did is marked untrusted per call; the session id Aleph made stays trusted (continuing asks nothing).
    FACTS = ToolFacts(
        sink=True,
        idempotent=False,
        concurrent_safe=True,
        max_duration_ms=7_260_000,
        tags=("agents", "acp"),
    )

    def __init__(self, sessions: AcpSessions) -> None:
        self._sessions = sessions

    async def call(self, args: DelegateArgs) -> dict[str, Any]:
        call = aleph.current_call()
        if call is None:
            raise ExecutionFailed(self.NAME, "acp_delegate runs only through a tool service (it needs the chokepoint)")
        owner = owner_of_call()
        if args.session_id:
            session = self._sessions.get(owner, args.session_id)
            if session is None:
                raise ExecutionFailed(self.NAME, f"no ACP session {args.session_id!r} (see acp_switch list)")
            if session.loop is not asyncio.get_running_loop() or session.process.returncode is not None:
                await self._sessions.close(owner, session.id)
                raise ExecutionFailed(self.NAME, f"ACP session {args.session_id!r} has ended; start a new one")
        elif args.agent:
            session = await self._sessions.start(owner, args.agent)
        else:
            raise aleph.ValidationFailed(self.NAME, "give agent (to start a session) or session_id (to continue one)")
        settings = self._sessions.agents[session.agent]
        if session.lock.locked():
            raise ExecutionFailed(self.NAME, f"ACP session {session.id!r} is already working on a prompt")
        async with session.lock:
            activity = session.client.bind(call)
            session.running = True
            session.prompts += 1
            call.annotate(acp_session=session.id, acp_agent=session.agent)
            stop_reason = "end_turn"
            try:
                response = await asyncio.wait_for(
                    session.conn.prompt(session_id=session.acp_session, prompt=[acp.text_block(args.task)]),
                    args.timeout_s or settings.timeout_s,
                )
                stop_reason = str(response.stop_reason)
            except TimeoutError:
                with contextlib.suppress(Exception):
                    await session.conn.cancel(session_id=session.acp_session)
                stop_reason = "timed_out"
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.shield(session.conn.cancel(session_id=session.acp_session))
                raise
            except acp.RequestError as exc:
                raise ExecutionFailed(self.NAME, f"the ACP agent failed: {exc}") from None
            finally:
                await session.client.release_all()
                session.client.bind(None)
                session.running = False
                session.last_used = time.time()
        reply = "".join(activity.text)
        said = {
            "reply": reply[:MAX_REPLY_CHARS],
            "files_read": activity.reads,
            "files_written": activity.writes,
            "commands": activity.commands,
            "tool_calls": activity.tool_calls,
        }
        call = aleph.current_call()
        if call is not None:
            call.mark_untrusted(json.dumps(said, default=str) or "{}", "another agent's reply")
        return {
            "session_id": session.id,
            "agent": session.agent,
            "stop_reason": stop_reason,
            "reply": reply[:MAX_REPLY_CHARS],
            "reply_truncated": len(reply) > MAX_REPLY_CHARS,
            "files_read": activity.reads,
            "files_written": activity.writes,
            "commands": activity.commands,
            "refused": activity.refused,
            "permissions": activity.permissions,
            "tool_calls": activity.tool_calls,
            "untrusted": True,  # what another agent says is content, not instructions
        }


class SwitchArgs(ToolArgs):
    action: Literal["list", "cancel", "close"] = "list"
    """``list`` your sessions, ``cancel`` a session's running prompt, ``close`` a session (stops the agent)."""
    session_id: str | None = Field(default=None, max_length=40)
    """For cancel and close."""


class AcpSwitch(AlephTool[SwitchArgs]):
    NAME = "acp_switch"
    DESCRIPTION = (
        "Your ACP agent sessions: list them, cancel one's running prompt, or close one (its agent stops). "
        "To resume a session, call acp_delegate with its session_id."
    )
    Args = SwitchArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=True, tags=("agents", "acp"))

    def __init__(self, sessions: AcpSessions) -> None:
        self._sessions = sessions

    async def call(self, args: SwitchArgs) -> dict[str, Any]:
        owner = owner_of_call()
        if args.action == "list":
            return {"sessions": [s.summary() for s in self._sessions.owned(owner)]}
        if not args.session_id:
            raise aleph.ValidationFailed(self.NAME, f"session_id: required to {args.action}")
        session = self._sessions.get(owner, args.session_id)
        if session is None:
            raise ExecutionFailed(self.NAME, f"no ACP session {args.session_id!r} (see acp_switch list)")
        if args.action == "cancel":
            if not session.running:
                return {"cancelled": False, "session_id": session.id, "reason": "no prompt is running"}
            await session.conn.cancel(session_id=session.acp_session)
            return {"cancelled": True, "session_id": session.id}
        await self._sessions.close(owner, session.id)
        return {"closed": True, "session_id": session.id}
