"""llm-aleph against the real llm, with an offline llm Model of our own (no network, no API key).

The model makes its scripted tool calls, then answers with the tool results it was sent. The toolbox is
found the way the ``llm`` command finds it: through llm's plugin manager and the ``llm`` entry point.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llm
import pytest
from llm_aleph import Aleph, ApprovalPause

import aleph

POLICY = """
[policies.tool_permissions.overrides]
text_stats = "allow"
clock_now = "ask"
"""


class Scripted(llm.Model):
    model_id = "scripted"
    supports_tools = True

    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        self.calls = calls
        self.offered: list[list[str]] = []

    def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Iterator[str]:
        self.offered.append(sorted(t.name for t in prompt.tools))
        if prompt.tool_results:
            yield " | ".join(r.output for r in prompt.tool_results)
            return
        for n, (name, args) in enumerate(self.calls):
            response.add_tool_call(llm.ToolCall(name=name, arguments=args, tool_call_id=f"call-{n}"))
        yield ""


@pytest.fixture
def toolbox(workspace: Path) -> Iterator[Aleph]:
    (workspace / "aleph.toml").write_text(POLICY)
    box = Aleph(agent="writer", session="s-1")
    yield box
    box.close()


def ledger_rows(workspace: Path) -> list[tuple[str, str, str]]:
    rt = aleph.load(workspace=workspace)
    assert rt.chokepoint.ledger is not None
    try:
        return [(r.action, r.target, r.outcome) for r in rt.chokepoint.ledger.rows("writer")[1:]]
    finally:
        asyncio.run(rt.aclose())


def test_llm_finds_the_aleph_toolbox_through_its_entry_point() -> None:
    assert llm.get_tools()["Aleph"] is Aleph
    assert "llm-aleph" in {p["name"] for p in llm.get_plugins()}


def test_an_allowed_tool_runs_and_a_denied_one_is_absent(toolbox: Aleph, workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(POLICY.replace('clock_now = "ask"', 'clock_now = "deny"'))
    model = Scripted(("text_stats", {"text": "Hello world."}))
    text = model.chain("count", tools=[toolbox]).text()
    assert '"words":2' in text.replace(" ", "")
    assert "text_stats" in model.offered[0] and "clock_now" not in model.offered[0]


def test_a_mutating_call_leaves_one_ledger_row(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(POLICY)
    box = Aleph(agent="writer")
    try:
        Scripted(("session_set_mode", {"mode": "chat"})).chain("chat mode", tools=[box]).text()
    finally:
        box.close()
    assert ledger_rows(workspace) == [("tool_call", "session_set_mode", "ok")]


def test_an_ask_pauses_the_chain_and_resumes_on_approve_and_on_deny(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(POLICY)
    box = Aleph(agent="writer", approval="pause")
    try:
        model = Scripted(("clock_now", {"timezone": "UTC"}))
        chain = model.chain("what time", tools=[box])
        with pytest.raises(ApprovalPause) as paused:
            chain.text()
        pause = paused.value
        assert pause.request.tool_name == "clock_now" and pause.tool_call is not None
        response = chain._responses[-1]  # the response whose tool call paused (llm keeps them in order)
        box.answer(pause.request, True)
        [result] = response.execute_tool_calls(tool_calls_list=[pause.tool_call])
        assert "UTC" in result.output or "+00:00" in result.output
        box.answer(pause.request, False)
        [refused] = response.execute_tool_calls(tool_calls_list=[pause.tool_call])
        assert "did not approve" in refused.output
    finally:
        box.close()
    assert ledger_rows(workspace) == [
        ("approval_granted", "clock_now", "ok"),
        ("approval_denied", "clock_now", "denied"),
    ]


def test_the_terminal_requester_asks_on_a_real_terminal(
    toolbox: Aleph, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    master, slave = os.openpty()
    tty_in = os.fdopen(slave, "r")
    monkeypatch.setattr("sys.stdin", tty_in)
    os.write(master, b"y\n")
    try:
        model = Scripted(("clock_now", {"timezone": "UTC"}))
        text = model.chain("what time", tools=[toolbox]).text()
    finally:
        tty_in.close()
        os.close(master)
    assert "UTC" in text or "+00:00" in text


def test_the_turn_carries_the_session_and_llms_tool_call_id(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, str | None]] = []

    class Probe:
        @aleph.hookimpl
        def aleph_register_tools(self, register: Any, context: Any) -> None:
            @aleph.tool(idempotent=True, inline=True)
            def whoami() -> str:
                """Report the turn."""
                turn, call = aleph.current_turn(), aleph.current_call()
                seen.append((turn.session_key if turn else None, call.call_id if call else None))
                return "me"

            register(whoami)

    (workspace / "aleph.toml").write_text(POLICY + 'whoami = "allow"\n')
    box = Aleph(agent="writer", session="s-7")
    original = aleph.load

    def load(*args: Any, **kwargs: Any) -> aleph.Aleph:
        return original(*args, plugins=[Probe()], **kwargs)

    monkeypatch.setattr(aleph, "load", load)
    try:
        Scripted(("whoami", {})).chain("who", tools=[box]).text()
    finally:
        box.close()
    assert seen == [("s-7", "call-0")]


def test_each_implementation_declares_the_signature_it_has() -> None:
    """llm reads an implementation's signature on every call (does it take ``llm_tool_call``?): the toolbox
    declares it once, so it must be the function's real one."""
    run = Aleph(agent="writer")._implementation("whoami")
    declared = inspect.signature(run)
    del run.__signature__
    assert inspect.signature(run) == declared
    assert "llm_tool_call" in declared.parameters


def test_a_bad_approval_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="approval must be one of"):
        Aleph(approval="yolo")


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("llm-aleph")]


def test_calls_run_on_the_calling_thread_and_a_closed_toolbox_runs_nothing_and_can_be_prepared_again(
    workspace: Path,
) -> None:
    (workspace / "aleph.toml").write_text(POLICY)
    box = Aleph(agent="writer")
    try:
        [tool] = [t for t in box.tools() if t.name == "text_stats"]
        call = llm.ToolCall(name="text_stats", arguments={"text": "a b"}, tool_call_id="c1")
        for _ in range(3):
            assert '"words":2' in tool.implementation(llm_tool_call=call, text="a b").replace(" ", "")
        assert worker_threads() == []  # no thread of its own: each call runs the toolbox's loop right here
        box.close()
        with pytest.raises(RuntimeError, match="closed"):
            tool.implementation(llm_tool_call=call, text="a b")
        text = Scripted(("text_stats", {"text": "one two three"})).chain("count", tools=[box]).text()
        assert '"words":3' in text.replace(" ", "")
        assert [t.name for t in box.tools()].count("text_stats") == 1
    finally:
        box.close()
    assert worker_threads() == []


def test_a_call_made_under_another_running_event_loop_runs_on_one_worker_and_close_stops_it(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(POLICY)
    box = Aleph(agent="writer")
    try:
        [tool] = [t for t in box.tools() if t.name == "text_stats"]

        async def from_a_loop() -> list[str]:  # as llm's async chains call a sync tool: inline, on their loop
            call = llm.ToolCall(name="text_stats", arguments={"text": "x y z"}, tool_call_id="c1")
            return [tool.implementation(llm_tool_call=call, text="x y z") for _ in range(2)]

        outputs = asyncio.run(from_a_loop())
        assert all('"words":3' in out.replace(" ", "") for out in outputs)
        assert len(worker_threads()) == 1
        call = llm.ToolCall(name="text_stats", arguments={"text": "a"}, tool_call_id="c2")
        assert '"words":1' in tool.implementation(llm_tool_call=call, text="a").replace(" ", "")  # and here again
    finally:
        box.close()
    assert worker_threads() == []


def test_an_interrupted_call_is_cancelled_and_the_toolbox_still_works(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(POLICY)
    box = Aleph(agent="writer")
    try:
        box.prepare()
        assert box._runtime is not None
        started: list[str] = []

        @aleph.tool(name="slow_wait", idempotent=True)
        async def slow_wait() -> str:
            """Wait a long time."""
            started.append("slow")
            try:
                asyncio.get_running_loop().call_later(0.05, _interrupt_main)
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                started.append("cancelled")
                raise
            return "done"

        box._runtime.register(slow_wait)
        run = box._implementation("slow_wait")
        with pytest.raises(KeyboardInterrupt):
            run(llm_tool_call=llm.ToolCall(name="slow_wait", arguments={}, tool_call_id="c1"))
        assert started == ["slow", "cancelled"]  # the call's task was cancelled, not left pending
        [tool] = [t for t in box.tools() if t.name == "text_stats"]
        call = llm.ToolCall(name="text_stats", arguments={"text": "a b"}, tool_call_id="c2")
        assert '"words":2' in tool.implementation(llm_tool_call=call, text="a b").replace(" ", "")
    finally:
        box.close()


def _interrupt_main() -> None:
    raise KeyboardInterrupt


def test_a_sync_tool_runs_on_the_calling_thread_with_no_event_loop_and_an_async_one_on_the_toolboxs(
    workspace: Path,
) -> None:
    (workspace / "aleph.toml").write_text(POLICY + 'shout = "allow"\nwhisper = "allow"\n')
    box = Aleph(agent="writer", session="s-1")
    seen: list[tuple[str, bool, str]] = []

    def running() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    @aleph.tool(idempotent=True)
    def shout(text: str) -> str:
        """Upper-case a text."""
        seen.append(("shout", running(), threading.current_thread().name))
        return text.upper()

    @aleph.tool(idempotent=True)
    async def whisper(text: str) -> str:
        """Lower-case a text."""
        seen.append(("whisper", running(), threading.current_thread().name))
        return text.lower()

    try:
        box.prepare()
        assert box._runtime is not None
        box._runtime.register(shout)
        box._runtime.register(whisper)
        for name in ("shout", "whisper"):
            box.add_tool(
                llm.Tool(name=name, description=name, input_schema={}, implementation=box._implementation(name))
            )
        model = Scripted(("shout", {"text": "Hi"}), ("whisper", {"text": "Ho"}))
        assert model.chain("go", tools=[box]).text() == "HI | ho"
        here = threading.current_thread().name
        assert seen == [("shout", False, here), ("whisper", True, here)]  # the sync one: no loop at all
    finally:
        box.close()
