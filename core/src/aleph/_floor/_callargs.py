"""The arguments of a call in Perl, Ruby, Node, PHP or Lua code, read far enough to tell literal from computed.

``system("rm -rf " + dir)``, ``system "rm", "-rf", $ENV{HOME}``, ``spawnSync("rm", ["-rf", home])`` and
``system("rm -rf #{Dir.home}")`` run a command whose last part is only known at run time. Reading just the
first string literal turns them into ``rm -rf`` with no target, which proves nothing; the computed parts
are kept as unknown words instead (``$ALEPH_COMPUTED`` in shell text), so the rules judge them as they
judge an unknown variable (``rm -rf $x`` cannot be proven safe).
"""

from __future__ import annotations

import re

from aleph._floor._words import Arg

__all__ = ["COMPUTED", "call_arguments", "computed_word"]

COMPUTED = "${ALEPH_COMPUTED}"
"""Stands for a part of a command only known at run time (an unset variable to the analysis)."""

_LITERAL = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`")
_INTERPOLATION = re.compile(r"#\{[^}\n]{0,512}\}|\$\{[^}\n]{0,512}\}")
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_LIMIT = 4096

Piece = str | None
"""A literal piece of an argument, or ``None`` for a computed one."""


def _skip_computed(code: str, i: int, end: int) -> int:
    """Index of the next argument separator at this level after a computed item starting at ``i``."""
    stack: list[str] = []
    while i < end:
        m = _LITERAL.match(code, i)
        if m:
            i = m.end()
            continue
        c = code[i]
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif stack and c == stack[-1]:
            stack.pop()
        elif not stack and c in ",)];\n}":
            return i
        i += 1
    return i


def call_arguments(code: str, start: int) -> list[list[Piece]]:
    """The arguments of the call whose first argument (a string literal) starts at ``start``.

    Each argument is its pieces: literals (interpolations such as Ruby's ``#{...}`` or a template's
    ``${...}`` made computed) and ``None`` for computed values joined to them (``"rm -rf " + dir``).
    The items of an array argument are arguments of their own; an options object (``{cwd: x}``) is
    skipped. Reading stops at the end of the call, the statement or the line.
    """
    end = min(len(code), start + _LIMIT)
    args: list[list[Piece]] = [[]]
    depth = 0
    i = start
    while i < end:
        m = _LITERAL.match(code, i)
        if m:
            text = next(g for g in m.groups() if g is not None)
            if m.group(0)[0] != "'" and _INTERPOLATION.search(text):
                text = _INTERPOLATION.sub(COMPUTED, text)
            args[-1].append(text)
            i = m.end()
            continue
        c = code[i]
        if c in " \t\r":
            i += 1
        elif c == ",":
            args.append([])
            i += 1
        elif c == "[":
            depth += 1
            i += 1
        elif c == "]" and depth:
            depth -= 1
            i += 1
        elif c == "{" and not args[-1]:
            i = _skip_computed(code, i, end)  # an options object: not a word of the command
        elif c in ")];\n}":
            break
        else:
            args[-1].append(None)
            i = _skip_computed(code, i, end)
    return [a for a in args if a]


def computed_word(pieces: list[Piece]) -> Arg:
    """One argument as a word: literal when every piece is, else with the computed parts unknown."""
    if all(p is not None for p in pieces) and COMPUTED not in "".join(p or "" for p in pieces):
        return Arg("".join(p or "" for p in pieces))
    return Arg("".join(COMPUTED if p is None else p for p in pieces), False)
