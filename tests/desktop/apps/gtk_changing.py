"""A GTK 3 window that changes on its own, for the accessibility cache tests (Debian's python3 + python3-gi).

It changes when a signal arrives, not through the tools, so the cache has to notice by itself:
SIGUSR1 removes the last check box, SIGUSR2 puts a tall label at the top (everything below moves down
inside an unmoved window), SIGHUP renames the first check box, SIGWINCH scrolls the list of rows
down by 60 pixels. After each change it writes a line to
the file named by argv[1], so a test knows the application has done it.
"""

import signal
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

LOG = sys.argv[1]


def done(what):
    with open(LOG, "a") as f:
        f.write(what + "\n")


win = Gtk.Window(title="Changing")
win.set_default_size(360, 420)
win.move(700, 60)
win.connect("destroy", Gtk.main_quit)
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=4, margin=10)
win.add(box)
checks = []
for i in range(1, 6):
    check = Gtk.CheckButton(label=f"Option {i}")
    box.pack_start(check, False, False, 0)
    checks.append(check)
scroller = Gtk.ScrolledWindow()
scroller.set_min_content_height(150)
scroller.set_policy(Gtk.PolicyType.NEVER, Gtk.PolicyType.ALWAYS)
rows = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=4)
for i in range(1, 16):
    rows.pack_start(Gtk.CheckButton(label=f"Row {i}"), False, False, 0)
scroller.add(rows)
box.pack_end(scroller, False, False, 0)


def remove_last():
    if checks:
        checks.pop().destroy()
    GLib.idle_add(lambda: done("removed") and False)
    return True


def push_down():
    spacer = Gtk.Label(label="Inserted\n\n\n\n")
    box.pack_start(spacer, False, False, 0)
    box.reorder_child(spacer, 0)
    spacer.show()
    GLib.timeout_add(200, lambda: done("pushed") and False)  # after the relayout
    return True


def rename_first():
    checks[0].set_label("Renamed")
    GLib.idle_add(lambda: done("renamed") and False)
    return True


def scroll():
    adjustment = scroller.get_vadjustment()
    adjustment.set_value(adjustment.get_value() + 60)
    GLib.timeout_add(200, lambda: done("scrolled") and False)
    return True


GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGWINCH, scroll)
GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, remove_last)
GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR2, push_down)
GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGHUP, rename_first)
win.show_all()
GLib.timeout_add(300, lambda: done("ready") and False)
Gtk.main()
