"""OpenTelemetry spans and metrics for every call through the chokepoint (optional: ``aleph-core[otel]``).

One ``execute_tool {name}`` span per call, following the OpenTelemetry semantic conventions for generative
AI tool execution (``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``error.type``)
plus Aleph's own ``aleph.*`` attributes: the decision and the rule and layer that made it, the principal, the
approval's outcome and wait, and an exec transaction's changeset counts. The span's parent is whatever span
is current in the caller's context, so a framework's agent trace shows Aleph's spans inside it.

``opentelemetry-api`` is imported on the first call, never at import time, and only when installed. Nothing
is exported unless the application configured an SDK tracer or meter provider: without one the chokepoint
checks one module global per call and runs as if this module did not exist. Arguments and results may
hold secrets, so they are exported only when :func:`configure_telemetry` (or the GenAI convention's
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``) opts in, and then with secret-named keys and
secret-looking values masked.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from aleph._chokepoint._gate import redact, redact_arguments
from aleph._errors import (
    ApprovalDenied,
    ApprovalExpired,
    ApprovalUnavailable,
    PermissionDenied,
    ToolError,
)

if TYPE_CHECKING:
    import asyncio

    from aleph._chokepoint._verdict import Verdict
    from aleph._contract._types import ToolOutput

__all__ = [
    "configure_telemetry",
    "enabled",
    "ledger_row_sink",
    "note_approval",
    "note_verdict",
    "traced_execute",
]

MAX_CONTENT_CHARS = 4096
"""Longest argument or result text put on a span when content capture is on."""

_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# The loaded API: None before the first look, False when opentelemetry-api is not installed.
_trace: Any = None
_metrics: Any = None
_capture: bool | None = None  # None: follow the environment variable
_instruments: _Instruments | None = None
_SPAN: ContextVar[_Open | None] = ContextVar("aleph_otel_span", default=None)


def configure_telemetry(*, capture_content: bool | None = None) -> None:
    """Choose whether tool arguments and results go on spans (off by default; they may hold secrets).

    ``None`` follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``. Exporting itself is the
    application's choice: configure an OpenTelemetry SDK tracer (and meter) provider as usual.
    """
    global _capture
    _capture = capture_content


def _capturing() -> bool:
    if _capture is not None:
        return _capture
    return os.environ.get(_CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _load() -> Any:
    global _trace, _metrics
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        _trace = False
        return False
    # A provider named by OTEL_PYTHON_TRACER_PROVIDER is made on the first get: make it now so the
    # per-call check below sees it.
    trace.get_tracer_provider()
    metrics.get_meter_provider()
    _trace, _metrics = trace, metrics
    return trace


def enabled() -> bool:
    """True when calls are traced: opentelemetry-api is installed and an SDK provider was set.

    Called once per call on the chokepoint's path, so it reads module globals only: the API keeps the
    provider set by ``set_tracer_provider`` / ``set_meter_provider`` in them (``None`` until one is set).
    """
    trace = _trace
    if trace is None:
        trace = _load()
    if trace is False:
        return False
    return trace._TRACER_PROVIDER is not None or _metrics._internal._METER_PROVIDER is not None


class _Instruments:
    """The metric instruments, made once per meter provider."""

    def __init__(self, provider: Any) -> None:
        meter = _metrics.get_meter("aleph", schema_url=None)
        self.provider = provider
        self.calls = meter.create_counter(
            "aleph.tool.calls", unit="{call}", description="Tool calls through the chokepoint, by decision and outcome"
        )
        self.duration = meter.create_histogram(
            "aleph.tool.call.duration",
            unit="s",
            description="From a call's arrival at the chokepoint to its answer",
        )
        self.wait = meter.create_histogram(
            "aleph.approval.wait", unit="s", description="Time a call waited for a human to answer its approval"
        )


def _meters() -> _Instruments:
    global _instruments
    provider = _metrics.get_meter_provider()
    if _instruments is None or _instruments.provider is not provider:
        _instruments = _Instruments(provider)
    return _instruments


class _Open:
    """What the chokepoint learns about the call whose span is open (the verdict, the approval)."""

    __slots__ = ("approval", "decision", "span", "wait_s")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.decision: str | None = None
        self.approval: str | None = None
        self.wait_s: float | None = None


def note_verdict(verdict: Verdict) -> None:
    """Put the chokepoint's verdict on the open call span, if any (the decision, its rule and layer)."""
    open_ = _SPAN.get()
    if open_ is None:
        return
    open_.decision = verdict.action
    span = open_.span
    span.set_attribute("aleph.decision", verdict.action)
    span.set_attribute("aleph.decision.rule_id", verdict.rule_id)
    span.set_attribute("aleph.decision.by", verdict.decided_by)
    if verdict.rule is not None:
        span.set_attribute("aleph.decision.rule", verdict.rule)
    if verdict.layer is not None:
        span.set_attribute("aleph.decision.layer", verdict.layer)


def note_approval(outcome: str, by: str, approved: bool, waited_ms: int, asked: bool) -> None:
    """Put a human's (or an earlier grant's) answer on the open call span, if any."""
    open_ = _SPAN.get()
    if open_ is None:
        return
    open_.approval = outcome
    span = open_.span
    span.set_attribute("aleph.approval.outcome", outcome)
    span.set_attribute("aleph.approval.approved", approved)
    span.set_attribute("aleph.approval.by", by)
    span.set_attribute("aleph.approval.asked", asked)
    span.set_attribute("aleph.approval.wait_ms", waited_ms)
    if asked:
        open_.wait_s = waited_ms / 1000


def ledger_row_sink(agent: str) -> Callable[[int], None] | None:
    """What puts the call's ledger row (``agent:seq``) on its open span once written; None when no span is open."""
    open_ = _SPAN.get()
    if open_ is None:
        return None
    span = open_.span
    return lambda seq: span.set_attribute("aleph.ledger.row", f"{agent}:{seq}")


def _content(value: Any) -> str:
    try:
        text = json.dumps(redact_arguments(value), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = redact(str(value))
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - 1] + "…"


def _changeset(span: Any, value: Any) -> None:
    """An exec transaction's ``changes`` (status and created / modified / deleted counts) as attributes."""
    if not isinstance(value, Mapping):
        return
    changes = value.get("changes")
    if not isinstance(changes, Mapping):
        return
    status = changes.get("status")
    if isinstance(status, str):
        span.set_attribute("aleph.changeset.status", status[:64])
    for key in ("created", "modified", "deleted"):
        count = changes.get(key)
        if type(count) is int:
            span.set_attribute(f"aleph.changeset.{key}", count)


def _refused_decision(exc: ToolError) -> tuple[str | None, str | None]:
    """(decision, approval outcome) read off an exception when the verdict was not noted."""
    if isinstance(exc, PermissionDenied):
        return "deny", None
    if isinstance(exc, ApprovalExpired):
        return "ask", "timeout"
    if isinstance(exc, ApprovalDenied | ApprovalUnavailable):
        return "ask", None
    return None, None


async def traced_execute(
    service: Any,
    name: str,
    input: Mapping[str, Any],
    cancel: asyncio.Event | None,
    run: Callable[[str, Mapping[str, Any], asyncio.Event | None], Awaitable[ToolOutput]],
) -> ToolOutput:
    """Run ``run(name, input, cancel)`` (the chokepoint's untraced execute) inside an ``execute_tool`` span."""
    trace = _trace
    tracer = trace.get_tracer("aleph")
    turn = service.turn
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": str(name)[:256],
        "gen_ai.tool.type": "function",
    }
    if turn is not None and turn.call_id:
        attributes["gen_ai.tool.call.id"] = turn.call_id
    principal = getattr(service, "principal", None)  # who the host bound to the service, never an argument
    if principal is not None:
        attributes["aleph.principal.agent"] = principal.agent
        attributes["aleph.principal.role"] = principal.role
        if principal.user:
            attributes["aleph.principal.user"] = principal.user
        if principal.chain:  # acting for others: the agents behind this one, outermost first
            attributes["aleph.principal.chain"] = [p.agent for p in principal.chain]
    elif turn is not None and turn.principal:
        attributes["aleph.principal.user"] = str(turn.principal)
    if service.agent:
        attributes["aleph.agent"] = service.agent
    if service.channel:
        attributes["aleph.channel"] = service.channel
    if turn is not None and turn.session_key:
        attributes["aleph.session"] = turn.session_key
    capture = _capturing()
    if capture:
        attributes["gen_ai.tool.call.arguments"] = _content(input)
    start = time.perf_counter()
    outcome = "ok"
    # The span is ended and the error recorded here, not by the context manager: a refusal is an
    # answer the model gets, recorded with its type, and its text may name what the arguments held.
    with tracer.start_as_current_span(
        f"execute_tool {str(name)[:256]}",
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        open_ = _Open(span)
        token = _SPAN.set(open_)
        try:
            output = await run(name, input, cancel)
        except BaseException as exc:
            outcome = "error"
            kind = type(exc).__name__
            span.set_attribute("error.type", kind)
            if isinstance(exc, ToolError):
                decision, approval = _refused_decision(exc)
                if open_.decision is None and decision is not None:
                    open_.decision = decision
                    span.set_attribute("aleph.decision", decision)
                if open_.approval is None and approval is not None:
                    open_.approval = approval
                    span.set_attribute("aleph.approval.outcome", approval)
                outcome = "refused" if decision is not None else "error"
            span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
            raise
        else:
            if open_.decision is None:  # allowed without a noted verdict (a replayed call)
                open_.decision = "allow"
                span.set_attribute("aleph.decision", "allow")
            _changeset(span, output.value)
            if capture:
                span.set_attribute("gen_ai.tool.call.result", _content(output.value))
            return output
        finally:
            _SPAN.reset(token)
            _record_metrics(name, open_, outcome, time.perf_counter() - start)


def _record_metrics(name: str, open_: _Open, outcome: str, seconds: float) -> None:
    if _metrics._internal._METER_PROVIDER is None:
        return
    meters = _meters()
    # A name the chokepoint never resolved is the model's text: one label for all of them keeps the
    # metric's cardinality bounded by the registry.
    tool = str(name)[:256] if open_.decision is not None else "(unresolved)"
    labels = {"gen_ai.tool.name": tool, "aleph.decision": open_.decision or "none", "aleph.outcome": outcome}
    meters.calls.add(1, labels)
    meters.duration.record(seconds, labels)
    if open_.wait_s is not None:
        meters.wait.record(open_.wait_s, {"gen_ai.tool.name": labels["gen_ai.tool.name"], "outcome": open_.approval})
