"""Scripts a command writes and then runs: their text is analysed, or, when it cannot be, asked about.

The walker analyses a shell script the same text writes with a redirection (``echo '...' > s.sh; sh s.sh``).
This pass does the rest. A script for Python, Perl, Ruby, Node, awk (``-f``) or sed (``-f``) written with
a redirection is analysed as that program's inline code (``python3 x.py`` as ``python3 -c '<its text>'``).
A script written by a program instead (``tee s.sh <<< '...'``, ``cp``, ``curl -o s.sh URL``,
``python3 -c "open('s.sh','w')..."``), appended to, or run by a program whose files the floor does not
read (``make -f``, PHP, ...) holds content the text does not show; running it cannot be proven safe, as
``curl ... | sh`` cannot.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from aleph._floor._command import Analysis, Command, Unknown, resolve
from aleph._floor._targets import _write_targets
from aleph._floor._words import SHELLS, Arg
from aleph._floor._wrappers import is_interpreter

__all__ = ["scripts_written"]

_METADATA_ONLY = frozenset({"chmod", "chown", "chgrp", "chattr", "setfacl", "touch"})
_INLINE = {
    "python": "python3 -c",
    "perl": "perl -e",
    "ruby": "ruby -e",
    "node": "node -e",
    "awk": "awk --",
    "sed": "sed -e",
}
_MAX_REREAD = 8
"""Written scripts analysed per command text (each within the analysis limits); more ask."""


def _family(program: str) -> str:
    for family, pattern in (
        ("python", r"python[0-9.]*|pypy[0-9.]*"),
        ("perl", r"perl[0-9.]*"),
        ("ruby", r"ruby[0-9.]*"),
    ):
        if re.fullmatch(pattern, program):
            return family
    if program in ("node", "nodejs"):
        return "node"
    if program in ("awk", "gawk", "mawk", "nawk"):
        return "awk"
    return program


def _file_option(args: list[Arg], shorts: tuple[str, ...], longs: tuple[str, ...]) -> Arg | None:
    for i, a in enumerate(args):
        t = a.text
        if t in shorts or t in longs:
            return args[i + 1] if i + 1 < len(args) else None
        if t.startswith(tuple(f"{n}=" for n in longs)):
            return Arg(t.split("=", 1)[1], a.literal)
        if any(t.startswith(s) and len(t) > 2 for s in shorts):
            return Arg(t[2:], a.literal)
    return None


def _script(cmd: Command) -> tuple[str, Arg] | None:
    """(kind, file) of the script ``cmd`` runs: ``shell`` for shells and ``./x``, else the program family."""
    if not cmd.argv:
        return None
    p = cmd.program
    args = list(cmd.args)
    family = _family(p)
    if family in ("awk", "sed", "make", "gmake"):
        found = _file_option(args, ("-f",), ("--file", "--makefile") if family != "sed" else ("--file",))
        return (family, found) if found is not None else None
    if "/" in cmd.argv[0].text and p not in SHELLS:
        return "shell", cmd.argv[0]
    if not (p in SHELLS or p in ("source", ".") or is_interpreter(p)):
        return None
    kind = "shell" if p in SHELLS or p in ("source", ".") else family
    candidates = [args[i + 1] for i, a in enumerate(args[:-1]) if a.text in ("--rcfile", "--init-file")]
    flags = [a.text for a in args if a.text.startswith("-") and not a.text.startswith("--")]
    if not any(set(f[1:]) & set("ceErm") for f in flags):  # -c/-e/-E/-r code, -m module: no script file
        candidates.extend([a for a in args if not a.text.startswith(("-", "+"))][:1])
        candidates.extend(t for op, fd, t in cmd.redirects if op == "<" and fd in (None, "0") and t is not None)
    return (kind, candidates[0]) if candidates else None


def scripts_written(analysis: Analysis, reanalyse: Callable[[str, str | None], Analysis]) -> None:
    """Judge every script ``analysis``'s text writes and then runs (adds commands and unknowns to it)."""
    by_program: set[str] = set()
    reread = 0
    for cmd in list(analysis.commands):
        if cmd.speculative:
            continue
        found = _script(cmd)
        path = resolve(found[1].text, cmd.cwd) if found is not None and found[1].literal else None
        if found is not None and path is not None:
            kind = found[0]
            content = analysis.written.get(path)
            if path in by_program or (kind != "shell" and path in analysis.written and content is None):
                analysis.unknowns.append(
                    Unknown("dynamic_shell_code", f"{cmd.program} runs {path}, which this command writes")
                )
            elif kind != "shell" and content is not None:
                inline = _INLINE.get(kind)
                if inline is None or reread >= _MAX_REREAD:
                    analysis.unknowns.append(
                        Unknown("dynamic_shell_code", f"{cmd.program} runs {path}, a file this command writes")
                    )
                else:
                    reread += 1
                    sub = reanalyse(f"{inline} {shlex.quote(content)}", cmd.cwd)
                    if sub.budget_exceeded is not None:
                        analysis.budget_exceeded = sub.budget_exceeded
                    analysis.commands.extend(sub.commands)
                    analysis.unknowns.extend(sub.unknowns)
                    analysis.fork_bombs.extend(sub.fork_bombs)
        if cmd.program in _METADATA_ONLY:
            continue  # `chmod +x s.sh && ./s.sh` runs what was there
        redirected = {id(t) for _, _, t in cmd.redirects}
        for target in _write_targets(cmd):
            if id(target) in redirected or not target.literal:
                continue  # redirections are in analysis.written
            where = resolve(target.text, cmd.cwd)
            if where is not None:
                by_program.add(where)
