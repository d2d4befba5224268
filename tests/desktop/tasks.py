"""The scripted task suite: targets given by role and name, each judged by the application's own state."""

from __future__ import annotations

from typing import Any

from harness import Task

S = dict[str, Any]


def ax(role: str, name: str, action: str = "press", **extra: Any) -> dict[str, Any]:
    return {"action": action, "role": role, "name": name, "via": "accessibility", "target_app": "gtk_form", **extra}


def px(name: str, action: str = "click", app: str = "Tk Form", **extra: Any) -> dict[str, Any]:
    return {"action": action, "name": name, "via": "pixels", "target_app": app, **extra}


def flipped(key: str):
    return lambda b, a: key in a and a[key] is (not b.get(key))


def became(key: str, value: Any):
    return lambda b, a: a.get(key) == value


def bumped(key: str):
    return lambda b, a: a.get(key) == b.get(key, 0) + 1


GENERAL = ax("page tab", "General", "select")

ACCESSIBILITY: list[Task] = [
    Task(
        "gtk: type a name",
        "gtk",
        "accessibility",
        [ax("text", "Name", "set_value", text="Ada Lovelace")],
        became("name", "Ada Lovelace"),
    ),
    Task(
        "gtk: type an email",
        "gtk",
        "accessibility",
        [ax("text", "Email", "set_value", text="ada@example.org")],
        became("email", "ada@example.org"),
    ),
    Task(
        "gtk: type a city",
        "gtk",
        "accessibility",
        [ax("text", "City", "set_value", text="London")],
        became("city", "London"),
    ),
    Task(
        "gtk: replace a field's text",
        "gtk",
        "accessibility",
        [ax("text", "City", "set_value", text="Paris"), ax("text", "City", "set_value", text="Rome")],
        became("city", "Rome"),
    ),
    Task("gtk: toggle Subscribe", "gtk", "accessibility", [ax("check box", "Subscribe")], flipped("subscribe")),
    Task("gtk: toggle Remember me", "gtk", "accessibility", [ax("check box", "Remember me")], flipped("remember")),
    Task("gtk: toggle Accept terms", "gtk", "accessibility", [ax("check box", "Accept terms")], flipped("accept")),
    Task("gtk: pick Large", "gtk", "accessibility", [ax("radio button", "Large")], became("size", "large")),
    Task("gtk: pick Small", "gtk", "accessibility", [ax("radio button", "Small")], became("size", "small")),
    Task(
        "gtk: choose Green",
        "gtk",
        "accessibility",
        [ax("combo box", "Color", "set_value", text="Green")],
        became("color", "Green"),
    ),
    Task(
        "gtk: choose Blue",
        "gtk",
        "accessibility",
        [ax("combo box", "Color", "set_value", text="Blue")],
        became("color", "Blue"),
    ),
    Task(
        "gtk: set a quantity",
        "gtk",
        "accessibility",
        [ax("spin button", "Quantity", "set_value", text="7")],
        became("quantity", 7),
    ),
    Task("gtk: press Save", "gtk", "accessibility", [ax("push button", "Save")], bumped("saved")),
    Task(
        "gtk: press Reset",
        "gtk",
        "accessibility",
        [ax("text", "Name", "set_value", text="temp"), ax("push button", "Reset")],
        lambda b, a: a.get("resets") == b.get("resets", 0) + 1 and a.get("name") == "",
    ),
    Task("gtk: toggle Bold", "gtk", "accessibility", [ax("toggle button", "Bold")], flipped("bold")),
    Task(
        "gtk: menu Edit > Uppercase",
        "gtk",
        "accessibility",
        [ax("text", "Name", "set_value", text="grace"), ax("menu item", "Uppercase")],
        became("name", "GRACE"),
    ),
    Task("gtk: menu File > New", "gtk", "accessibility", [ax("menu item", "New")], became("menu", "New")),
    Task("gtk: menu File > Open", "gtk", "accessibility", [ax("menu item", "Open")], became("menu", "Open")),
    Task(
        "gtk: menu View > Show details",
        "gtk",
        "accessibility",
        [ax("check menu item", "Show details")],
        flipped("details"),
    ),
    Task(
        "gtk: fill a dialog (Delete)",
        "gtk",
        "accessibility",
        [ax("push button", "Delete…"), ax("push button", "Delete", target_app="gtk_form")],
        lambda b, a: a.get("deleted") is True and a.get("dialog") == "closed",
    ),
    Task(
        "gtk: cancel a dialog",
        "gtk",
        "accessibility",
        [ax("push button", "Delete…"), ax("push button", "Cancel")],
        lambda b, a: a.get("deleted") is False and a.get("dialog") == "closed",
    ),
    Task(
        "gtk: switch to a tab",
        "gtk",
        "accessibility",
        [ax("page tab", "Advanced", "select")],
        became("tab", 1),
        setup=[GENERAL],
    ),
    Task(
        "gtk: check a box on another tab",
        "gtk",
        "accessibility",
        [ax("page tab", "Advanced", "select"), ax("check box", "Debug mode"), GENERAL],
        lambda b, a: a.get("debug") is (not b.get("debug")) and a.get("tab") == 0,
    ),
    Task(
        "gtk: click a field, then type",
        "gtk",
        "accessibility",
        [
            ax("text", "Email", "set_value", text=""),
            ax("text", "Email", "click"),
            {"action": "type_text", "text": "kb@example.org"},
        ],
        became("email", "kb@example.org"),
    ),
    Task(
        "gtk: select all and retype",
        "gtk",
        "accessibility",
        [
            ax("text", "Name", "set_value", text="old"),
            ax("text", "Name", "click"),
            {"action": "key_combo", "keys": ["ctrl", "a"]},
            {"action": "type_text", "text": "new"},
        ],
        became("name", "new"),
    ),
    Task(
        "mousepad: write a document and save it from the menu",
        "mousepad",
        "accessibility",
        [
            {"action": "set_value", "role": "text", "text": "hello from aleph\n", "via": "accessibility"},
            {"action": "press", "role": "menu item", "name": "Save", "via": "accessibility"},
        ],
        lambda b, a: a.get("text") == "hello from aleph\n",
    ),
    Task(
        "mousepad: type into the document and save with ctrl+s",
        "mousepad",
        "accessibility",
        [
            {"action": "click", "role": "text", "via": "accessibility"},
            {"action": "type_text", "text": "typed line"},
            {"action": "key_combo", "keys": ["ctrl", "s"]},
        ],
        lambda b, a: a.get("text", "").startswith("typed line"),
    ),
    Task(
        "zenity: answer an entry dialog",
        "zenity",
        "accessibility",
        [
            {"action": "set_value", "role": "text", "text": "hello zenity", "via": "accessibility"},
            {"action": "press", "role": "push button", "name": "OK", "via": "accessibility"},
        ],
        lambda b, a: a.get("stdout") == "hello zenity" and a.get("code") == 0,
        argv=["--entry", "--title=Entry", "--text=Your word"],
    ),
    Task(
        "zenity: confirm a question",
        "zenity",
        "accessibility",
        [{"action": "press", "role": "push button", "name": "Yes", "via": "accessibility"}],
        lambda b, a: a.get("code") == 0,
        argv=["--question", "--title=Question", "--text=Proceed?"],
    ),
    Task(
        "zenity: decline a question",
        "zenity",
        "accessibility",
        [{"action": "press", "role": "push button", "name": "No", "via": "accessibility"}],
        lambda b, a: a.get("code") == 1,
        argv=["--question", "--title=Question", "--text=Proceed?"],
    ),
    Task(
        "zenity: pick from a list",
        "zenity",
        "accessibility",
        [
            {"action": "select", "role": "table cell", "name": "Banana", "via": "accessibility"},
            {"action": "press", "role": "push button", "name": "OK", "via": "accessibility"},
        ],
        lambda b, a: a.get("stdout") == "Banana",
        argv=["--list", "--column=Fruit", "Apple", "Banana", "Cherry"],
    ),
]

PIXELS: list[Task] = [
    Task("tk: tick Subscribe", "tk", "pixels", [px("Subscribe")], flipped("subscribe")),
    Task("tk: tick Remember me", "tk", "pixels", [px("Remember me")], flipped("remember")),
    Task("tk: tick Accept terms", "tk", "pixels", [px("Accept terms")], flipped("accept")),
    Task("tk: pick Small", "tk", "pixels", [px("Small")], became("size", "small")),
    Task("tk: pick Medium", "tk", "pixels", [px("Medium")], became("size", "medium")),
    Task("tk: pick Large", "tk", "pixels", [px("Large")], became("size", "large")),
    Task("tk: press Save", "tk", "pixels", [px("Save")], bumped("saved")),
    Task("tk: press Reset", "tk", "pixels", [px("Reset")], bumped("resets")),
    Task("tk: press Apply", "tk", "pixels", [px("Apply")], bumped("applied")),
    Task(
        "tk: replace the field's text",
        "tk",
        "pixels",
        [px("type here", "set_value", text="hello tk")],
        became("text", "hello tk"),
    ),
    Task(
        "tk: append to the field",
        "tk",
        "pixels",
        [px("hello tk"), {"action": "key_combo", "keys": ["End"]}, {"action": "type_text", "text": " more"}],
        became("text", "hello tk more"),
    ),
    Task("tk: pick Banana in a list", "tk", "pixels", [px("Banana")], became("fruit", "Banana")),
    Task("tk: pick Cherry in a list", "tk", "pixels", [px("Cherry")], became("fruit", "Cherry")),
    Task("tk: menu File > New", "tk", "pixels", [px("File"), px("New")], became("menu", "New")),
    Task("tk: menu File > Export", "tk", "pixels", [px("File"), px("Export")], became("menu", "Export")),
    Task(
        "tk: menu Edit > Uppercase",
        "tk",
        "pixels",
        [px("Edit"), px("Uppercase")],
        lambda b, a: a.get("text") == b.get("text", "").upper() and a.get("text") != b.get("text"),
    ),
    Task("tk: double-click a label", "tk", "pixels", [px("Double me", "double_click")], bumped("double")),
    Task("tk: right-click a label", "tk", "pixels", [px("Right me", "right_click")], bumped("right")),
    Task("tk: hover a label", "tk", "pixels", [px("Save", "hover"), px("Hover me", "hover")], bumped("hovered")),
    Task(
        "tk: scroll a list",
        "tk",
        "pixels",
        [px("Apple", "hover"), {"action": "scroll", "delta_y": 3}],
        lambda b, a: a.get("top", 0) > b.get("top", 0),
    ),
    Task("gtk via pixels: press Save", "gtk", "pixels", [px("Save", app="Aleph Form")], bumped("saved")),
    Task("gtk via pixels: tick Subscribe", "gtk", "pixels", [px("Subscribe", app="Aleph Form")], flipped("subscribe")),
]
