"""Argument rules compiled per tool (issue 34): a call looks literal field rules up by value, and the answer
is always the one trying every rule in the table's order gives (first deny, else first ask, else allows).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from typing import Any

import pytest

from aleph._chokepoint._permissions import CallSubjects, PermissionLayer, PermissionPolicy

WS = "/srv/ws"


def linear_refusal(layer: PermissionLayer, name: str, call: CallSubjects) -> tuple[str, str] | None:
    """What the layer decided before the index: every argument rule tried in order, denies first."""
    relevant = layer.specs_for(name, None)
    for wanted in ("deny", "ask"):
        for rule in relevant:
            if rule.action != wanted:
                continue
            subjects = rule.subjects_of(call)
            if subjects and any(rule.matches_subject(s) for s in subjects):
                return rule.action, rule.key
    return None


TEXTS = [
    "3",
    "3.0",
    "-0",
    "true",
    "TRUE",
    "false",
    "null",
    "Null",
    "abc",
    "1_0",
    "nan",
    "inf",
    "1e400",
    "a*",
    "?",
    "x y",
]
VALUES: list[Any] = [
    3,
    3.0,
    0,
    -0.0,
    10,
    True,
    False,
    None,
    "3",
    "abc",
    "abd",
    "true",
    "null",
    "1_0",
    "x y",
    float("inf"),
    float("nan"),
    10**400,
    2**53 + 1,
    [],
    [1, "abc"],
    [None],
    [[3]],
    {"b": 3},
]


def layer_of(rules: list[tuple[str, str]]) -> PermissionLayer:
    return PermissionLayer.from_config("global", {"overrides": dict(rules)}, workspace=WS)


def test_literal_field_rules_looked_up_by_value_answer_like_trying_each_in_order() -> None:
    rng = random.Random(34)
    checked = 0
    for _ in range(300):
        rules: list[tuple[str, str]] = []
        for text in rng.sample(TEXTS, rng.randint(1, 8)):
            field = rng.choice(["b", "c"])
            rules.append((f"add({field}={text})", rng.choice(["deny", "ask", "allow"])))
        if rng.random() < 0.3:
            rules.append(("add(path:secret/**)", rng.choice(["deny", "ask"])))
        layer = layer_of(rules)
        for value, other in itertools.product(rng.sample(VALUES, 6), rng.sample(VALUES, 2)):
            arguments: Mapping[str, Any] = {"b": value, "c": other, "path": "secret/a"}
            call = CallSubjects(paths=("secret/a",), arguments=arguments)
            decision = layer.decide("add", None, lambda call=call: call)  # type: ignore[misc]
            expected = linear_refusal(layer, "add", call)
            if expected is not None:
                assert (decision.action, decision.rule) == expected, (rules, arguments)
            else:
                assert decision.rule is None or decision.action == "allow", (rules, arguments)  # no rule refused
            checked += 1
    assert checked == 300 * 12


def test_the_first_matching_rule_of_the_table_names_the_refusal() -> None:
    layer = layer_of([("add(b=*)", "deny"), ("add(b=3)", "deny"), ("add(c=3)", "deny")])
    call = CallSubjects(arguments={"b": 3, "c": 3})
    assert layer.decide("add", None, lambda: call).rule == "add(b=*)"
    layer = layer_of([("add(c=3)", "deny"), ("add(b=3)", "deny"), ("add(b=*)", "deny")])
    assert layer.decide("add", None, lambda: call).rule == "add(c=3)"


def test_a_deny_anywhere_in_the_table_beats_an_earlier_ask() -> None:
    layer = layer_of([("add(b=3)", "ask"), ("add(b=3.0)", "deny")])
    assert layer.decide("add", None, lambda: CallSubjects(arguments={"b": 3})).action == "deny"


@pytest.mark.parametrize(
    ("text", "value", "matches"),
    [
        ("3", 3, True),
        ("3", 3.0, True),
        ("3", "3", True),
        ("3", True, False),
        ("true", True, True),
        ("TRUE", True, True),
        ("true", "true", True),
        ("true", 1, False),
        ("null", None, True),
        ("9007199254740992", 2**53 + 1, False),  # compared exactly, never after rounding to a float
        ("1e308", 10**400, False),  # an int no float can hold matches no number (and raises nothing)
        ("nan", float("nan"), False),
        ("inf", float("inf"), True),
        ("abc", ["x", "abc"], True),
        ("abc", [], False),
        ("abc", [["abc"]], False),
    ],
)
def test_a_literal_field_rule_compares_typed_values(text: str, value: Any, matches: bool) -> None:
    layer = layer_of([(f"add(b={text})", "deny")])
    call = CallSubjects(arguments={"b": value})
    assert (layer.decide("add", None, lambda: call).action == "deny") is matches
    assert (linear_refusal(layer, "add", call) is not None) is matches


def test_a_missing_field_reads_as_null_to_an_indexed_rule() -> None:
    layer = layer_of([("add(b=null)", "deny")])
    assert layer.decide("add", None, lambda: CallSubjects(arguments={})).action == "deny"


def test_a_thousand_rules_for_other_tools_never_decide_and_the_tools_own_still_do() -> None:
    rules = [(f"filler_{i}(b={i})", "deny") for i in range(990)] + [(f"add(b={100 + i})", "deny") for i in range(10)]
    policy = PermissionPolicy([layer_of(rules)])
    assert policy.decide("add", None, lambda: CallSubjects(arguments={"b": 3})).action == "allow"
    assert policy.decide("add", None, lambda: CallSubjects(arguments={"b": 105})).rule == "add(b=105)"
    assert policy.decide("filler_7", None, lambda: CallSubjects(arguments={"b": 7})).rule == "filler_7(b=7)"
