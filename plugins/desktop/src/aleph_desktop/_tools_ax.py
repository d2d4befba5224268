"""The accessibility tools: the focused element, the tree, search by role, the interactable snapshot."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from aleph import ToolArgs, ToolFacts
from aleph_desktop._base import TAGS, DesktopTool, InputProblem
from aleph_desktop._element import Element, parse_token
from aleph_desktop._query import find, focused, snapshot, walk
from aleph_desktop._roles import normalise_role
from aleph_desktop._x11 import DisplayUnavailable

__all__ = ["AxQueryByRole", "AxQueryFocused", "AxQueryTree", "AxSnapshot"]

READ_ONLY = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=30_000, tags=TAGS)
_APP = Field(default=None, min_length=1, max_length=200)


class FocusedArgs(ToolArgs):
    app: str | None = _APP
    """Only look in applications whose name contains this (case-insensitive), e.g. "mousepad"."""


class AxQueryFocused(DesktopTool[FocusedArgs]):
    NAME = "desktop_ax_query_focused"
    DESCRIPTION = (
        "Return the desktop element that has keyboard focus (role, name, value, bounds, states), read through "
        "the accessibility bus. Use it before typing to check where the text will go."
    )
    Args = FocusedArgs
    FACTS = READ_ONLY

    async def run(self, args: FocusedArgs) -> Any:
        element = await focused(self.desktop.atspi, args.app)
        if element is None:
            return {"element": None, "message": "No element has keyboard focus."}
        element.value = await self.desktop.atspi.value(element)
        self.desktop.remember([element])
        return {"element": element.to_json()}


class TreeArgs(ToolArgs):
    app: str | None = _APP
    """Only applications whose name contains this; default: every application on the display."""
    element: str | None = Field(default=None, min_length=3, max_length=300)
    """Start at this element token (from a snapshot or an earlier query) instead of the windows."""
    max_depth: int = Field(default=6, ge=1, le=32)
    """How deep to descend below the starting objects."""
    max_nodes: int = Field(default=1500, ge=1, le=10_000)
    """Node budget of this page; past it the result is truncated and carries a cursor."""
    deadline_ms: int = Field(default=3000, ge=50, le=30_000)
    """Time budget of this page; past it the result is truncated and carries a cursor."""
    cursor: str | None = Field(default=None, min_length=1, max_length=64)
    """Continue a truncated walk from where it stopped, with its depth and budgets (other arguments are ignored)."""


class AxQueryTree(DesktopTool[TreeArgs]):
    NAME = "desktop_ax_query_tree"
    DESCRIPTION = (
        "Return the accessibility tree of the desktop's windows (or of one app or element) as nested elements "
        "with role, name, states and bounds; layout-only wrappers are flattened away. The walk is bounded by "
        "max_nodes and deadline_ms: a truncated result carries a cursor to continue."
    )
    Args = TreeArgs
    FACTS = READ_ONLY

    async def run(self, args: TreeArgs) -> Any:
        atspi = self.desktop.atspi
        if args.cursor is not None:
            roots = []
        elif args.element is not None:
            try:
                roots = [parse_token(args.element)]
            except ValueError as exc:
                raise InputProblem(str(exc)) from None
        else:
            roots = [w for w, _ in await atspi.windows(args.app)]
        try:
            return await walk(
                atspi,
                roots,
                max_depth=args.max_depth,
                max_nodes=args.max_nodes,
                deadline_s=args.deadline_ms / 1000,
                cursors=self.desktop.cursors,
                cursor=args.cursor,
            )
        except ValueError as exc:
            raise InputProblem(str(exc)) from None


class ByRoleArgs(ToolArgs):
    role: str = Field(min_length=1, max_length=64)
    """AT-SPI role, e.g. "push button", "check box", "text", "menu item", "combo box", "page tab"."""
    name: str | None = Field(default=None, min_length=1, max_length=500)
    """Keep elements whose name matches this (exact, then prefix, then substring; case-insensitive)."""
    states: list[str] = Field(default_factory=list, max_length=8)
    """Keep elements that have all these states, e.g. ["checked"] or ["focused"]."""
    app: str | None = _APP
    """Only applications whose name contains this."""
    include_hidden: bool = False
    """Also return elements that are not showing (in closed menus, other tabs)."""
    max_nodes: int = Field(default=1500, ge=1, le=10_000)
    """Bounds the search (not the number of matches)."""
    max_results: int = Field(default=50, ge=1, le=500)
    """Matches returned at most."""

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        return normalise_role(value)

    @field_validator("states")
    @classmethod
    def _states(cls, value: list[str]) -> list[str]:
        from aleph_desktop._roles import STATE_NAMES

        out = []
        for state in value:
            norm = state.strip().lower().replace("_", " ")
            if norm not in STATE_NAMES:
                raise ValueError(f"unknown state {state!r}: use AT-SPI states like 'checked', 'focused', 'selected'")
            out.append(norm)
        return out


class AxQueryByRole(DesktopTool[ByRoleArgs]):
    NAME = "desktop_ax_query_by_role"
    DESCRIPTION = (
        "Find desktop elements by accessibility role (and optionally name and states), best name match first, "
        "each with an element token, bounds and centre. Act on one with desktop action=press/set_value/select."
    )
    Args = ByRoleArgs
    FACTS = READ_ONLY

    async def run(self, args: ByRoleArgs) -> Any:
        result = await find(
            self.desktop.atspi,
            role=args.role,
            name=args.name,
            app=args.app,
            states=tuple(args.states),
            max_nodes=args.max_nodes,
            max_results=args.max_results,
            showing=not args.include_hidden,
            windows_token=self._windows_token(),
        )
        elements: list[Element] = result["elements"]
        self.desktop.remember(elements)
        out: dict[str, Any] = {
            "elements": [e.to_json() for e in elements],
            "node_count": result["node_count"],
            "truncated": result["truncated"],
        }
        if result["truncated"]:
            out["message"] = (
                "Search stopped at the node budget or deadline — there may be further matches. Narrow it with app."
            )
        return out

    def _windows_token(self) -> object | None:
        # Boxes already read may be reused while no window has moved since, which X tells us (AT-SPI
        # does not: a window moved without a window manager sends no accessibility event).
        try:
            return ("x11", self.desktop.x().moves())
        except DisplayUnavailable:
            return None


class SnapshotArgs(ToolArgs):
    app: str | None = _APP
    """Only applications whose name contains this; default: every window on the display."""
    max_elements: int = Field(default=200, ge=1, le=500)
    """Elements listed at most (the rest are counted in total_interactable)."""
    max_nodes: int = Field(default=1500, ge=1, le=10_000)
    """Candidate elements examined at most."""
    deadline_ms: int = Field(default=3000, ge=50, le=30_000)
    """Time budget; an application that has not answered by then is left out (tree_truncated)."""


class AxSnapshot(DesktopTool[SnapshotArgs]):
    NAME = "desktop_ax_snapshot"
    DESCRIPTION = (
        "A flat, numbered list of the interactable elements showing on the desktop (buttons, fields, check boxes, "
        "menus, tabs, list items) with role, name, value, states, centre and an element token to act on. "
        "Password values are never returned."
    )
    Args = SnapshotArgs
    FACTS = READ_ONLY

    async def run(self, args: SnapshotArgs) -> Any:
        screen = self.desktop.x().size
        result = await snapshot(
            self.desktop.atspi, args.app, args.max_elements, args.max_nodes, args.deadline_ms / 1000, screen
        )
        for item in result["elements"]:
            if "center" in item:
                self.desktop.seen[item["element"]] = tuple(item["center"])
        if not result["elements"]:
            result["message"] = "No accessible interactable elements showing (Tk and X-only apps: use desktop_som)."
        elif result["tree_truncated"]:
            result["message"] = "The walk hit its budget: this is not every element. Narrow it with app."
        return result
