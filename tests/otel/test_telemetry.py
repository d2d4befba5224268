"""OpenTelemetry for calls through the chokepoint: one ``execute_tool`` span per call under the caller's span,
the decision / rule / approval on it, content only when opted in, metrics by decision, and nothing at all
when no SDK provider is configured (checked in a fresh interpreter, since providers are process-global)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import aleph
from aleph import ApprovalOutcome, ScriptedRequester

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


class Plugin:
    ALEPH_PLUGIN_NAME = "otel_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def deploy(target: str, api_key: str = "") -> str:
            """Deploy (fixture)."""
            return f"deployed {target}"

        @aleph.tool
        def shell(command: str) -> dict[str, Any]:
            """Run (fixture): reports a transaction's changeset the way exec does."""
            return {"exit_code": 0, "changes": {"status": "committed", "created": 2, "modified": 1, "deleted": 0}}

        @aleph.tool
        def echo(text: str) -> str:
            """Echo (fixture)."""
            return text

        register(deploy)
        register(shell)
        register(echo)


def runtime(workspace: Path) -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(
        '[policies.tool_permissions.overrides]\ndeploy = "ask"\nshell = "allow"\necho = "allow"\n'
        '[agents.guest.tool_permissions.overrides]\nshell = "deny"\n'
    )
    return aleph.load(plugins=[Plugin()], entry_points=False, strict=True)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    EXPORTER.clear()
    aleph.configure_telemetry(capture_content=None)
    yield
    aleph.configure_telemetry(capture_content=None)


def only_span() -> Any:
    spans = [s for s in EXPORTER.get_finished_spans() if s.name.startswith("execute_tool")]
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


@pytest.mark.anyio
async def test_an_allowed_call_is_one_execute_tool_span_inside_the_callers_span(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        service = rt.tool_service(agent="alice", turn=aleph.TurnContext(session_key="S", call_id="call-7"))
        with trace.get_tracer("agent").start_as_current_span("invoke_agent") as parent:
            await service.execute("echo", {"text": "hi"})
    span = only_span()
    assert span.name == "execute_tool echo"
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    attrs = dict(span.attributes)
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "echo"
    assert attrs["gen_ai.tool.call.id"] == "call-7"
    assert attrs["aleph.agent"] == "alice"
    assert attrs["aleph.principal.agent"] == "alice"
    assert attrs["aleph.decision"] == "allow"
    assert "gen_ai.tool.call.arguments" not in attrs and "gen_ai.tool.call.result" not in attrs
    assert span.status.status_code is trace.StatusCode.UNSET


@pytest.mark.anyio
async def test_a_refused_call_names_the_decision_its_rule_and_layer_and_fails_the_span(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        with pytest.raises(aleph.PermissionDenied):
            await rt.tool_service(agent="guest").execute("shell", {"command": "rm -rf /"})
    attrs = dict(only_span().attributes)
    assert attrs["aleph.decision"] == "deny"
    assert attrs["aleph.decision.layer"] == "agent:guest"
    assert attrs["aleph.decision.rule"] == "shell"
    assert attrs["error.type"] == "PermissionDenied"
    assert only_span().status.status_code is trace.StatusCode.ERROR


@pytest.mark.anyio
@pytest.mark.parametrize(("answer", "approved"), [(ApprovalOutcome.APPROVED, True), (ApprovalOutcome.DENIED, False)])
async def test_an_asked_call_carries_the_humans_answer(
    workspace: Path, answer: ApprovalOutcome, approved: bool
) -> None:
    async with runtime(workspace) as rt:
        service = rt.tool_service(turn=aleph.TurnContext(session_key="S"), requester=ScriptedRequester([answer]))
        if approved:
            await service.execute("deploy", {"target": "prod"})
        else:
            with pytest.raises(aleph.ApprovalDenied):
                await service.execute("deploy", {"target": "prod"})
    attrs = dict(only_span().attributes)
    assert attrs["aleph.decision"] == "ask"
    assert attrs["aleph.approval.outcome"] == answer.value
    assert attrs["aleph.approval.approved"] is approved
    assert attrs["aleph.approval.asked"] is True
    assert isinstance(attrs["aleph.approval.wait_ms"], int)


@pytest.mark.anyio
async def test_content_is_exported_only_when_opted_in_and_secrets_stay_masked(workspace: Path) -> None:
    aleph.configure_telemetry(capture_content=True)
    async with runtime(workspace) as rt:
        service = rt.tool_service(requester=ScriptedRequester([ApprovalOutcome.APPROVED]))
        await service.execute("deploy", {"target": "prod", "api_key": "sk-live-1234567890abcdefghijkl"})
    attrs = dict(only_span().attributes)
    assert "prod" in attrs["gen_ai.tool.call.arguments"]
    assert "sk-live-1234567890abcdefghijkl" not in attrs["gen_ai.tool.call.arguments"]
    assert attrs["gen_ai.tool.call.result"] == '"deployed prod"'


@pytest.mark.anyio
async def test_content_follows_the_genai_capture_variable_when_not_set_in_code(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    async with runtime(workspace) as rt:
        await rt.tool_service().execute("echo", {"text": "visible"})
    assert "visible" in dict(only_span().attributes)["gen_ai.tool.call.arguments"]


@pytest.mark.anyio
async def test_an_exec_changeset_is_counted_on_the_span(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        await rt.tool_service().execute("shell", {"command": "make"})
    attrs = dict(only_span().attributes)
    assert attrs["aleph.changeset.status"] == "committed"
    assert (attrs["aleph.changeset.created"], attrs["aleph.changeset.modified"]) == (2, 1)
    assert attrs["aleph.changeset.deleted"] == 0


@pytest.mark.anyio
async def test_a_recorded_call_names_its_ledger_row_and_that_row_is_the_call(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        await rt.tool_service(agent="alice").execute("shell", {"command": "make"})
        row = dict(only_span().attributes)["aleph.ledger.row"]
        agent, seq = str(row).split(":")
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        found = [r for r in ledger.rows("alice") if r.seq == int(seq)]
    assert agent == "alice"
    assert [(r.action, r.target, r.outcome) for r in found] == [("tool_call", "shell", "ok")]


@pytest.mark.anyio
async def test_a_call_that_records_no_row_names_none(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        with pytest.raises(aleph.PermissionDenied):  # a refusal's row is queued, not awaited: no seq to name
            await rt.tool_service(agent="guest").execute("shell", {"command": "make"})
    assert "aleph.ledger.row" not in dict(only_span().attributes)


def _calls_by_decision() -> dict[tuple[str, str], int]:
    data = READER.get_metrics_data()
    found: dict[tuple[str, str], int] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "aleph.tool.calls":
                    for point in metric.data.data_points:
                        key = (str(point.attributes["gen_ai.tool.name"]), str(point.attributes["aleph.decision"]))
                        found[key] = int(point.value)
    return found


@pytest.mark.anyio
async def test_calls_are_counted_by_tool_and_decision(workspace: Path) -> None:
    before = _calls_by_decision()
    async with runtime(workspace) as rt:
        await rt.tool_service().execute("echo", {"text": "a"})
        await rt.tool_service().execute("echo", {"text": "b"})
        with pytest.raises(aleph.PermissionDenied):
            await rt.tool_service(agent="guest").execute("shell", {"command": "x"})
        for i in range(3):
            with pytest.raises(aleph.ToolNotFound):
                await rt.tool_service().execute(f"made_up_{i}", {})
    after = _calls_by_decision()
    assert not any(tool.startswith("made_up") for tool, _ in after)
    assert after[("(unresolved)", "none")] - before.get(("(unresolved)", "none"), 0) == 3
    assert after[("echo", "allow")] - before.get(("echo", "allow"), 0) == 2
    assert after[("shell", "deny")] - before.get(("shell", "deny"), 0) == 1


_NO_SDK = textwrap.dedent(
    """
    import asyncio, sys
    {block}
    import aleph
    from aleph._chokepoint import _telemetry

    class Plugin:
        ALEPH_PLUGIN_NAME = "otel_off"

        @aleph.hookimpl
        def aleph_register_tools(self, register):
            @aleph.tool
            def echo(text: str) -> str:
                '''Echo.'''
                return text

            register(echo)

    async def main():
        async with aleph.load(plugins=[Plugin()], entry_points=False, strict=True) as rt:
            out = await rt.tool_service().execute("echo", {{"text": "fine"}})
        print(out.text, _telemetry.enabled(), "opentelemetry.sdk" in sys.modules)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    ("block", "why"),
    [("", "API installed, no provider configured"), ("sys.modules['opentelemetry'] = None", "API not installed")],
)
def test_without_a_configured_sdk_calls_run_untraced(workspace: Path, block: str, why: str) -> None:
    (workspace / "aleph.toml").write_text('[policies.tool_permissions.overrides]\necho = "allow"\n')
    script = _NO_SDK.format(block=block)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fine", "False", "False"], why
