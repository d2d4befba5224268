"""AT-SPI's role and state numbering (``atspi-constants.h``), so a tree walk needs no name look-ups."""

from __future__ import annotations

__all__ = ["INTERACTABLE_ROLES", "ROLE_NAMES", "STATE_NAMES", "bitset", "normalise_role", "role_id", "state_bits"]

ROLE_NAMES: tuple[str, ...] = (
    "invalid",
    "accelerator label",
    "alert",
    "animation",
    "arrow",
    "calendar",
    "canvas",
    "check box",
    "check menu item",
    "color chooser",
    "column header",
    "combo box",
    "date editor",
    "desktop icon",
    "desktop frame",
    "dial",
    "dialog",
    "directory pane",
    "drawing area",
    "file chooser",
    "filler",
    "focus traversable",
    "font chooser",
    "frame",
    "glass pane",
    "html container",
    "icon",
    "image",
    "internal frame",
    "label",
    "layered pane",
    "list",
    "list item",
    "menu",
    "menu bar",
    "menu item",
    "option pane",
    "page tab",
    "page tab list",
    "panel",
    "password text",
    "popup menu",
    "progress bar",
    "push button",
    "radio button",
    "radio menu item",
    "root pane",
    "row header",
    "scroll bar",
    "scroll pane",
    "separator",
    "slider",
    "spin button",
    "split pane",
    "status bar",
    "table",
    "table cell",
    "table column header",
    "table row header",
    "tearoff menu item",
    "terminal",
    "text",
    "toggle button",
    "tool bar",
    "tool tip",
    "tree",
    "tree table",
    "unknown",
    "viewport",
    "window",
    "extended",
    "header",
    "footer",
    "paragraph",
    "ruler",
    "application",
    "autocomplete",
    "editbar",
    "embedded",
    "entry",
    "chart",
    "caption",
    "document frame",
    "heading",
    "page",
    "section",
    "redundant object",
    "form",
    "link",
    "input method window",
    "table row",
    "tree item",
    "document spreadsheet",
    "document presentation",
    "document text",
    "document web",
    "document email",
    "comment",
    "list box",
    "grouping",
    "image map",
    "notification",
    "info bar",
    "level bar",
    "title bar",
    "block quote",
    "audio",
    "video",
    "definition",
    "article",
    "landmark",
    "log",
    "marquee",
    "math",
    "rating",
    "timer",
    "static",
    "math fraction",
    "math root",
    "subscript",
    "superscript",
    "description list",
    "description term",
    "description value",
    "footnote",
    "content deletion",
    "content insertion",
    "mark",
    "suggestion",
    "push button menu",
)
"""Role names by AT-SPI role number (``ROLE_NAMES[43] == "push button"``), as ``GetRoleName`` spells them."""

STATE_NAMES: tuple[str, ...] = (
    "invalid",
    "active",
    "armed",
    "busy",
    "checked",
    "collapsed",
    "defunct",
    "editable",
    "enabled",
    "expandable",
    "expanded",
    "focusable",
    "focused",
    "has tooltip",
    "horizontal",
    "iconified",
    "modal",
    "multi line",
    "multiselectable",
    "opaque",
    "pressed",
    "resizable",
    "selectable",
    "selected",
    "sensitive",
    "showing",
    "single line",
    "stale",
    "transient",
    "vertical",
    "visible",
    "manages descendants",
    "indeterminate",
    "required",
    "truncated",
    "animated",
    "invalid entry",
    "supports autocompletion",
    "selectable text",
    "is default",
    "visited",
    "checkable",
    "has popup",
    "read only",
)
"""State names by AT-SPI state bit number (``STATE_NAMES[12] == "focused"``)."""

_ROLE_IDS = {name: i for i, name in enumerate(ROLE_NAMES)}
_ALIASES = {
    "button": "push button",
    "checkbox": "check box",
    "textbox": "text",
    "textfield": "text",
    "edit": "text",
    "combobox": "combo box",
    "menuitem": "menu item",
    "radio": "radio button",
    "radiobutton": "radio button",
    "tab": "page tab",
    "togglebutton": "toggle button",
    "listitem": "list item",
    "spinbutton": "spin button",
    "switch": "toggle button",
}

INTERACTABLE_ROLES: frozenset[str] = frozenset(
    {
        "push button",
        "toggle button",
        "check box",
        "radio button",
        "combo box",
        "text",
        "password text",
        "entry",
        "spin button",
        "slider",
        "menu item",
        "check menu item",
        "radio menu item",
        "menu",
        "page tab",
        "list item",
        "tree item",
        "table cell",
        "link",
        "scroll bar",
        "push button menu",
        "icon",
        "dial",
        "color chooser",
        "date editor",
        "editbar",
        "autocomplete",
        "terminal",
    }
)
"""Roles a person can act on: what a snapshot lists and set-of-marks numbers."""


def normalise_role(role: str) -> str:
    """An AT-SPI role name from a loose spelling ("PushButton", "push_button", "button", "AXButton")."""
    text = role.strip()
    if text.startswith("AX") and len(text) > 2 and text[2].isupper():
        text = text[2:]  # the macOS spelling the reference uses
    spaced = "".join(" " + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(text))
    spaced = " ".join(spaced.replace("_", " ").replace("-", " ").split())
    if spaced in _ROLE_IDS:
        return spaced
    squashed = spaced.replace(" ", "")
    if squashed in _ALIASES:
        return _ALIASES[squashed]
    for name in ROLE_NAMES:
        if name.replace(" ", "") == squashed:
            return name
    raise ValueError(
        f"unknown accessibility role {role!r}: use an AT-SPI role such as 'push button', 'check box', 'text'"
    )


def role_id(name: str) -> int:
    """The AT-SPI number of the role ``name`` (a name :func:`normalise_role` returned)."""
    return _ROLE_IDS[name]


def state_bits(words: list[int]) -> frozenset[str]:
    """State names from ``GetState``'s two 32-bit words."""
    out = set()
    for w, word in enumerate(words[:2]):
        for bit in range(32):
            if word >> bit & 1:
                n = w * 32 + bit
                if n < len(STATE_NAMES):
                    out.add(STATE_NAMES[n])
    return frozenset(out)


def bitset(numbers: list[int], words: int) -> list[int]:
    """A D-Bus ``au`` bit set of at least ``words`` 32-bit words with the bits ``numbers`` set."""
    out = [0] * max(words, (max(numbers, default=0) // 32) + 1)
    for n in numbers:
        out[n // 32] |= 1 << (n % 32)
    return out
