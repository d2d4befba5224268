"""The shell syntax tree the parser builds, the budget that bounds parsing, and the lexical tables."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Union

SegKind = Literal["u", "q", "d", "ifs", "home"]
"""Word segment kinds: unquoted text, quoted text, a dynamic expansion (source text kept),
an unquoted ``$IFS`` (a word break), ``~``/``$HOME``."""


class ShellSyntaxError(ValueError):
    """The text is not in the grammar this parser proves things about."""


class BudgetExceeded(Exception):
    """The analysis budget ran out (too many commands, too deep, too much expansion)."""


@dataclass(slots=True)
class Budget:
    """Bounds on analysis work; shared by every nested parse of one check."""

    max_commands: int
    max_depth: int
    max_words: int
    commands: int = 0
    words: int = 0

    def count_command(self) -> None:
        """Count one analysed command; raises :class:`BudgetExceeded` past the bound."""
        self.commands += 1
        if self.commands > self.max_commands:
            raise BudgetExceeded(f"more than {self.max_commands} sub-commands")

    def count_words(self, n: int) -> None:
        """Count ``n`` words produced by expansion."""
        self.words += n
        if self.words > self.max_words:
            raise BudgetExceeded(f"more than {self.max_words} words after expansion")

    def check_depth(self, depth: int) -> None:
        """Refuse nesting deeper than the bound."""
        if depth > self.max_depth:
            raise BudgetExceeded(f"nesting deeper than {self.max_depth} levels")


@dataclass(slots=True)
class Sub:
    """A command substitution (``cmd``: ``$(...)``/backticks) or process substitution (``in``/``out``)."""

    kind: Literal["cmd", "in", "out"]
    script: Script


@dataclass(slots=True)
class Word:
    """One shell word: its source text, quoting-aware segments and the substitutions inside it."""

    raw: str
    segs: list[tuple[SegKind, str]]
    subs: list[Sub] = field(default_factory=list)


@dataclass(slots=True)
class Assign:
    """``NAME=value`` (or ``NAME+=value``, ``NAME=(a b)``) before a command or on its own."""

    name: str
    value: Word | None
    array: list[Word] = field(default_factory=list)
    index: Word | None = None


@dataclass(slots=True)
class Redirect:
    """A redirection: operator, optional fd, target word, or a here-document body."""

    op: str
    fd: str | None
    target: Word | None
    heredoc: Word | None = None
    heredoc_quoted: bool = False


@dataclass(slots=True)
class Simple:
    """A simple command: assignments, words (program first) and redirections."""

    assigns: list[Assign]
    words: list[Word]
    redirects: list[Redirect]


@dataclass(slots=True)
class Compound:
    """A compound command (subshell, group, if, loop, case, ``[[ ]]``, ``(( ))``)."""

    kind: str
    bodies: list[Script]
    words: list[Word]
    redirects: list[Redirect]
    var: str | None = None


@dataclass(slots=True)
class FuncDef:
    """``name() body`` or ``function name body``."""

    name: str
    body: Node


Node = Union[Simple, Compound, FuncDef]  # noqa: UP007 - a runtime alias used in isinstance-free code


@dataclass(slots=True)
class Pipeline:
    """Commands joined by ``|``; ``background`` when the list operator after it is ``&``."""

    cmds: list[Node]
    negated: bool = False
    background: bool = False


Script = list[Pipeline]


_META = frozenset(" \t\n;&|()<>")


_PLAIN = re.compile(r"[^\s;&|()<>'\"\\$`]+")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]\s;&|()<>]*+\])?\+?=")


_REDIR = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})?(<<<|<<-|<<|<>|<&|<|>>|>&|>\||>|&>>|&>)")


_TILDE = re.compile(r"~([A-Za-z0-9_.][A-Za-z0-9_.-]*|[+-])?(?=/|$|[\s;&|()<>:])")


_SIMPLE_LINE = re.compile(r"[ \t]*+[A-Za-z0-9_./:@%^+,-]++(?:[ \t]++[A-Za-z0-9_./:@%^+=,-]++)*+[ \t]*+")


_SPECIAL_PARAM = frozenset("@*#?-$!0123456789")


_RESERVED = frozenset(
    "if then elif else fi for in do done while until case esac function select time coproc { } ! [[ ]]".split()
)


_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
