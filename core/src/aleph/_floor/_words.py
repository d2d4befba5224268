"""The words a wrapper hands on: an expanded argument, an argument list, shell text, or what cannot be known."""

from __future__ import annotations

from dataclasses import dataclass, field

SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh", "rbash", "fish", "lksh", "oksh"}
    | {"csh", "tcsh"}
)
"""Programs that run shell code from ``-c``, a file or standard input."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One expanded word: its text (dynamic parts keep their source text), whether it is fully known, glob."""

    text: str
    literal: bool = True
    glob: bool = False


@dataclass(frozen=True, slots=True)
class Argv:
    argv: list[Arg]
    assigns: list[tuple[str, str, bool]] = field(default_factory=list)
    speculative: bool = False
    chdir: Arg | None = None  # env -C DIR, sudo -D DIR


@dataclass(frozen=True, slots=True)
class Text:
    arg: Arg
    label: str
    speculative: bool = False
    positional: tuple[Arg, ...] = ()  # `sh -c CODE arg0 arg1...`: $0, $1... of the code


@dataclass(frozen=True, slots=True)
class Opaque:
    rule: str
    reason: str


Inner = Argv | Text | Opaque


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
