"""Helpers for the admin family's tests."""

from __future__ import annotations

import json
from typing import Any

import aleph
from aleph import ApprovalOutcome, ApprovalResponse, ScriptedRequester


def approving() -> ScriptedRequester:
    """A human who approves everything (what they were shown is in ``requests``)."""
    return ScriptedRequester(lambda request: ApprovalResponse(ApprovalOutcome.APPROVED))


def refusing() -> ScriptedRequester:
    """A human who refuses everything."""
    return ScriptedRequester(lambda request: ApprovalResponse(ApprovalOutcome.DENIED, "no"))


def output(result: aleph.ToolResult) -> Any:
    """The JSON output of a successful call (fails the test with the error otherwise)."""
    assert result.success, result.error
    return json.loads(result.output)
