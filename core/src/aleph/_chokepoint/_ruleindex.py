"""The argument rules of one layer that apply to one tool, compiled so a call tries only what can match.

A field rule with a literal value (``file_ops(operation=delete)``, ``add(b=3)``) is looked up by the
argument's value instead of being tried: for each field, a table maps every typed form the rule's
text can match (the string itself, a number, ``true``/``false``, ``null``) to the first rule of the
table that matches it. Every other rule (globs, paths, commands, domains) is tried in the table's
order as before. The answer is exactly what trying every rule in order gives: the first deny that
matches any subject, else the first ask, else the allows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal, Protocol, TypeVar

__all__ = ["RulePlan"]

_Key = tuple[Any, ...]
# Tuples, not `int | float`: a union in isinstance is built anew every time the line runs (every call).
_NUMBER = (int, float)
_LIST = (list, tuple)


class CallSubjects(Protocol):
    """What a call shows argument rules (``aleph._chokepoint._permissions.CallSubjects``)."""

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The validated arguments."""
        ...


class PermissionRule(Protocol):
    """One parsed argument rule (``aleph._chokepoint._permissions.PermissionRule``), as the plan reads it."""

    @property
    def key(self) -> str:
        """The rule as written."""
        ...

    @property
    def action(self) -> Literal["allow", "ask", "deny"]:
        """allow, ask or deny."""
        ...

    @property
    def spec_kind(self) -> str:
        """What the specifier judges (field, path, command, domain)."""
        ...

    @property
    def _spec(self) -> Any: ...

    def subjects_of(self, call: Any) -> list[Any] | None:
        """The call's subjects this rule judges."""
        ...

    def matches_subject(self, subject: Any) -> bool:
        """Whether one subject matches the specifier."""
        ...


def _rule_keys(text: str) -> list[_Key]:
    """Every typed form of argument value that the literal rule text ``text`` matches (see ``_field_matches``)."""
    keys: list[_Key] = [("str", text)]
    lowered = text.lower()
    if lowered in ("true", "false"):
        keys.append(("bool", lowered == "true"))
    if lowered == "null":
        keys.append(("null",))
    try:
        number = float(text)
    except ValueError:
        keys.append(("numstr", text))  # a number that is not a number's text matches by its JSON text
    else:
        if not math.isnan(number):  # nan equals nothing, so it matches no number
            keys.append(("num", number))
    return keys


def _value_keys(value: Any) -> list[_Key]:
    """The keys one argument value is looked up under; a list or tuple gives each item's (any item matches)."""
    if isinstance(value, bool):
        return [("bool", value)]
    if value is None:
        return [("null",)]
    if isinstance(value, _NUMBER):
        keys: list[_Key] = [("numstr", str(value))]
        if isinstance(value, float):
            keys.append(("num", value))
        else:
            try:
                number = float(value)
            except OverflowError:  # an int no float can equal
                return keys
            if number == value:  # equal to a float only when exactly one (2**53 + 1 is not)
                keys.append(("num", number))
        return keys
    if isinstance(value, str):
        return [("str", value)]
    if isinstance(value, _LIST):
        out: list[_Key] = []
        for item in value:
            if not isinstance(item, _LIST):  # a nested list never matches a field rule
                out.extend(_value_keys(item))
        return out
    return []


R = TypeVar("R", bound=PermissionRule)


class RulePlan(Generic[R]):
    """One tool's argument rules in one layer: indexed literal field rules, the rest in table order."""

    __slots__ = ("_indexed", "_tried", "allow_groups", "rules")

    def __init__(self, rules: Sequence[tuple[int, R]]) -> None:
        self.rules = [rule for _, rule in rules]
        """Every argument rule that applies to the tool, in the table's order."""
        allows = [rule for rule in self.rules if rule.action == "allow"]
        self.allow_groups = [
            (kind, group)
            for kind in ("command", "path", "domain", "field")
            if (group := [rule for rule in allows if rule.spec_kind == kind])
        ]
        """The allow rules by the kind of subject they judge (commands, paths, domains, fields), in table order."""
        # action -> field -> value key -> (position, rule): the first matching rule of the table wins.
        self._indexed: dict[str, dict[str, dict[_Key, tuple[int, R]]]] = {"deny": {}, "ask": {}}
        self._tried: dict[str, list[tuple[int, R]]] = {"deny": [], "ask": []}
        for position, rule in rules:
            if rule.action == "allow":
                continue
            if rule.spec_kind == "field" and "*" not in rule._spec[1] and "?" not in rule._spec[1]:
                field, text, _ = rule._spec
                table = self._indexed[rule.action].setdefault(field, {})
                for key in _rule_keys(text):
                    table.setdefault(key, (position, rule))
            else:
                self._tried[rule.action].append((position, rule))

    def refusal(self, call: CallSubjects, action: str) -> R | None:
        """The first ``action`` (deny or ask) rule in table order that matches any subject of ``call``."""
        best: tuple[int, R] | None = None
        indexed = self._indexed[action]
        if indexed:
            best = _first_indexed(indexed, call.arguments)
        found = _first_tried(self._tried[action], call, best[0] if best is not None else None)
        if found is not None:
            return found
        return best[1] if best is not None else None


def _first_indexed(indexed: dict[str, dict[_Key, tuple[int, R]]], arguments: Mapping[str, Any]) -> tuple[int, R] | None:
    best: tuple[int, R] | None = None
    for field, table in indexed.items():
        for key in _value_keys(arguments.get(field)):  # a missing field is null, as the rule reads it
            hit = table.get(key)
            if hit is not None and (best is None or hit[0] < best[0]):
                best = hit
    return best


def _first_tried(rules: list[tuple[int, R]], call: CallSubjects, before: int | None) -> R | None:
    """The first rule (before position ``before``, when given) that matches any of the call's subjects."""
    for position, rule in rules:
        if before is not None and position > before:
            return None
        subjects = rule.subjects_of(call)
        if subjects and any(rule.matches_subject(s) for s in subjects):
            return rule
    return None
