"""Aleph's tools for llm: the ``Aleph`` toolbox (``llm -T Aleph``), every call through Aleph's chokepoint.

llm runs tools synchronously, and so does the chokepoint's synchronous core
(:meth:`aleph.ScopedToolService.call_sync`): a call of a sync tool is judged, validated and run on the
calling thread with no event loop at all. Aleph keeps per-runtime async state (MCP connections, the ledger
writer), so for a step that waits (an async tool, asking a person, a mutating call's durable ledger row)
the toolbox owns one event loop for its Aleph runtime and runs it on the thread that calls the tool, for
the length of that step (the same loop every time: no thread switch and no new loop per call). Between
calls that loop does not run: an MCP server's notifications wait for the next call. A step that waits,
called where another event loop is running on the calling thread (llm's async chains call a sync tool
inline), runs on one worker thread instead, and blocks that loop as any sync tool does.
The tools keep the names Aleph gives them.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import llm

import aleph

__all__ = ["Aleph", "ApprovalPause", "register_tools"]

APPROVAL_MODES = ("terminal", "pause")
WORKER_NAME = "llm-aleph"
"""The name of the one worker thread a toolbox starts when it is called under another running loop."""

_T = TypeVar("_T")


def _run_shape(llm_tool_call: llm.ToolCall, **arguments: Any) -> Any:
    """The shape of every tool implementation the toolbox hands llm (see ``Aleph._implementation``)."""


_RUN_SIGNATURE = inspect.signature(_run_shape)


class _Loop:
    """The toolbox's event loop: run on the calling thread for each call, by one thread at a time."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()  # held by the thread running the loop
        self._worker_lock = threading.Lock()
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None

    def call(self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
        """Run ``fn(*args)`` on the loop and return its result (from any thread; blocks until it is done)."""
        # The loop running on this thread, or None (get_running_loop's own test, without raising on None).
        running = asyncio._get_running_loop()
        if running is None:
            return self._run(fn, args)
        if running is self.loop:
            raise RuntimeError("an Aleph tool was called from inside the toolbox's own event loop")
        # Another loop runs on this thread: ours cannot run here too, so the worker runs it.
        if self._worker is None:
            with self._worker_lock:
                if self._worker is None:
                    self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=WORKER_NAME)
        return self._worker.submit(self._run, fn, args).result()

    def _run(self, fn: Callable[..., Coroutine[Any, Any, _T]], args: tuple[Any, ...]) -> _T:
        with self._lock:
            if self.loop.is_closed():
                raise RuntimeError("the Aleph toolbox is closed: prepare it again (or make a new one)")
            task = self.loop.create_task(fn(*args))
            try:
                # One pass of the loop first (stop before run_forever: it polls once and runs what is
                # ready, the task's first step); most calls finish in it, at half the cost of
                # run_until_complete's two passes. A call that waits on something goes on until done.
                self.loop.stop()
                self.loop.run_forever()
                if not task.done():
                    self.loop.run_until_complete(task)
                return task.result()
            except BaseException:  # interrupted (Ctrl-C): the call's task is cancelled, not left pending
                if not task.done():
                    task.cancel()
                    self.loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
                raise

    def stop(self) -> None:
        """Cancel what is still pending on the loop, close it and stop the worker thread, if any."""
        try:
            if not self.loop.is_closed():
                self.call(_drain)
        finally:
            with self._lock:
                if not self.loop.is_closed():
                    self.loop.close()
            with self._worker_lock:
                worker, self._worker = self._worker, None
            if worker is not None:
                worker.shutdown(wait=True)


async def _drain() -> None:
    loop = asyncio.get_running_loop()
    tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await loop.shutdown_asyncgens()


class ApprovalPause(llm.PauseChain):
    """Raised out of the chain when a call needs a human and the toolbox was made with ``approval="pause"``.

    ``request`` is what to show (summary, reason, fingerprint). Answer with :meth:`Aleph.answer`, then
    resume the chain (e.g. ``response.execute_tool_calls(tool_calls_list=[pause.tool_call])``).
    """

    def __init__(self, request: aleph.ApprovalRequest) -> None:
        super().__init__(f"{request.summary}: {request.reason}")
        self.request = request


class Aleph(llm.Toolbox):  # type: ignore[misc]
    """Every tool Aleph offers, under Aleph's policy, approval and signed ledger.

    :param config: an ``aleph.toml`` (default: ``$ALEPH_CONFIG`` or ``./aleph.toml``).
    :param workspace: the directory the tools work in (default: the config's directory or the cwd).
    :param agent: the agent name (its ``[agents.<name>]`` layer, allow-set and ledger chain).
    :param session: the session key (session grants, the event log); default one per toolbox.
    :param approval: ``"terminal"`` asks on the terminal; ``"pause"`` pauses the chain (llm's ``PauseChain``).
    """

    # llm offers every public method of a toolbox to the model: these two are for the program only.
    _blocked = (*llm.Toolbox._blocked, "answer", "close")

    def __init__(
        self,
        config: str | None = None,
        workspace: str | None = None,
        agent: str = "llm",
        session: str | None = None,
        approval: str = "terminal",
    ) -> None:
        if approval not in APPROVAL_MODES:
            raise ValueError(f"approval must be one of {', '.join(APPROVAL_MODES)}, got {approval!r}")
        self._settings = (config, workspace, agent, session or f"llm-{uuid.uuid4().hex[:12]}", approval)
        self._deferred = aleph.DeferredApprovals()
        self._loop: _Loop | None = None
        self._runtime: aleph.Aleph | None = None
        self._service: aleph.ScopedToolService | None = None

    def tools(self) -> Any:
        """The llm tools, one per tool the chokepoint lists; starts Aleph the first time.

        llm reads a toolbox's tools when it builds the prompt, before it calls ``prepare``, so the
        runtime starts here.
        """
        self.prepare()
        return super().tools()

    def prepare(self) -> None:
        """Start Aleph (on the toolbox's event loop) and add one llm tool per tool the chokepoint lists."""
        if self._loop is not None:
            return
        self._loop = _Loop()
        atexit.register(self.close)
        try:
            definitions = self._loop.call(self._open)
        except BaseException:
            self.close()
            raise
        # Prepared again after a close: the chokepoint's list now replaces the one added last time.
        self._extra_tools = [t for t in self._extra_tools if getattr(t, "plugin", None) != "llm-aleph"]
        for definition in definitions:
            self.add_tool(
                llm.Tool(
                    name=definition.name,
                    description=definition.description,
                    input_schema=definition.input_schema,
                    implementation=self._implementation(definition.name),
                    plugin="llm-aleph",
                )
            )

    async def _open(self) -> list[aleph.ToolDefinition]:
        config, workspace, agent, session, approval = self._settings
        runtime = aleph.load(config, workspace=workspace)
        await runtime.__aenter__()
        self._runtime = runtime
        requester: aleph.ApprovalRequester = aleph.TerminalRequester() if approval == "terminal" else self._deferred
        self._service = runtime.tool_service(
            agent=agent, turn=aleph.TurnContext(session_key=session), requester=requester
        )
        return await self._service.list()

    def _implementation(self, name: str) -> Any:
        def run(llm_tool_call: llm.ToolCall, **arguments: Any) -> Any:
            loop, service = self._loop, self._service
            if loop is None or service is None:
                raise RuntimeError("the Aleph toolbox is closed: prepare it again (or make a new one)")
            base = service.turn or aleph.TurnContext()
            scoped = service.derive(turn=base.with_call_id(llm_tool_call.tool_call_id))
            try:
                # The chokepoint's synchronous core: a sync tool is judged and run right here, with no
                # event loop; only a step that waits (an async tool, a person, the ledger) runs on ours.
                output = scoped.call_sync(name, arguments, runner=loop.call)
            except aleph.ApprovalRequired as exc:
                raise ApprovalPause(exc.request) from None
            return output.value if isinstance(output.value, str) else output.text

        run.__name__ = name
        # llm reads the implementation's signature on every tool call (to see whether it takes
        # ``llm_tool_call``); a signature given here is read back as it is, not rebuilt (1.1 against 6.8 µs).
        run.__signature__ = _RUN_SIGNATURE  # type: ignore[attr-defined]
        return run

    def answer(self, request: aleph.ApprovalRequest | str, answer: bool | aleph.ApprovalResponse) -> None:
        """Answer a paused call (its request or fingerprint): ``True``, ``False`` or an ``ApprovalResponse``."""
        fingerprint = request if isinstance(request, str) else request.fingerprint
        if isinstance(answer, bool):
            answer = aleph.ApprovalResponse(aleph.ApprovalOutcome.APPROVED if answer else aleph.ApprovalOutcome.DENIED)
        self._deferred.answer(fingerprint, answer)

    def close(self) -> None:
        """Close the Aleph runtime and its event loop; the toolbox can be prepared again afterwards."""
        if self._loop is None:
            return
        loop, runtime = self._loop, self._runtime
        self._loop = self._runtime = self._service = None
        atexit.unregister(self.close)
        try:
            if runtime is not None:
                loop.call(runtime.aclose)
        finally:
            loop.stop()


@llm.hookimpl  # type: ignore[misc]
def register_tools(register: Any) -> None:
    """Offer the ``Aleph`` toolbox to llm (``llm -T Aleph``)."""
    register(Aleph)
