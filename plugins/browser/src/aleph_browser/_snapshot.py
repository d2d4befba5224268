"""Snapshot text: bounding it to a character budget, and the delta between two snapshots of a tab.

Snapshots are Playwright ARIA snapshots in ``ai`` mode: YAML lines such as
``- button "Submit" [ref=e2]`` where interactive and structural nodes carry a ``[ref=eN]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["REF", "Delta", "budget", "delta", "find", "refs_in"]

REF = re.compile(r"\[ref=([A-Za-z0-9]+)\]")
"""A ref inside a snapshot line."""
REF_TARGET = re.compile(r"^(?:f\d+)?e\d+$")
"""A ``target`` argument that is a ref (``e4``, or ``f1e2`` inside a frame) rather than a selector."""


def refs_in(text: str) -> set[str]:
    """Every ref that appears in ``text``."""
    return set(REF.findall(text))


def budget(text: str, max_chars: int, *, hint: str = "") -> str:
    """``text`` if it fits in ``max_chars``; else its head cut at a line end plus a marker that stays inside the budget.

    The marker says how much was cut and how to see the rest (``hint`` adds tool-specific advice).
    """
    if len(text) <= max_chars:
        return text
    total_lines = text.count("\n") + 1
    advice = hint or "call browser_snapshot with target=<ref of a section>, a smaller depth, or a larger max_chars"
    for reserve in (400, 800, 1600):
        keep = max(0, max_chars - reserve)
        cut = text.rfind("\n", 0, keep)
        head = text[: cut if cut > 0 else keep]
        shown_lines = head.count("\n") + 1 if head else 0
        marker = (
            f"\n[... truncated: showing {len(head):,} of {len(text):,} characters "
            f"({total_lines - shown_lines:,} of {total_lines:,} lines cut). To see the rest, {advice}.]"
        )
        if len(head) + len(marker) <= max_chars:
            return head + marker
    return marker[-max_chars:]


def find(text: str, needle: str, *, max_hits: int = 200) -> str:
    """The lines containing ``needle`` (case-insensitive), each under its chain of ancestor lines."""
    wanted = needle.casefold()
    out: list[str] = []
    ancestors: list[tuple[int, str, bool]] = []  # (indent, line, already emitted)
    hits = 0
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        while ancestors and ancestors[-1][0] >= indent:
            ancestors.pop()
        if wanted in line.casefold():
            hits += 1
            if hits > max_hits:
                out.append(f"[... more than {max_hits} matches; narrow the search]")
                break
            for i, (level, parent, shown) in enumerate(ancestors):
                if not shown:
                    out.append(parent)
                    ancestors[i] = (level, parent, True)
            out.append(line)
            ancestors.append((indent, line, True))
        else:
            ancestors.append((indent, line, False))
    if not hits:
        return f"# no line of the snapshot contains {needle!r}"
    return f"# {min(hits, max_hits)} line(s) contain {needle!r} (shown with their ancestors)\n" + "\n".join(out)


@dataclass(slots=True)
class _Node:
    key: str
    parent: str | None
    lines: list[str]
    indent: int


def _nodes(text: str) -> dict[str, _Node]:
    """Group snapshot lines by ref: each ref'd line with the ref-less lines nested under it."""
    nodes: dict[str, _Node] = {}
    stack: list[tuple[int, _Node]] = []  # enclosing ref'd lines, innermost last
    seen: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        m = REF.search(line)
        if m is None and stack:
            # A ref-less line (text, /url, option) belongs to the nearest enclosing ref'd node.
            stack[-1][1].lines.append(line)
            continue
        if m is not None:
            key = m.group(1)
        else:
            stripped = line.strip()
            seen[stripped] = seen.get(stripped, 0) + 1
            key = f"@{stripped}#{seen[stripped]}"
        node = _Node(key, stack[-1][1].key if stack else None, [line], indent)
        nodes[key] = node
        if m is not None:
            stack.append((indent, node))
    return nodes


def _block(node: _Node) -> str:
    return "\n".join(line[node.indent :] for line in node.lines)


@dataclass(frozen=True, slots=True)
class Delta:
    """What changed between two snapshots, keyed by ref."""

    text: str
    changed: int
    added: int
    removed: int
    unchanged: int


def delta(old: str, new: str) -> Delta:
    """The line-diff of two snapshots keyed by ref: ``~`` changed, ``+`` added, ``-`` removed nodes."""
    before, after = _nodes(old), _nodes(new)
    out: list[str] = []
    changed = added = 0
    for key, node in after.items():
        prior = before.get(key)
        if prior is not None and prior.lines == node.lines:
            continue
        block = _block(node)
        if prior is None:
            added += 1
            where = f" (in {node.parent})" if node.parent and not node.parent.startswith("@") else ""
            out.append(_mark("+", block, where))
        elif _block(prior) != block or prior.parent != node.parent:
            changed += 1
            out.append(_mark("~", block, ""))
    gone = [key for key in before if key not in after]
    removed_refs = [key for key in gone if not key.startswith("@")]
    if removed_refs:
        shown = ", ".join(removed_refs[:200]) + (
            f" ... ({len(removed_refs) - 200} more)" if len(removed_refs) > 200 else ""
        )
        out.append(f"- removed: {shown}")
    removed = len(gone)
    unchanged = len(after) - changed - added
    header = (
        f"# delta since the previous snapshot of this tab: {changed} changed, {added} added, {removed} removed, "
        f"{unchanged} unchanged"
    )
    if not out:
        header = "# delta since the previous snapshot of this tab: no changes"
    return Delta("\n".join([header, *out]), changed, added, removed, unchanged)


def _mark(sign: str, block: str, where: str) -> str:
    lines = block.splitlines()
    first = f"{sign} {lines[0]}{where}"
    return "\n".join([first, *(f"  {line}" for line in lines[1:])])
