"""Scripts a command runs after writing them through a program: their content is not in the text.

The walker analyses a script the same text writes with a redirection (``echo '...' > s.sh; sh s.sh``).
Written by a program instead (``tee s.sh <<< '...'``, ``cp /dev/stdin s.sh``, ``curl -o s.sh URL``,
``python3 -c "open('s.sh','w')..."``), the content is what that program produces, which the floor does
not model; running it cannot be proven safe, as ``curl ... | sh`` cannot.
"""

from __future__ import annotations

from aleph._floor._command import Analysis, Command, Unknown, resolve
from aleph._floor._targets import _write_targets
from aleph._floor._words import SHELLS
from aleph._floor._wrappers import is_interpreter

__all__ = ["scripts_written_by_programs"]

_METADATA_ONLY = frozenset({"chmod", "chown", "chgrp", "chattr", "setfacl", "touch"})


def _script(cmd: Command) -> str | None:
    """The file ``cmd`` runs as a script (a shell's or interpreter's operand, ``./x``, ``sh < x``), resolved."""
    if not cmd.argv:
        return None
    p = cmd.program
    candidates = [cmd.argv[0]] if "/" in cmd.argv[0].text else []
    if p in SHELLS or p in ("source", ".") or is_interpreter(p):
        flags = [a.text for a in cmd.args if a.text.startswith("-") and not a.text.startswith("--")]
        if not any(set(f[1:]) & set("ceErm") for f in flags):  # -c/-e/-E/-r code, -m module: no script file
            candidates.extend([a for a in cmd.args if not a.text.startswith(("-", "+"))][:1])
            candidates.extend(t for op, fd, t in cmd.redirects if op == "<" and fd in (None, "0") and t is not None)
        args = cmd.args
        candidates.extend(args[i + 1] for i, a in enumerate(args[:-1]) if a.text in ("--rcfile", "--init-file"))
    for a in candidates:
        path = resolve(a.text, cmd.cwd) if a.literal else None
        if path is not None:
            return path
    return None


def scripts_written_by_programs(analysis: Analysis) -> list[Unknown]:
    """An ``Unknown`` for each command that runs a script an earlier command wrote through a program."""
    written: set[str] = set()
    out: list[Unknown] = []
    for cmd in analysis.commands:
        if cmd.speculative:
            continue
        script = _script(cmd)
        if script is not None and script in written:
            out.append(Unknown("dynamic_shell_code", f"{cmd.program} runs {script}, which this command writes"))
        if cmd.program in _METADATA_ONLY:
            continue  # `chmod +x s.sh && ./s.sh` runs what was there
        redirected = {id(t) for _, _, t in cmd.redirects}
        for target in _write_targets(cmd):
            if id(target) in redirected or not target.literal:
                continue  # redirections are the walker's (it reads what they write)
            path = resolve(target.text, cmd.cwd)
            if path is not None:
                written.add(path)
    return out
