"""The arguments of the ``desktop`` tool, checked per action before anything runs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from aleph import ToolArgs
from aleph_desktop._roles import normalise_role

__all__ = ["ACTIONS", "ActionArgs", "DesktopArgs", "Region"]

Action = Literal[
    "screenshot",
    "ocr",
    "cursor_position",
    "window_list",
    "wait",
    "click",
    "double_click",
    "right_click",
    "hover",
    "drag",
    "scroll",
    "type_text",
    "key_combo",
    "focus_window",
    "press",
    "set_value",
    "select",
    "batch",
]
ACTIONS: tuple[str, ...] = Action.__args__  # type: ignore[attr-defined]
POINTER = frozenset({"click", "double_click", "right_click", "hover", "drag", "scroll"})
KEYBOARD = frozenset({"type_text", "key_combo"})
ELEMENT = frozenset({"press", "set_value", "select"})
PERCEPTION = frozenset({"screenshot", "ocr", "cursor_position", "window_list", "wait"})
_COORD = Field(default=None, ge=0, le=100_000)


class Region(ToolArgs):
    """A rectangle of the screen, in screen pixels."""

    x: int = Field(ge=0, le=100_000)
    y: int = Field(ge=0, le=100_000)
    width: int = Field(ge=1, le=100_000)
    height: int = Field(ge=1, le=100_000)


class ActionArgs(ToolArgs):
    """One desktop action and what it needs (a batch's items; the tool's own arguments add ``actions``)."""

    action: Action
    """What to do. See: screenshot, ocr, cursor_position, window_list, wait; click, double_click, right_click,
    hover, drag, scroll (a point of a screenshot, an element, or a visible name); type_text, key_combo;
    focus_window; press, set_value, select (an accessibility element by token or role/name, pixels as fallback);
    batch (several actions, each judged and recorded on its own)."""
    x: float | None = _COORD
    """X of the point in the pixels of the screenshot named by screenshot_id."""
    y: float | None = _COORD
    """Y of the point in the pixels of the screenshot named by screenshot_id."""
    end_x: float | None = _COORD
    """Drag end X (same screenshot)."""
    end_y: float | None = _COORD
    """Drag end Y (same screenshot)."""
    screenshot_id: str | None = Field(default=None, min_length=1, max_length=64)
    """The screenshot the coordinates were read from; required with x/y, a stale one is refused."""
    element: str | None = Field(default=None, min_length=3, max_length=300)
    """Element token from desktop_ax_snapshot / desktop_ax_query_by_role / desktop_som."""
    role: str | None = Field(default=None, min_length=1, max_length=64)
    """Find the target by accessibility role (with name), e.g. "push button", "check box", "text"."""
    name: str | None = Field(default=None, min_length=1, max_length=500)
    """Find the target by its accessible name or, on the pixel path, its visible text."""
    target_app: str | None = Field(default=None, min_length=1, max_length=200)
    """Only look for the target in applications (or, for focus_window, windows) matching this."""
    window_id: int | None = Field(default=None, ge=1, le=2**32 - 1)
    """X window id (from window_list): focus_window's target; for screenshot, capture only that window."""
    via: Literal["auto", "accessibility", "pixels"] = "auto"
    """How to reach a role/name target: accessibility only, pixels (OCR + XTEST) only, or auto (accessibility,
    then pixels)."""
    text: str | None = Field(default=None, max_length=10_000)
    """Text to type (type_text) or the new value (set_value; for a combo box, the option to choose)."""
    keys: list[str] = Field(default_factory=list, max_length=8)
    """Keys held together for key_combo, e.g. ["ctrl", "s"] or ["Return"]."""
    button: Literal["left", "middle", "right"] = "left"
    """Mouse button for click, double_click and drag."""
    delta_x: int = Field(default=0, ge=-50, le=50)
    """Scroll right (positive) or left, in wheel clicks."""
    delta_y: int = Field(default=0, ge=-50, le=50)
    """Scroll down (positive) or up, in wheel clicks."""
    region: Region | None = None
    """Capture only this part of the screen (screenshot, ocr)."""
    max_width: int | None = Field(default=None, ge=16, le=8192)
    """Shrink the screenshot to at most this width (coordinates on it stay exact through its scale)."""
    max_height: int | None = Field(default=None, ge=16, le=8192)
    """Shrink the screenshot to at most this height."""
    format: Literal["png", "jpeg"] = "png"
    """Image format of returned screenshots."""
    observe: Literal["screenshot", "id", "none"] = "screenshot"
    """After an action, wait for the screen to settle and return a screenshot (with image), only its id and
    hash, or nothing."""

    @field_validator("role")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        return None if value is None else normalise_role(value)

    @model_validator(mode="after")
    def _needs(self) -> ActionArgs:
        a = self.action
        has_point = self.x is not None or self.y is not None
        if has_point and (self.x is None or self.y is None):
            raise ValueError(f"{a} needs both x and y")
        if has_point and self.screenshot_id is None:
            raise ValueError("x/y need screenshot_id: the id of the screenshot the point was read from")
        target = self.element is not None or self.name is not None or self.role is not None
        if self.element is not None and (has_point or self.name or self.role):
            raise ValueError("give the target once: element, or role/name, or x/y with screenshot_id")
        if a == "drag" and (not has_point or self.end_x is None or self.end_y is None):
            raise ValueError("drag needs x, y, end_x, end_y and screenshot_id")
        if a in ("click", "double_click", "right_click", "hover") and not (has_point or target):
            raise ValueError(f"{a} needs x/y with screenshot_id, an element, or a name")
        if a == "scroll" and self.delta_x == 0 and self.delta_y == 0:
            raise ValueError("scroll needs delta_x or delta_y (wheel clicks)")
        if a == "type_text" and not self.text:
            raise ValueError("type_text needs text")
        if a == "key_combo" and not self.keys:
            raise ValueError("key_combo needs keys, e.g. ['ctrl', 's']")
        if a == "focus_window" and self.window_id is None and self.target_app is None:
            raise ValueError("focus_window needs window_id or target_app")
        if a in ELEMENT and not target:
            raise ValueError(f"{a} needs an element token, or role and/or name")
        if a == "set_value" and self.text is None:
            raise ValueError("set_value needs text (the new value)")
        actions = getattr(self, "actions", None)
        if a == "batch" and not actions:
            raise ValueError("batch needs a non-empty actions list (and a batch cannot hold a batch)")
        if a != "batch" and actions:
            raise ValueError("actions is only for action=batch")
        if self.region is not None and self.window_id is not None:
            raise ValueError("give region or window_id, not both")
        return self


class DesktopArgs(ActionArgs):
    """Arguments of the desktop tool: one action and what it needs, or a batch of actions."""

    actions: list[ActionArgs] = Field(default_factory=list, max_length=20)
    """batch only: the actions to run in order, each judged by the policy and recorded on its own."""
