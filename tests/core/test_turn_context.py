"""TurnContext: the per-call turn a framework integration makes once per tool call."""

from __future__ import annotations

import dataclasses

import pytest

import aleph


def test_with_call_id_is_the_same_turn_as_dataclasses_replace_for_every_field() -> None:
    budget = aleph.Budget(calls=3)
    turn = aleph.TurnContext(
        session_key="s", run_id="r", channel_id="ch", conversation_id="cv", caller_role="member",
        unattended=True, plan_mode=True, side_question=True, principal="ana", budget=budget,
        idempotency_key="task:1", refs=(("team", "t1"),),
    )  # fmt: skip
    # Every field but call_id is set, so a field the copy forgot (a new one) would differ or be missing.
    assert {f.name for f in dataclasses.fields(turn) if getattr(turn, f.name) == f.default} == {"call_id"}
    copied = turn.with_call_id("c9")
    assert copied == dataclasses.replace(turn, call_id="c9") and copied is not turn
    assert copied.budget is turn.budget and turn.call_id is None
    assert copied.with_call_id(None) == turn
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.call_id = "other"  # type: ignore[misc]
