"""A GTK 3 form for the desktop tests (run with Debian's /usr/bin/python3 and python3-gi).

Every change is written as JSON to the state file named by argv[1]: the tests' state checkers read it,
so a task is judged by what the application really did, not by what the tool reported.
"""

import json
import os
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

STATE_PATH = sys.argv[1]
state = {
    "name": "",
    "email": "",
    "city": "",
    "password": "",
    "subscribe": False,
    "remember": False,
    "accept": False,
    "size": "medium",
    "color": "Red",
    "quantity": 1,
    "bold": False,
    "saved": 0,
    "resets": 0,
    "menu": "",
    "details": False,
    "deleted": False,
    "dialog": "",
    "tab": 0,
    "debug": False,
}


def save():
    tmp = STATE_PATH + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, STATE_PATH)


def setter(key, value):
    def apply(*_args):
        state[key] = value() if callable(value) else value
        save()

    return apply


win = Gtk.Window(title="Aleph Form")
win.set_default_size(640, 560)
win.move(40, 40)
win.connect("destroy", Gtk.main_quit)
outer = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=4)
win.add(outer)

menubar = Gtk.MenuBar()
outer.pack_start(menubar, False, False, 0)


def menu(title, items):
    top = Gtk.MenuItem.new_with_label(title)
    sub = Gtk.Menu()
    top.set_submenu(sub)
    for item in items:
        sub.append(item)
    menubar.append(top)


def plain(label, fn):
    item = Gtk.MenuItem.new_with_label(label)
    item.connect("activate", fn)
    return item


entries = {}


def upper(*_):
    entries["name"].set_text(entries["name"].get_text().upper())


details = Gtk.CheckMenuItem.new_with_label("Show details")
details.connect("toggled", lambda w: setter("details", w.get_active())())
menu("File", [plain("New", setter("menu", "New")), plain("Open", setter("menu", "Open"))])
menu("Edit", [plain("Uppercase", upper), plain("Clear name", lambda *_: entries["name"].set_text(""))])
menu("View", [details])

notebook = Gtk.Notebook()
outer.pack_start(notebook, True, True, 0)
notebook.connect("switch-page", lambda _n, _p, num: setter("tab", num)())
grid = Gtk.Grid(column_spacing=8, row_spacing=6, margin=10)
notebook.append_page(grid, Gtk.Label(label="General"))
row = 0
for key, label in (("name", "Name"), ("email", "Email"), ("city", "City"), ("password", "Password")):
    lab = Gtk.Label(label=label, xalign=0)
    entry = Gtk.Entry()
    entry.set_visibility(key != "password")
    lab.set_mnemonic_widget(entry)
    entry.connect("changed", lambda w, k=key: setter(k, w.get_text())())
    entries[key] = entry
    grid.attach(lab, 0, row, 1, 1)
    grid.attach(entry, 1, row, 2, 1)
    row += 1
for key, label in (("subscribe", "Subscribe"), ("remember", "Remember me"), ("accept", "Accept terms")):
    check = Gtk.CheckButton(label=label)
    check.connect("toggled", lambda w, k=key: setter(k, w.get_active())())
    entries[key] = check
    grid.attach(check, 0, row, 2, 1)
    row += 1
group = None
for i, label in enumerate(("Small", "Medium", "Large")):
    radio = Gtk.RadioButton.new_with_label_from_widget(group, label)
    group = group or radio
    size = label.lower()
    radio.connect("toggled", lambda w, v=size: w.get_active() and setter("size", v)())
    if label == "Medium":
        radio.set_active(True)
    grid.attach(radio, i, row, 1, 1)
row += 1
color_label = Gtk.Label(label="Color", xalign=0)
combo = Gtk.ComboBoxText()
for c in ("Red", "Green", "Blue"):
    combo.append_text(c)
combo.set_active(0)
color_label.set_mnemonic_widget(combo)
combo.connect("changed", lambda w: setter("color", w.get_active_text())())
grid.attach(color_label, 0, row, 1, 1)
grid.attach(combo, 1, row, 1, 1)
row += 1
qty_label = Gtk.Label(label="Quantity", xalign=0)
spin = Gtk.SpinButton.new_with_range(0, 100, 1)
spin.set_value(1)
qty_label.set_mnemonic_widget(spin)
spin.connect("value-changed", lambda w: setter("quantity", int(w.get_value()))())
grid.attach(qty_label, 0, row, 1, 1)
grid.attach(spin, 1, row, 1, 1)
row += 1
bold = Gtk.ToggleButton(label="Bold")
bold.connect("toggled", lambda w: setter("bold", w.get_active())())
grid.attach(bold, 0, row, 1, 1)
row += 1


def reset(*_):
    for key in ("name", "email", "city"):
        entries[key].set_text("")
    for key in ("subscribe", "remember", "accept"):
        entries[key].set_active(False)
    state["resets"] += 1
    save()


def delete(*_):
    dialog = Gtk.Dialog(title="Delete item?", transient_for=win, modal=True)
    dialog.add_button("Cancel", Gtk.ResponseType.CANCEL)
    dialog.add_button("Delete", Gtk.ResponseType.OK)
    dialog.get_content_area().add(Gtk.Label(label="Delete the item for good?"))

    def answered(_dialog, answer):
        state["deleted"] = answer == Gtk.ResponseType.OK
        state["dialog"] = "closed"
        dialog.destroy()
        save()

    # Answered through "response", not dialog.run(): a nested main loop started from an accessibility
    # action keeps the application from answering further accessibility requests until it ends.
    dialog.connect("response", answered)
    dialog.show_all()


buttons = Gtk.Box(spacing=8)
for label, fn in (("Save", lambda *_: setter("saved", state["saved"] + 1)()), ("Reset", reset), ("Delete…", delete)):
    b = Gtk.Button(label=label)
    b.connect("clicked", fn)
    buttons.pack_start(b, False, False, 0)
grid.attach(buttons, 0, row, 3, 1)

advanced = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, margin=10)
debug = Gtk.CheckButton(label="Debug mode")
debug.connect("toggled", lambda w: setter("debug", w.get_active())())
advanced.pack_start(debug, False, False, 0)
notebook.append_page(advanced, Gtk.Label(label="Advanced"))

win.show_all()
GLib.idle_add(lambda: save() and False)
Gtk.main()
