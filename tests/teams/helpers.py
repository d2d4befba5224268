"""Shared test helpers: a runtime with the teams plugin and runners, and a small counter tool."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aleph_teams.plugin
from aleph_teams import AgentRunner, CallableRunner, MemberTask

import aleph
from aleph import ToolFacts
from aleph.testing import isolated_runtime


class Runners:
    """A plugin that registers agent runners and a ``counter_bump`` tool with a real SQLite counter."""

    ALEPH_PLUGIN_NAME = "teams_test_runners"

    def __init__(self, runners: dict[str, AgentRunner | Callable[[MemberTask], Any]], counter_db: Path | None = None):
        self.runners = {k: v if hasattr(v, "run") else CallableRunner(v) for k, v in runners.items()}  # type: ignore[arg-type]
        self.counter_db = counter_db

    @aleph.hookimpl
    def aleph_teams_agent_runners(self, register: Any) -> None:
        for name, runner in self.runners.items():
            register(name, runner)

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        if self.counter_db is None:
            return
        db = self.counter_db
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS c (k TEXT PRIMARY KEY, n INTEGER NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT PRIMARY KEY, n INTEGER NOT NULL)")

        async def bump(data: dict[str, Any]) -> dict[str, Any]:
            turn = aleph.current_turn()
            key = turn.idempotency_key if turn is not None else None
            with sqlite3.connect(db, timeout=30) as conn:
                conn.execute(
                    "INSERT INTO c (k, n) VALUES (?, 1) ON CONFLICT (k) DO UPDATE SET n = n + 1", (data["name"],)
                )
                (n,) = conn.execute("SELECT n FROM c WHERE k = ?", (data["name"],)).fetchone()
                if key is not None:  # in the same transaction as the effect, for recover_call
                    conn.execute("INSERT INTO applied (key, n) VALUES (?, ?)", (key, n))
            return {"n": n}

        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        }
        tool = CounterBump(
            "counter_bump", "Increment a named counter (test side effect).", schema, bump, facts=ToolFacts()
        )
        tool.db = db
        register(tool)


class CounterBump(aleph.LoopTool):
    """``counter_bump`` knows, for an interrupted keyed call, whether its increment was committed."""

    db: Path

    def recover_call(self, key: str, input: dict[str, Any]) -> dict[str, Any] | None:
        with sqlite3.connect(self.db, timeout=30) as conn:
            row = conn.execute("SELECT n FROM applied WHERE key = ?", (key,)).fetchone()
        return {"n": row[0]} if row else None


def total(db: Path) -> int:
    """The sum of every counter (0 before the first bump)."""
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            row = conn.execute("SELECT COALESCE(SUM(n), 0) FROM c").fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0])


def kill_mid_task(proc: Any, db: Path, rng: Any, deadline_s: float = 60.0) -> bool:
    """SIGKILL ``proc`` a random moment after it made a new side effect; False when it exited first."""
    import time

    seen = total(db)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        if total(db) > seen:
            time.sleep(rng.uniform(0, 0.06))  # land anywhere in the step: before, during or after a call
            if proc.poll() is not None:
                return False
            proc.kill()
            proc.wait()
            return True
        time.sleep(0.005)
    raise TimeoutError("the worker made no progress")


def counter(db: Path, name: str) -> int:
    """The counter's value (0 when never bumped)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT n FROM c WHERE k = ?", (name,)).fetchone()
    return int(row[0]) if row else 0


TEAM_AGENTS = (
    *(f"w{i}" for i in range(1, 4)),
    *(f"m{i}" for i in range(16)),
    *("analyst", "architect", "critic", "developer", "optimist", "researcher"),
    *("reviewer", "security", "skeptic", "tester", "writer"),
)
"""Agents the tests enrol in teams; each accepts delegation from ``lead``, ``main`` and ``boss`` (:func:`consents`)."""


def consents(agents: tuple[str, ...] = TEAM_AGENTS, *, accepts: tuple[str, ...] = ("lead", "main", "boss")) -> str:
    """``[agents.<a>] accepts_delegation_from`` lines: the consent core's delegation door asks for."""
    listed = ", ".join(f'"{a}"' for a in accepts)
    return "".join(f"\n[agents.{a}]\naccepts_delegation_from = [{listed}]\n" for a in agents)


def runtime(
    workspace: Path,
    runners: Runners | None = None,
    *,
    teams: str = "",
    toml: str = "",
    store: str | None = None,
    consent: bool = True,
) -> aleph.Aleph:
    """A strict runtime with the teams plugin (and the runners plugin); ``teams`` lines go under ``[teams]``.

    With ``consent`` the usual team agents (:data:`TEAM_AGENTS`) accept delegation from ``lead``, ``main`` and ``boss``.
    """
    lines = [f'store = "{store}"'] if store else []
    if teams:
        lines.append(teams)
    extra = "\n[teams]\n" + "\n".join(lines) + "\n" if lines else ""
    if consent:
        extra += consents()
    plugins: list[object] = [aleph_teams.plugin]
    if runners is not None:
        plugins.append(runners)
    return isolated_runtime(workspace, *plugins, config_toml=extra + toml)
