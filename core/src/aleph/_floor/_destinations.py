"""Where programs that write many files put them: the directory an archive, clone, patch or download lands in.

Such a program writes names the command text does not show (an archive's members, a repository's
files, the files a patch names, what a server calls its download), so the directory is what the
floor can judge: into ``/``, the home directory, a system directory, or a directory that is or holds a
protected path (``~/.ssh``, ``~/.config`` with ``git/config`` in it), it cannot be proven safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from aleph._floor._command import Command
from aleph._floor._words import Arg

__all__ = ["TREE_DESTINATION_PROGRAMS", "patch_files", "tree_destination"]

TREE_DESTINATION_PROGRAMS = frozenset({"unzip", "cpio", "bsdcpio", "git", "patch", "curl", "wget", "aria2c"})
"""Programs :func:`tree_destination` reads (tar, 7z, cp and rsync are read by the rules themselves)."""

_GIT_GLOBAL_VALUED = frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"})
_CLONE_VALUED = frozenset(
    {"-o", "--origin", "-b", "--branch", "-u", "--upload-pack", "--reference", "--reference-if-able", "-c"}
    | {"--config", "--template", "-j", "--jobs", "--filter", "--server-option", "--depth", "--shallow-since"}
    | {"--shallow-exclude", "--separate-git-dir", "--bundle-uri", "--ref-format", "--revision"}
)
_WORKTREE_VALUED = frozenset({"-b", "-B", "--reason"})
_PATCH_VALUED = frozenset("pdioBrzDFVYg")


def _value(args: Sequence[Arg], short: str | None, longs: tuple[str, ...]) -> Arg | None:
    """The value of an option, read as getopt does: ``-d DIR``, ``-dDIR``, ``-od DIR``, ``--dir=DIR``, ``--dir DIR``."""
    found: Arg | None = None
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        nxt = args[i + 1] if i + 1 < len(args) else None
        if t == "--":
            break
        if t.startswith("--"):
            name, eq, value = t.partition("=")
            if name in longs:
                found = Arg(value, a.literal) if eq else nxt
        elif short is not None and t.startswith("-") and short in t[1:]:
            at = t.index(short, 1)
            found = Arg(t[at + 1 :], a.literal) if at + 1 < len(t) else nxt
        i += 1
    return found


def _operands(args: Sequence[Arg], valued: frozenset[str]) -> list[Arg]:
    """Operands after skipping options and the values of ``valued`` options given as the next word."""
    out: list[Arg] = []
    skip = False
    rest = False
    for a in args:
        if skip:
            skip = False
        elif rest or not a.text.startswith("-") or a.text == "-":
            out.append(a)
        elif a.text == "--":
            rest = True
        elif a.text in valued:
            skip = True
    return out


def _git_destination(args: Sequence[Arg]) -> Arg | None:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in _GIT_GLOBAL_VALUED else 1
    if i >= len(args):
        return None
    sub, rest = args[i].text, args[i + 1 :]
    if sub == "clone":
        operands = _operands(rest, _CLONE_VALUED)
        return operands[1] if len(operands) >= 2 else None
    if sub == "worktree" and rest and rest[0].text == "add":
        operands = _operands(rest[1:], _WORKTREE_VALUED)
        return operands[0] if operands else None
    if sub == "checkout-index":
        return _value(rest, None, ("--prefix",))
    return None


def tree_destination(cmd: Command) -> Arg | None:
    """The directory ``cmd`` writes a tree of unknown names into, or None when it writes none (or not there)."""
    p = cmd.program
    args = cmd.args
    if p == "unzip":
        return _value(args, "d", ()) or Arg(".")
    if p in ("cpio", "bsdcpio"):
        copy_in = any(a.text.startswith("-") and not a.text.startswith("--") and "i" in a.text for a in args)
        return (_value(args, "D", ("--directory",)) or Arg(".")) if copy_in else None
    if p == "git":
        return _git_destination(args)
    if p == "patch":
        return _value(args, "d", ("--directory",)) or Arg(".")
    if p == "curl":
        return _value(args, None, ("--output-dir",))
    if p == "wget":
        return _value(args, "P", ("--directory-prefix",))
    if p == "aria2c":
        return _value(args, "d", ("--dir",))
    return None


def patch_files(args: Sequence[Arg]) -> list[Arg]:
    """The files ``patch`` writes that its command line names: the file to patch and ``-o``/``--output``."""
    out: list[Arg] = []
    output = _value(args, "o", ("--output",))
    if output is not None and output.text != "-":
        out.append(output)
    operands = _operands(args, frozenset(f"-{f}" for f in _PATCH_VALUED))
    if operands:
        out.append(operands[0])
    return out
