"""Where sed's and awk's scripts are on their command lines, and what a sed script does.

Both programs take their code as an operand after options, some of which take a value (``awk -v x=1
'prog'``, ``awk -F : 'prog'``, ``sed --expression=...``). Taking "the first word not starting with
``-``" as the program reads the option's value instead and lets the real program through unread, so
the options are read as the programs read them (getopt: clustered short flags, attached or separate
values, long options by name). Code the floor cannot see (a script on standard input or a descriptor,
a native extension) is reported as unseen, so the caller can refuse to call it safe.

A sed script is read with sed's own grammar (GNU sed: addresses, ``!``, blocks, ``a/i/c`` text, labels,
file names to the end of the line, ``s`` and ``y`` with any delimiter), so ``1!e cmd``, ``/re/ e cmd``,
``$e cmd`` and ``s|x|cmd|e`` are seen like ``1e cmd``. Text that does not read as sed is treated as if it
ran commands: the floor cannot say it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aleph._floor._words import Arg

__all__ = ["SedEffects", "awk_code", "sed_effects", "sed_scripts"]

_STDIN_NAMES = ("-", "/dev/stdin")
"""Script file names that mean "standard input" (``/dev/fd/*`` and ``/proc/*`` are descriptors too)."""


def _unseen_file(name: Arg) -> bool:
    """A script file the floor cannot read from the text: standard input, a descriptor, or a computed name."""
    t = name.text
    return not name.literal or t in _STDIN_NAMES or t.startswith(("/dev/", "/proc/"))


@dataclass(frozen=True, slots=True)
class SedEffects:
    """What one sed script does besides editing text: runs commands, and the files it writes."""

    runs: bool = False
    writes: list[str] = field(default_factory=list)


def sed_scripts(args: Sequence[Arg]) -> tuple[list[Arg], list[Arg], bool, bool]:
    """Read sed's command line: ``(scripts, files, unseen, sandbox)``.

    ``scripts`` are the script texts (``-e``, ``--expression``, or the first operand when neither ``-e`` nor
    ``-f`` is given); ``files`` are the input files (the ones ``-i`` rewrites); ``unseen`` is true when a
    script comes from where the text does not show it (``-f -``, ``-f /dev/stdin``, a computed ``-f``);
    ``sandbox`` is true under ``--sandbox`` (GNU sed then refuses ``e``, ``r`` and ``w``).
    GNU sed permutes its arguments, so options after operands count too.
    """
    scripts: list[Arg] = []
    operands: list[Arg] = []
    unseen = sandbox = from_file = False
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        nxt = args[i + 1] if i + 1 < len(args) else None
        if not a.literal or t == "-" or not t.startswith("-"):
            operands.append(a)
        elif t == "--":
            operands.extend(args[i + 1 :])
            break
        elif t.startswith("--"):
            name, eq, value = t[2:].partition("=")
            if name in ("expression", "file", "line-length"):
                val = Arg(value, a.literal) if eq else nxt
                i += 0 if eq else 1
                if val is not None and name == "expression":
                    scripts.append(val)
                elif name == "file":
                    from_file = True
                    unseen = unseen or val is None or _unseen_file(val)
            elif name == "sandbox":
                sandbox = True
        else:
            for pos, flag in enumerate(t[1:], start=2):
                if flag in "efl":
                    val = Arg(t[pos:], a.literal) if pos < len(t) else nxt
                    i += 0 if pos < len(t) else 1
                    if val is not None and flag == "e":
                        scripts.append(val)
                    elif flag == "f":
                        from_file = True
                        unseen = unseen or val is None or _unseen_file(val)
                    break
                if flag == "i":
                    break  # -i[SUFFIX]: the rest of the word is the suffix
        i += 1
    if not scripts and not from_file and operands:
        scripts, operands = [operands[0]], operands[1:]
    return scripts, operands, unseen, sandbox


_END = frozenset(";\n}#")
_SIMPLE = frozenset("=dDgGhHlnNpPxzFqQL")


class _Unreadable(Exception):
    """The script does not read as sed."""


def _bracket_end(s: str, i: int) -> int:
    """Index just past the ``]`` closing the bracket expression whose ``[`` is at ``i``."""
    i += 1
    if i < len(s) and s[i] == "^":
        i += 1
    if i < len(s) and s[i] == "]":
        i += 1  # a leading ] is a member
    while i < len(s):
        if s[i] == "[" and i + 1 < len(s) and s[i + 1] in ":.=":
            end = s.find(s[i + 1] + "]", i + 2)
            if end < 0:
                raise _Unreadable
            i = end + 2
            continue
        if s[i] == "]":
            return i + 1
        if s[i] == "\n":
            raise _Unreadable
        i += 1
    raise _Unreadable


def _regex_end(s: str, i: int, delim: str, *, regex: bool = True) -> int:
    """Index just past the closing ``delim`` of a regex (or, ``regex=False``, a replacement) at ``i``.

    In a regex a bracket expression may hold the delimiter (``s/[/]/_/``), as GNU sed reads it.
    """
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "[" and regex:
            i = _bracket_end(s, i)
            continue
        if c == delim:
            return i + 1
        if c == "\n" and delim != "\n":
            raise _Unreadable
        i += 1
    raise _Unreadable


def _address(s: str, i: int) -> int:
    r"""Index past one address at ``i`` (none is fine): ``N``, ``first~step``, ``$``, ``/re/``, ``\\%re%``."""
    if i < len(s) and s[i].isdigit():
        while i < len(s) and (s[i].isdigit() or s[i] == "~"):
            i += 1
        return i
    if i < len(s) and s[i] == "$":
        return i + 1
    if i < len(s) and s[i] in "/\\":
        if s[i] == "\\":
            i += 1
            if i >= len(s):
                raise _Unreadable
        i = _regex_end(s, i + 1, s[i])
        while i < len(s) and s[i] in "IM":
            i += 1
    return i


def _to_line_end(s: str, i: int) -> int:
    end = s.find("\n", i)
    return len(s) if end < 0 else end


def _command_end(s: str, i: int) -> int:
    """Past blanks after a command; it must end there (``;``, newline, ``}``, ``#`` or the end)."""
    while i < len(s) and s[i] in " \t":
        i += 1
    if i < len(s) and s[i] not in _END:
        raise _Unreadable
    return i


def _read_sed(s: str) -> SedEffects:
    runs = False
    writes: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c in " \t\n;}":
            i += 1
            continue
        if c == "#":
            i = _to_line_end(s, i)
            continue
        i = _address(s, i)
        while i < n and s[i] in " \t":
            i += 1
        if i < n and s[i] == ",":
            i += 1
            while i < n and s[i] in " \t":
                i += 1
            if i < n and s[i] in "+~":
                i += 1
            i = _address(s, i)
        while i < n and s[i] in " \t!":
            i += 1
        if i >= n:
            raise _Unreadable
        c = s[i]
        i += 1
        if c == "{":
            continue
        if c in _SIMPLE:
            while i < n and (s[i].isdigit() or s[i] in " \t"):
                i += 1
            i = _command_end(s, i)
        elif c in "aic":
            # text to the end of the line; a backslash before a newline continues it
            while i < n and s[i] != "\n":
                i += 2 if s[i] == "\\" else 1
        elif c in "btT:v":
            while i < n and s[i] not in ";\n":
                i += 1
        elif c in "rRwW":
            end = _to_line_end(s, i)
            if c in "wW":
                writes.append(s[i:end].strip())
            i = end
        elif c == "e":
            runs = True
            i = _to_line_end(s, i)
        elif c in "sy":
            if i >= n or s[i] in "\n\\":
                raise _Unreadable
            delim = s[i]
            i = _regex_end(s, _regex_end(s, i + 1, delim, regex=c == "s"), delim, regex=False)
            while c == "s" and i < n and s[i] in "gpiImMe0123456789w":
                if s[i] == "e":
                    runs = True
                if s[i] == "w":
                    end = _to_line_end(s, i + 1)
                    writes.append(s[i + 1 : end].strip())
                    i = end
                    break
                i += 1
            i = _command_end(s, i)
        else:
            raise _Unreadable
    return SedEffects(runs, writes)


def sed_effects(script: str) -> SedEffects:
    """Whether ``script`` runs commands (``e``, ``s///e``) and which files it writes (``w``, ``s///w``).

    A script that does not read as sed ``runs``: it cannot be shown not to.
    """
    try:
        return _read_sed(script)
    except _Unreadable:
        return SedEffects(runs=True)


_AWK_VALUED = frozenset("FvfeEilWZ")
_AWK_CODE = frozenset({"e", "source"})
_AWK_FILES = frozenset({"f", "file", "E", "exec", "i", "include"})
_AWK_LONG_VALUED = frozenset({"assign", "field-separator", "file", "source", "exec", "include", "load", "locale"})


def awk_code(args: Sequence[Arg]) -> tuple[list[Arg], bool]:
    """Read awk's command line (POSIX awk, gawk, mawk): ``(code, unseen)``.

    ``code`` holds the program texts (``-e``/``--source`` values, else the first operand) and, so that an
    option the floor does not know cannot hide the program, every later operand too (file names and
    ``var=value`` assignments, which hold no awk code in practice). ``unseen`` is true when awk runs code
    the text does not show: a program file on standard input or a descriptor, or a native extension
    (``-l``/``--load``, mawk's ``-W exec`` on standard input).
    """
    code: list[Arg] = []
    unseen = False
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        nxt = args[i + 1] if i + 1 < len(args) else None
        if not a.literal or t == "-" or not t.startswith("-"):
            break
        if t == "--":
            i += 1
            break
        if t.startswith("--"):
            name, eq, value = t[2:].partition("=")
            if name in _AWK_LONG_VALUED:
                val = Arg(value, a.literal) if eq else nxt
                i += 0 if eq else 1
                if name == "source" and val is not None:
                    code.append(val)
                elif name in _AWK_FILES:
                    unseen = unseen or val is None or _unseen_file(val)
                elif name == "load":
                    unseen = True
        else:
            for pos, flag in enumerate(t[1:], start=2):
                if flag in _AWK_VALUED:
                    val = Arg(t[pos:], a.literal) if pos < len(t) else nxt
                    i += 0 if pos < len(t) else 1
                    if val is None:
                        break
                    if flag == "e":
                        code.append(val)
                    elif flag in "fEi":
                        unseen = unseen or _unseen_file(val)
                    elif flag == "l":
                        unseen = True
                    elif flag == "W":
                        # gawk: -W source=TEXT, -W file=F ...; mawk: -W exec F (program file, ends options)
                        name, _, value = val.text.partition("=")
                        if name.startswith("s") and "=" in val.text:
                            code.append(Arg(value, val.literal))
                        elif name.startswith(("e", "f", "i", "l")):
                            unseen = True
                    break
        i += 1
    operands = list(args[i:])
    code.extend(operands)
    return code, unseen
