from __future__ import annotations

import threading

import pytest

import aleph
from aleph._progress import notify_tool_result, notify_tool_start, notify_tool_streaming_chunk


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def on_tool_start(self, tool_name: str, args_summary: str) -> None:
        self.events.append(("start", tool_name, args_summary))

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None:
        self.events.append(("result", tool_name, result_summary, str(success)))

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        self.events.append(("chunk", tool_name, chunk))


def test_notifiers_do_nothing_without_a_handler_and_reach_an_installed_one() -> None:
    aleph.set_tool_progress_handler(None)
    notify_tool_start("x", "")  # no handler: nothing happens
    rec = Recorder()
    previous = aleph.set_tool_progress_handler(rec)
    try:
        assert previous is None
        notify_tool_start("bash", "ls")
        notify_tool_streaming_chunk("bash", "a\n")
        notify_tool_result("bash", "ok", True)
    finally:
        aleph.set_tool_progress_handler(None)
    assert rec.events == [("start", "bash", "ls"), ("chunk", "bash", "a\n"), ("result", "bash", "ok", "True")]


def test_handler_runs_outside_the_lock_so_it_may_replace_itself() -> None:
    class Swapper(Recorder):
        def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
            done = threading.Event()
            threading.Thread(target=lambda: (aleph.set_tool_progress_handler(None), done.set())).start()
            assert done.wait(2), "handler was called with the slot lock held"

    aleph.set_tool_progress_handler(Swapper())
    notify_tool_streaming_chunk("x", "y")
    assert aleph._progress.get_tool_progress_handler() is None


class Broken(Recorder):
    def on_tool_start(self, tool_name: str, args_summary: str) -> None:
        raise RuntimeError("the UI is gone")

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None:
        raise RuntimeError("the UI is gone")

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        raise RuntimeError("the UI is gone")


def test_a_handler_that_raises_is_logged_once_and_never_reaches_the_caller(caplog: pytest.LogCaptureFixture) -> None:
    previous = aleph.set_tool_progress_handler(Broken())
    try:
        notify_tool_start("bash", "ls")
        notify_tool_streaming_chunk("bash", "a\n")
        notify_tool_result("bash", "ok", True)
    finally:
        aleph.set_tool_progress_handler(previous)
    failures = [r for r in caplog.records if "progress handler" in r.getMessage()]
    assert len(failures) == 1 and "the UI is gone" in (failures[0].exc_text or "")


@pytest.mark.anyio
async def test_a_call_through_the_chokepoint_keeps_its_result_when_the_handler_raises() -> None:
    async def echo(data: dict) -> dict:
        aleph.notify_tool_streaming_chunk("echo", "working")
        return {"echoed": data["text"]}

    registry = aleph.ToolRegistry()
    registry.register(aleph.LoopTool("echo", "Echoes.", {"type": "object"}, echo, facts=aleph.ToolFacts()))
    from aleph._chokepoint._scoped import Chokepoint, ScopedToolService
    from aleph._chokepoint._tiers import ExecTier

    service = ScopedToolService(Chokepoint(registry), tier=ExecTier.FULL)
    previous = aleph.set_tool_progress_handler(Broken())
    try:
        out = await service.execute("echo", {"text": "hi"})
    finally:
        aleph.set_tool_progress_handler(previous)
    assert out.value == {"echoed": "hi"}
