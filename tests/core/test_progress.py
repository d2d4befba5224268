from __future__ import annotations

import threading

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
