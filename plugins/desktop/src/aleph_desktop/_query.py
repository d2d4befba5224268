"""Accessibility queries: snapshot, search by role and name, the focused element, bounded tree walks.

Every walk is bounded twice: by a node budget and by a deadline. One that stops early says so
(``truncated``) and hands back a ``cursor`` that continues where it stopped.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from aleph_desktop._atspi import AtspiClient
from aleph_desktop._element import Element, Ref

__all__ = ["Cursors", "find", "focused", "score_name", "snapshot", "walk"]

_BATCH = 32
"""Objects asked about at once during a walk (requests are pipelined, the toolkit answers in order)."""
_LAYOUT_ROLES = frozenset({"filler", "panel", "unknown", "redundant object", "section", "grouping", "viewport"})


def score_name(name: str, needle: str) -> float:
    """How well ``name`` matches ``needle``: exact 1.0, prefix 0.9, substring 0.8, else 0 (case-insensitive)."""
    a, b = name.strip().lower(), needle.strip().lower()
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    if a.startswith(b):
        return 0.9
    return 0.8 if b in a else 0.0


async def _gather_until(deadline: float, coros: list[Any]) -> tuple[list[Any], bool]:
    """Results of ``coros`` (exceptions as values), and whether the deadline cut some off (those are None)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    if not tasks:
        return [], False
    done, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
    for task in pending:
        task.cancel()
    out = []
    for task in tasks:
        if task in done:
            out.append(task.exception() or task.result())
        else:
            out.append(None)
    return out, bool(pending)


async def snapshot(
    atspi: AtspiClient,
    app: str | None,
    max_elements: int,
    max_nodes: int,
    deadline_s: float,
    screen: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The interactable, showing elements of every window (of ``app``), indexed in document order."""
    deadline = time.monotonic() + deadline_s
    windows = await atspi.windows(app)
    found, cut = await _gather_until(deadline, [atspi.interactable(w, count=max_nodes) for w, _ in windows])
    _raise_if_all_failed(found)
    refs: list[tuple[Ref, str]] = []
    tree_truncated = cut
    for (window, _), result in zip(windows, found, strict=True):
        if isinstance(result, list):
            tree_truncated |= len(result) >= max_nodes
            refs.extend((r, window[0] + window[1]) for r in result)
    refs = refs[:max_nodes]
    titles, _ = await _gather_until(deadline, [atspi.prop(w, "org.a11y.atspi.Accessible", "Name") for w, _ in windows])
    window_title = {w[0] + w[1]: (t if isinstance(t, str) else "") for (w, _), t in zip(windows, titles, strict=True)}
    described, cut = await _gather_until(deadline, [atspi.describe(r) for r, _ in refs])
    tree_truncated |= cut
    elements = []
    for (_, window_token), element in zip(refs, described, strict=True):
        if not isinstance(element, Element) or element.center is None:
            continue  # gone, unanswered, or without a usable box
        if screen is not None and not _on_screen(element, screen):
            continue
        elements.append((element, window_token))
    total = len(elements)
    shown = elements[:max_elements]
    values, _ = await _gather_until(deadline, [_value_if_any(atspi, e) for e, _ in shown])
    out = []
    for index, ((element, window_token), value) in enumerate(zip(shown, values, strict=True)):
        element.value = value if isinstance(value, str) else None
        item = {"index": index, **element.to_json(), "window": window_title.get(window_token, "")}
        out.append(item)
    focus = next(({"role": e.role, "name": e.name} for e, _ in elements if "focused" in e.states), None)
    return {
        "count": len(out),
        "truncated": total > len(out),
        "tree_truncated": tree_truncated,
        "nodes_walked": len(refs),
        "total_interactable": total,
        "focused": focus,
        "elements": out,
    }


def _raise_if_all_failed(results: list[Any]) -> None:
    # One window that stops answering is left out; when every window fails, that is the answer.
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors and len(errors) == len(results):
        raise errors[0]


def _on_screen(element: Element, screen: tuple[int, int]) -> bool:
    assert element.bounds is not None
    x, y, w, h = element.bounds
    return x + w > 0 and y + h > 0 and x < screen[0] and y < screen[1]


async def _value_if_any(atspi: AtspiClient, element: Element) -> str | None:
    if element.role in ("text", "entry", "spin button", "slider", "combo box", "password text"):
        return await atspi.value(element)
    return None


async def find(
    atspi: AtspiClient,
    *,
    role: str | None,
    name: str | None,
    app: str | None = None,
    states: tuple[str, ...] = (),
    max_nodes: int = 1500,
    max_results: int = 50,
    deadline_s: float = 3.0,
    showing: bool = True,
    windows_token: Hashable | None = None,
) -> dict[str, Any]:
    """Elements with ``role`` (any interactable role when None) whose name matches ``name``, best first.

    The search itself always goes to the applications (``Collection.GetMatches``, one request per
    window), so an element that is gone is never returned. ``windows_token`` is a value that changes
    whenever a window moves (:meth:`X11Display.moves`): with it, bounds the client read under the same
    token are reused (see :meth:`AtspiClient.describe`), so a repeated query costs one round trip per
    window; without it every element's bounds are asked afresh.
    """
    deadline = time.monotonic() + deadline_s
    windows = await atspi.windows(app)
    if role is None:
        searches = [atspi.interactable(w, count=max_nodes) for w, _ in windows]
    else:
        searches = [atspi.matches(w, roles=[role], states=states, showing=showing, count=max_nodes) for w, _ in windows]
    found, truncated = await _gather_until(deadline, searches)
    _raise_if_all_failed(found)
    refs: list[Ref] = []
    for result in found:
        if isinstance(result, list):
            truncated |= len(result) >= max_nodes
            refs.extend(result)
    refs = refs[:max_nodes]
    known = role  # the search already fixed the role: no need to ask for it again
    described, cut = await _gather_until(deadline, [atspi.describe(r, role=known, frame=windows_token) for r in refs])
    truncated |= cut
    scored = []
    for element in described:
        if not isinstance(element, Element):
            continue
        if states and not set(states) <= element.states:
            continue  # toolkits do not all honour the state part of a Collection rule
        score = 1.0 if name is None else max(score_name(element.name, name), score_name(element.label, name))
        if score > 0:
            scored.append((score, element))
    scored.sort(key=lambda pair: -pair[0])  # stable: document order among equals
    return {
        "elements": [e for _, e in scored[:max_results]],
        "scores": [s for s, _ in scored[:max_results]],
        "node_count": len(refs),
        "truncated": truncated,
    }


async def focused(atspi: AtspiClient, app: str | None = None) -> Element | None:
    """The element with keyboard focus (in the active window when one is active)."""
    windows = await atspi.windows(app)
    results = await asyncio.gather(
        *(atspi.matches(w, states=["focused"], showing=False, count=1) for w, _ in windows), return_exceptions=True
    )
    candidates = [r[0] for r in results if isinstance(r, list) and r]
    if not candidates:
        return None
    described = await asyncio.gather(*(atspi.describe(r) for r in candidates), return_exceptions=True)
    elements = [e for e in described if isinstance(e, Element)]
    active = [e for e in elements if "focused" in e.states]
    return (active or elements or [None])[0]


@dataclass(slots=True)
class _Pending:
    ref: Ref
    depth: int
    parent: str | None


class Cursors:
    """Continuations of walks that stopped early, by opaque cursor (the newest ``keep`` are kept)."""

    def __init__(self, keep: int = 32) -> None:
        self.keep = keep
        self._items: OrderedDict[str, tuple[list[_Pending], int, int]] = OrderedDict()

    def put(self, stack: list[_Pending], max_depth: int, max_nodes: int) -> str:
        """Remember ``stack`` (and the walk's budgets); the cursor that resumes it."""
        token = "c" + secrets.token_hex(6)
        self._items[token] = (stack, max_depth, max_nodes)
        while len(self._items) > self.keep:
            self._items.popitem(last=False)
        return token

    def take(self, token: str) -> tuple[list[_Pending], int, int]:
        """The stack of ``token`` (used once); an unknown cursor raises ValueError."""
        item = self._items.pop(token, None)
        if item is None:
            raise ValueError(f"cursor {token!r} is unknown or already used: run the query again without a cursor")
        return item


async def walk(
    atspi: AtspiClient,
    roots: list[Ref],
    *,
    max_depth: int,
    max_nodes: int,
    deadline_s: float,
    cursors: Cursors,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The accessibility tree under ``roots`` (depth-first), with layout wrappers flattened away."""
    deadline = time.monotonic() + deadline_s
    if cursor is not None:
        stack, max_depth, max_nodes = cursors.take(cursor)
    else:
        stack = [_Pending(r, 0, None) for r in reversed(roots)]
    nodes: dict[str, Element] = {}
    attach: dict[str, str | None] = {}  # element token -> the shown ancestor it hangs under
    top: list[Element] = []
    resumed_under: dict[str, str] = {}
    count = elided = 0
    timed_out = False
    while stack and count < max_nodes:
        if time.monotonic() >= deadline:
            timed_out = True
            break
        batch = [stack.pop() for _ in range(min(_BATCH, len(stack), max_nodes - count))]
        described, cut = await _gather_until(deadline, [atspi.describe(p.ref) for p in batch])
        kids, cut2 = await _gather_until(
            deadline, [atspi.children(p.ref) if p.depth < max_depth else _none() for p in batch]
        )
        if cut or cut2:
            stack.extend(reversed([p for p, e in zip(batch, described, strict=True) if e is None]))
            timed_out = True
        for pending, element, children in zip(batch, described, kids, strict=True):
            if element is None:
                continue
            if not isinstance(element, Element):
                continue  # the object vanished or its application stopped answering
            count += 1
            token = element.token
            owner = attach.get(pending.parent) if pending.parent in attach else pending.parent
            if _is_layout(element) and pending.depth > 0:
                elided += 1
                attach[token] = owner
            else:
                nodes[token] = element
                attach[token] = token
                parent = nodes.get(owner) if owner else None
                if parent is not None:
                    parent.children.append(element)
                else:
                    top.append(element)
                    if owner:
                        resumed_under[token] = owner
            if isinstance(children, list):
                stack.extend(_Pending(c, pending.depth + 1, token) for c in reversed(children))
    truncated = bool(stack)
    out: dict[str, Any] = {
        "node_count": count,
        "elided": elided,
        "truncated": truncated,
    }
    rendered = []
    for element in top:
        item = element.to_json(children=True)
        if element.token in resumed_under:
            item["parent"] = resumed_under[element.token]
        rendered.append(item)
    out["elements"] = rendered
    if truncated:
        # Parents already returned are named by token, so a continuation can hang its nodes under them.
        for p in stack:
            if p.parent in attach and attach[p.parent] is not None:
                p.parent = attach[p.parent]
        out["cursor"] = cursors.put(stack, max_depth, max_nodes)
        why = "deadline" if timed_out else "node budget"
        out["message"] = (
            f"Tree truncated at the {why}: this is not the whole tree. Pass the cursor to continue, or narrow it "
            "with app / element / a smaller max_depth, or use desktop_ax_query_by_role."
        )
    return out


async def _none() -> None:
    return None


def _is_layout(element: Element) -> bool:
    return element.role in _LAYOUT_ROLES and not element.name and not (element.states & {"focusable", "focused"})
