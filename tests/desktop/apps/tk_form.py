"""A Tk form for the desktop tests: Tk is invisible to AT-SPI, so it is the OCR/pixel path's target.

Every change is written as JSON to the state file named by argv[1] for the tests' state checkers.
"""

import json
import os
import sys
import tkinter as tk

STATE_PATH = sys.argv[1]
state = {
    "subscribe": False,
    "remember": False,
    "accept": False,
    "size": "",
    "saved": 0,
    "resets": 0,
    "applied": 0,
    "text": "type here",
    "fruit": "",
    "menu": "",
    "double": 0,
    "right": 0,
    "hovered": 0,
    "top": 0,
}

root = tk.Tk(className="TkForm")
root.title("Tk Form")
root.geometry("520x600+740+40")
root.option_add("*Font", "DejaVuSans 13")


def save(*_):
    state["text"] = entry_var.get()
    tmp = STATE_PATH + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, STATE_PATH)


def bump(key):
    def fn(*_):
        state[key] += 1
        save()

    return fn


def put(key, value):
    def fn(*_):
        state[key] = value
        save()

    return fn


menubar = tk.Menu(root)
file_menu = tk.Menu(menubar, tearoff=0)
file_menu.add_command(label="New", command=put("menu", "New"))
file_menu.add_command(label="Export", command=put("menu", "Export"))
edit_menu = tk.Menu(menubar, tearoff=0)
edit_menu.add_command(label="Uppercase", command=lambda: (entry_var.set(entry_var.get().upper()), save()))
menubar.add_cascade(label="File", menu=file_menu)
menubar.add_cascade(label="Edit", menu=edit_menu)
root.config(menu=menubar)

checks = {}
for key, label in (("subscribe", "Subscribe"), ("remember", "Remember me"), ("accept", "Accept terms")):
    var = tk.BooleanVar(value=False)
    checks[key] = var
    tk.Checkbutton(root, text=label, variable=var, command=lambda k=key, v=var: put(k, v.get())()).pack(
        anchor="w", padx=10
    )
size = tk.StringVar(value="")
sizes = tk.Frame(root)
sizes.pack(anchor="w", padx=10)
for label in ("Small", "Medium", "Large"):
    tk.Radiobutton(
        sizes, text=label, value=label.lower(), variable=size, command=lambda: put("size", size.get())()
    ).pack(side="left")
entry_var = tk.StringVar(value="type here")
entry = tk.Entry(root, textvariable=entry_var, width=30)
entry.pack(anchor="w", padx=10, pady=6)
entry_var.trace_add("write", save)
buttons = tk.Frame(root)
buttons.pack(anchor="w", padx=10, pady=4)
tk.Button(buttons, text="Save", command=bump("saved")).pack(side="left", padx=4)
tk.Button(buttons, text="Reset", command=bump("resets")).pack(side="left", padx=4)
tk.Button(buttons, text="Apply", command=bump("applied")).pack(side="left", padx=4)
labels = tk.Frame(root)
labels.pack(anchor="w", padx=10, pady=4)
double = tk.Label(labels, text="Double me", relief="ridge", padx=6)
double.pack(side="left", padx=4)
double.bind("<Double-Button-1>", bump("double"))
right = tk.Label(labels, text="Right me", relief="ridge", padx=6)
right.pack(side="left", padx=4)
right.bind("<Button-3>", bump("right"))
hover = tk.Label(labels, text="Hover me", relief="ridge", padx=6)
hover.pack(side="left", padx=4)
hover.bind("<Enter>", bump("hovered"))
fruits = tk.Listbox(root, height=4, exportselection=False)
for name in ("Apple", "Banana", "Cherry", *(f"Item {i}" for i in range(1, 30))):
    fruits.insert("end", name)
fruits.pack(anchor="w", padx=10, pady=4)


def picked(*_):
    sel = fruits.curselection()
    state["fruit"] = fruits.get(sel[0]) if sel else ""
    save()


def scrolled(*_):
    root.after(30, lambda: (state.__setitem__("top", fruits.nearest(0)), save()))


fruits.bind("<<ListboxSelect>>", picked)
fruits.bind("<Button-4>", scrolled, add="+")
fruits.bind("<Button-5>", scrolled, add="+")
root.after(50, save)
root.mainloop()
