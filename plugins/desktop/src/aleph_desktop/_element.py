"""An accessible object as the desktop tools see it: its token, role, name, states and bounds.

:class:`Element` is what an AT-SPI query returns and what tools hand back to the model (redacted:
a password field's value never leaves); :func:`parse_token` reads the element token back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_NAME", "AccessibilityUnavailable", "Element", "Ref", "parse_token"]

Ref = tuple[str, str]
"""An accessible object: (bus name of its application, object path)."""

MAX_NAME = 120
"""Characters of a name or value returned (longer ones end with "…")."""


class AccessibilityUnavailable(RuntimeError):
    """The accessibility bus, or an application on it, cannot be reached; the message says why."""


def parse_token(token: str) -> Ref:
    """The (bus, path) of an element token such as ``:1.5/org/a11y/atspi/accessible/42``."""
    cut = token.find("/")
    if cut <= 0 or not token.startswith(":") or len(token) > 300:
        raise ValueError(f"element {token!r} is not an element token from a snapshot (like ':1.5/org/a11y/...')")
    return token[:cut], token[cut:]


def _clip(text: str, limit: int = MAX_NAME) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True)
class Element:
    """One accessible object: role, name, states, screen bounds, and where it lives."""

    ref: Ref
    role: str
    name: str
    states: frozenset[str]
    bounds: tuple[int, int, int, int] | None = None
    app: str = ""
    value: str | None = None
    children: list[Element] = field(default_factory=list)
    label: str = ""
    """The text of the label that names this control (a combo box's name is its current choice)."""

    @property
    def token(self) -> str:
        """The element token tools accept back (``element`` argument)."""
        return self.ref[0] + self.ref[1]

    @property
    def secure(self) -> bool:
        """A password field: its value is never returned."""
        return self.role == "password text"

    @property
    def center(self) -> tuple[float, float] | None:
        """The centre of the bounds on the screen, or None without usable bounds."""
        if self.bounds is None or self.bounds[2] <= 1 or self.bounds[3] <= 1:
            return None
        x, y, w, h = self.bounds
        return round(x + w / 2, 1), round(y + h / 2, 1)

    def to_json(self, *, children: bool = False) -> dict[str, Any]:
        """The redacted form tools return; default-valued fields are left out."""
        out: dict[str, Any] = {"element": self.token, "role": self.role}
        if self.name:
            out["name"] = _clip(self.name)
        if self.label and self.label != self.name:
            out["label"] = _clip(self.label)
        if self.value is not None and not self.secure:
            out["value"] = _clip(self.value)
        if self.bounds is not None:
            x, y, w, h = self.bounds
            out["bounds"] = {"x": x, "y": y, "width": w, "height": h}
            if self.center is not None:
                out["center"] = list(self.center)
        shown = sorted(self.states & _REPORTED_STATES)
        if shown:
            out["states"] = shown
        if "enabled" not in self.states and "sensitive" not in self.states:
            out["enabled"] = False
        if self.secure:
            out["secure"] = True
        if self.app:
            out["app"] = self.app
        if children and self.children:
            out["children"] = [c.to_json(children=True) for c in self.children]
        return out


_REPORTED_STATES = frozenset(
    {
        "focused",
        "checked",
        "pressed",
        "selected",
        "expanded",
        "collapsed",
        "editable",
        "active",
        "indeterminate",
        "modal",
        "read only",
        "required",
        "multi line",
        "invalid entry",
    }
)
