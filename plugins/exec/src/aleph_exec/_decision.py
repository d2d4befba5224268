"""The decision on a changeset, before anything of it lands: refuse, ask a human, or commit.

* **refuse**: a change to a protected path (Aleph's config and data directory, ``.git/config``,
  ``.git/hooks/``, the host's protected paths and ``[exec] protected_paths``), or to a special file
  (device, fifo, socket), or a symlink that resolves outside the workspace or into a protected path;
* **ask**: more deletions and overwrites than ``[exec] commit_ask_files``, or more than
  ``commit_ask_fraction`` of the workspace's files when it has at least ``commit_ask_min_files``, or
  the deletion of every file of the workspace (from two files on, however small it is);
* **commit** otherwise.

Protected paths are ``/``-separated globs relative to the workspace (``*`` and ``?`` inside one
component, ``**`` across components). A pattern protects what it matches and everything under it,
and a non-directory at any of its leading components: ``**/.git/config`` also refuses a ``.git``
*file* (a ``gitdir:`` pointer) or symlink anywhere, which would point git at another config.
"""

from __future__ import annotations

import math
import os
import stat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aleph import ProtectedPaths
from aleph_exec._changeset import Change, Changeset, iter_parents
from aleph_exec._layers import LAYERS_DIR
from aleph_exec._tally import Prior

__all__ = ["DEFAULT_PROTECTED", "Decision", "ProtectedPaths", "decide"]

DEFAULT_PROTECTED = ("aleph.toml", ".aleph", LAYERS_DIR, *ProtectedPaths.HOST_EXECUTED)
"""What every transaction protects besides the runtime's protected paths and the configured additions."""

_MAX_LINKS = 40
_NO_PRIOR = Prior()
_MAX_PROBLEMS_SHOWN = 5


@dataclass(slots=True)
class Decision:
    """What happens to a changeset."""

    action: Literal["commit", "ask", "refuse"]
    reason: str
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


class _MergedView:
    """The workspace as the command left it: the changeset over the lower directory."""

    def __init__(self, cs: Changeset) -> None:
        self.by_path = {c.path: c for c in cs.changes}
        self.workspace = cs.workspace
        self.upper = cs.upper

    def lookup(self, path: str) -> tuple[str, str | None] | None:
        """(kind, link target) of ``path`` in the merged view, or None when absent."""
        change = self.by_path.get(path)
        if change is not None:
            return None if change.action == "delete" else (change.kind, change.target)
        for parent in iter_parents(path):
            above = self.by_path.get(parent)
            if above is not None and above.kind != "dir":
                return None
            if above is not None and above.action == "create":
                return None  # a new directory holds only what the changeset lists
        try:
            st = os.lstat(self.workspace / path)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return "symlink", os.readlink(self.workspace / path)
        return ("dir" if stat.S_ISDIR(st.st_mode) else "file"), None


def _resolve_link(link: Change, view: _MergedView) -> str | None:
    """The workspace-relative path a new symlink resolves to, or None when it leads outside."""
    ws = str(view.workspace)
    stack = link.path.split("/")[:-1]
    pending = deque([link.target or ""])
    links = 0
    comps: deque[str] = deque()
    while pending or comps:
        if not comps:
            target = pending.popleft()
            if target.startswith("/"):
                if target != ws and not target.startswith(ws + "/"):
                    return None
                target = target[len(ws) :]
                stack = []
            comps.extend(p for p in target.split("/") if p not in ("", "."))
        name = comps.popleft()
        if name == "..":
            if not stack:
                return None
            stack.pop()
            continue
        stack.append(name)
        found = view.lookup("/".join(stack))
        if found is not None and found[0] == "symlink":
            links += 1
            if links > _MAX_LINKS:
                return None
            stack.pop()
            rest = "/".join(comps)
            comps.clear()
            pending.appendleft(rest)
            pending.appendleft(found[1] or "")
    return "/".join(stack)


def _count_files(workspace: Path, enough: int, skip: frozenset[str] = frozenset()) -> int:
    """Non-directories in the workspace, counting stops at ``enough``.

    ``.git`` directories and the directories in ``skip`` (Aleph's data directory, whose undo store and
    ledger are not the project's files) are left out.
    """
    count = 0
    todo = [(str(workspace), "")]
    while todo and count < enough:
        where, rel = todo.pop()
        with os.scandir(where) as it:
            for entry in it:
                sub = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git" and sub not in skip:
                        todo.append((entry.path, sub))
                else:
                    count += 1
                    if count >= enough:
                        break
    return count


def _is_git_dir(directory: str, view: _MergedView) -> bool:
    def at(name: str) -> tuple[str, str | None] | None:
        return view.lookup(f"{directory}/{name}" if directory else name)

    head, objects, refs = (at(name) for name in ProtectedPaths.GIT_DIR_SHAPE)
    if head is None or head[0] == "dir" or objects is None or refs is None:
        return False
    if head[0] != "file":
        return True  # a symlinked HEAD (git's old form): not read here, so taken as valid
    path = f"{directory}/HEAD" if directory else "HEAD"
    where = view.workspace / path if path not in view.by_path else view.upper / path
    try:
        with open(where, "rb") as f:
            text = f.read(256).strip()
    except OSError:
        return True  # cannot be read: taken as valid
    # what git's validate_headref accepts: a symbolic ref, or an object id
    return text.startswith(b"ref:") or (len(text) in (40, 64) and all(c in b"0123456789abcdef" for c in text))


def _bare_repositories(cs: Changeset, view: _MergedView) -> list[str]:
    """Repositories without a ``.git``: a directory with ``HEAD``, ``objects/`` and ``refs/`` is one to git.

    Run in it (or below it), git reads its ``config`` (``core.fsmonitor``, ``core.pager``, ``alias.*``)
    and runs its ``hooks``, as for ``.git``; the workspace root itself is one when the project has no
    ``.git``. So a change to those entries of such a directory, or a change that makes a directory
    holding them one, is refused like a change to ``.git/config``. Inside a ``.git`` the patterns judge.
    """
    seen: set[tuple[str, bool]] = set()
    problems = []
    for c in cs.changes:
        if c.action == "delete":
            continue
        parts = c.path.split("/")
        for i, name in enumerate(parts):
            if name == ".git":
                break
            shape = name in ProtectedPaths.GIT_DIR_SHAPE and i == len(parts) - 1 and c.action == "create"
            if name not in ProtectedPaths.GIT_DIR_CODE and not shape:
                continue
            directory = "/".join(parts[:i])
            if (directory, shape) in seen:
                continue
            seen.add((directory, shape))
            if not _is_git_dir(directory, view):
                continue
            if shape and not any(
                view.lookup(f"{directory}/{n}" if directory else n) is not None for n in ("config", "hooks")
            ):
                continue
            where = repr(directory) if directory else "the workspace root"
            problems.append(f"changes {c.path!r}, which makes {where} a git repository whose config or hooks git runs")
    return problems


def _problems(cs: Changeset, protected: ProtectedPaths) -> list[str]:
    problems = []
    view: _MergedView | None = None
    for c in cs.changes:
        verb = {"create": "creates", "modify": "modifies", "delete": "deletes"}[c.action]
        hit = protected.hit(c.path, non_dir=c.kind != "dir")
        if hit is not None:
            problems.append(f"{verb} {c.path!r}, a protected path ({hit})")
        elif c.kind == "special":
            problems.append(f"{verb} {c.path!r}, a special file (device, fifo or socket)")
        elif c.kind == "symlink" and c.action != "delete":
            view = view or _MergedView(cs)
            where = _resolve_link(c, view)
            if where is None:
                problems.append(f"creates a symlink {c.path!r} -> {c.target!r} that leads outside the workspace")
            elif where and (hit := protected.hit(where, non_dir=True)) is not None:
                problems.append(f"creates a symlink {c.path!r} -> {c.target!r} into a protected path ({hit})")
    if not problems and cs.changes:
        problems.extend(_bare_repositories(cs, view or _MergedView(cs)))
    return problems


def decide(
    cs: Changeset,
    protected: ProtectedPaths,
    *,
    ask_files: int = 50,
    ask_fraction: float = 0.25,
    ask_min_files: int = 8,
    uncounted: frozenset[str] = frozenset(),
    prior: Prior = _NO_PRIOR,
) -> Decision:
    """Refuse, ask or commit ``cs``; the reason is a sentence for the model and the person asked.

    ``prior`` is what the same session or principal committed before (see :mod:`aleph_exec._tally`):
    a call that deletes or overwrites anything is judged with it added.
    """
    counts = cs.counts()
    problems = _problems(cs, protected)
    if problems:
        shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
        more = len(problems) - _MAX_PROBLEMS_SHOWN
        reason = f"the command {shown}" + (f"; and {more} more such changes" if more > 0 else "")
        return Decision("refuse", reason, counts, problems)
    destructive = counts["deleted"] + counts["modified"]
    total = destructive + prior.destructive if destructive else 0
    earlier = (
        f" (with the {prior.destructive:,} {prior.scope} committed since a person last approved)"
        if destructive and prior.destructive
        else ""
    )
    if total > ask_files:
        return Decision(
            "ask", f"{total:,} deletions and overwrites{earlier} exceed [exec] commit_ask_files = {ask_files}", counts
        )
    if destructive:
        enough = max(ask_min_files, math.floor(total / ask_fraction) + 1)
        existing = _count_files(cs.workspace, enough, uncounted)
        if existing >= 2 and counts["deleted"] >= existing:
            return Decision("ask", f"the command deletes every file of the workspace ({existing:,})", counts)
        before = existing + prior.deleted  # the workspace as it was before the earlier deletions
        if before >= ask_min_files and total > before * ask_fraction:
            return Decision(
                "ask",
                f"{total:,} deletions and overwrites{earlier} are more than {ask_fraction:g} of the workspace's "
                f"{before:,} files ([exec] commit_ask_fraction)",
                counts,
            )
    return Decision("commit", "within the thresholds", counts)
