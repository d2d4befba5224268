"""What a built-in command-policy rule is: a predicate over an analysed command and the host facts it reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from aleph._floor._analysis import Command

Tier = Literal["hardline", "guard", "tunable"]


@dataclass(frozen=True, slots=True)
class Builtin:
    """One built-in rule: a predicate over an analysed command, its tier and its action."""

    name: str
    tier: Tier
    action: Literal["block", "warn", "ask"]
    description: str
    check: Callable[[Command, Env], bool]
    programs: frozenset[str] | None = None  # None: look at every command


@dataclass(frozen=True, slots=True)
class Env:
    """What rules need besides the command: the home directory and the protected paths (absolute)."""

    home: str
    protected: tuple[str, ...]
    protected_names: tuple[str, ...] = ()  # their basenames: a cheap first test before resolving paths
