from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aleph_exec.plugin

import aleph
from aleph.testing import isolated_runtime


def make_runtime(workspace: Path, extra_toml: str = "", plugins: tuple[object, ...] = ()) -> aleph.Aleph:
    return isolated_runtime(workspace, aleph_exec.plugin, *plugins, config_toml=extra_toml)


async def run(workspace: Path, name: str, payload: dict[str, Any], toml: str = "", plugins=()) -> Any:
    """Call one tool in a fresh runtime and return its parsed output (raises the ToolError)."""
    async with make_runtime(workspace, toml, plugins) as rt:
        out = await aleph.UnscopedToolService(rt.registry).execute(name, payload)
    return json.loads(out.text)


def processes_with(token: str) -> list[str]:
    """Command lines (and states) of every process whose command line contains ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Any process of the machine: a command line need not be UTF-8.
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token in cmd:
            found.append(f"{entry.name} {state} {cmd}")
    return found


def processes_named(comm: str) -> list[str]:
    """Every process (zombies included) whose command name is ``comm``, with its state and parent."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            if name == comm[:15]:
                state, ppid = stat.rsplit(")", 1)[1].split()[:2]
                found.append(f"{entry.name} {state} ppid={ppid}")
    return found


def zombie_children() -> list[str]:
    """Zombie processes whose parent is this test process (pid and command name)."""
    import os

    me = str(os.getpid())
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] == "Z" and fields[1] == me:
                out.append(f"{entry.name} {stat[stat.index('(') + 1 : stat.rindex(')')]}")
    return out
