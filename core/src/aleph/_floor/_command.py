"""What the analysis hands the rules.

Each command as run (program, expanded arguments, redirections, the wrappers it came through), what
could not be analysed, and the limits that bound the work.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from aleph._floor._wrappers import Arg


@dataclass(frozen=True, slots=True)
class Limits:
    """The analysis budget: every number an input controls is bounded."""

    max_input_chars: int = 262_144
    max_commands: int = 1_000
    max_depth: int = 24
    max_words: int = 20_000


@dataclass(frozen=True, slots=True)
class Command:
    """One command the text would run, after unwrapping.

    :ivar argv: the expanded words, program first (may be empty for a bare assignment).
    :ivar program: basename of the program, ``""`` if none or not known.
    :ivar assigns: ``(name, value, literal)`` for each ``NAME=value`` given to this command (or on its own).
    :ivar redirects: ``(operator, fd, target)``; ``target`` is ``None`` for fd duplications.
    :ivar upstream: programs of earlier stages of the same pipeline (what feeds its standard input).
    :ivar stdin_known: its standard input is known text (a here-document, here-string, literal ``echo``).
    :ivar input_programs: programs inside the substitutions in its words and input redirections.
    :ivar via: the wrappers it was found inside, outermost first (``("sudo", "bash -c")``).
    :ivar cwd: the working directory it runs in, when known.
    :ivar speculative: a guess at what a loosely known wrapper runs; only rules apply to it.
    """

    argv: tuple[Arg, ...]
    program: str
    assigns: tuple[tuple[str, str, bool], ...] = ()
    redirects: tuple[tuple[str, str | None, Arg | None], ...] = ()
    upstream: tuple[str, ...] = ()
    stdin_known: bool = False
    input_programs: frozenset[str] = frozenset()
    via: tuple[str, ...] = ()
    cwd: str | None = None
    depth: int = 0
    speculative: bool = False
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False, hash=False)
    """Per-command scratch space for facts the rules derive more than once (write targets)."""
    values: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False, hash=False)
    """Every literal value the text gives each variable anywhere (assignments, ``for`` words), shared by
    all commands of one analysis. Order and scope are ignored, so it may only make a verdict stricter."""

    @property
    def args(self) -> tuple[Arg, ...]:
        """The arguments after the program."""
        return self.argv[1:]

    @property
    def text(self) -> str:
        """Normalised text: assignments, program, arguments and redirections, space-joined."""
        parts = [f"{name}={value}" for name, value, _ in self.assigns]
        parts.extend(a.text for a in self.argv)
        parts.extend(f"{op} {target.text}" for op, _, target in self.redirects if target is not None)
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Unknown:
    """Something the analyser cannot prove safe: a rule name for it and the reason."""

    rule: str
    reason: str


@dataclass(slots=True)
class Analysis:
    """Everything :func:`analyse` found."""

    commands: list[Command] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    fork_bombs: list[str] = field(default_factory=list)
    budget_exceeded: str | None = None
    written: dict[str, str | None] = field(default_factory=dict)
    """Files the text writes with a redirection: path -> content when the text shows it (else None)."""


def basename(text: str) -> str:
    """The program basename of a (possibly path-qualified) program word."""
    return text.rstrip("/").rsplit("/", 1)[-1]


def resolve(text: str, cwd: str | None) -> str | None:
    """Absolute, normalised form of a path (no filesystem access); ``None`` if relative and cwd unknown."""
    if not text.startswith("/"):
        if cwd is None:
            return None
        text = f"{cwd}/{text}"
    path = posixpath.normpath(text)
    return "/" + path.lstrip("/") if path.startswith("//") else path
