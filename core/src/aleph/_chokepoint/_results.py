"""The durable result store: exactly-once answers for calls that carry an idempotency key.

A mutating call whose turn carries ``idempotency_key`` (e.g. ``"<task id>:<step>"``) is claimed here
before the tool runs and completed with its result after. A replay of the key — a worker killed
mid-task and restarted, a retried request — gets the recorded result instead of running the tool
again; the same key with a different tool or different arguments is refused. One SQLite file (WAL)
in the data directory, shared safely by every process on the host.

A claim still ``running`` whose process is gone marks an *interrupted* call: the tool may have had
its effect or not. The chokepoint then asks the tool (``recover_call``) or refuses; it never guesses.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["ClaimState", "ResultStore", "StoredResult", "result_store"]

ClaimState = Literal["new", "done", "running", "interrupted"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key        TEXT PRIMARY KEY,
    tool       TEXT NOT NULL,
    args_fp    TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('running', 'done')),
    owner      TEXT NOT NULL,
    value      TEXT,
    metadata   TEXT,
    claimed_at REAL NOT NULL,
    done_at    REAL
);
"""
_MAX_KEY = 512


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A row of the store: who claimed the key for which call, and the result once done."""

    key: str
    tool: str
    args_fp: str
    state: str
    owner: str
    value: Any = None
    metadata: dict[str, Any] | None = None


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().rsplit(b")", 1)[1].split()
        return stat[19].decode()  # field 22 (starttime), counted after the ")" that ends the command name
    except (OSError, IndexError):
        return "0"


def _owner() -> str:
    # host, pid and the process's start time: a pid the kernel reused later is not mistaken for us.
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _owner_alive(owner: str) -> bool | None:
    """True/False for an owner on this host; None when it is another host's (cannot be told from here)."""
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _start_time(pid) == started


class ResultStore:
    """Claims, results and replays for idempotency keys, in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a recorded result must survive a power cut too
        self._db.executescript(_SCHEMA)
        self.owner = _owner()

    @staticmethod
    def check_key(key: object) -> str | None:
        """Why ``key`` cannot be used (None when it can)."""
        if not isinstance(key, str) or not key.strip():
            return "the idempotency key must be a non-empty string"
        if len(key) > _MAX_KEY:
            return f"the idempotency key is {len(key)} characters long; at most {_MAX_KEY} are allowed"
        return None

    def claim(self, key: str, tool: str, args_fp: str) -> tuple[ClaimState, StoredResult | None]:
        """Claim ``key`` for this call, atomically.

        Returns ``("new", None)`` when this call now owns the key and must run; ``("done", row)`` when
        it already ran; ``("running", row)`` when a live process is running it now; ``("interrupted",
        row)`` when its claimer died mid-call (this process then owns the claim). The caller compares
        ``row.tool`` and ``row.args_fp`` with its own call.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._row(key)
                if row is None:
                    self._db.execute(
                        "INSERT INTO results (key, tool, args_fp, state, owner, claimed_at) VALUES (?,?,?,?,?,?)",
                        (key, tool, args_fp, "running", self.owner, time.time()),
                    )
                    self._db.execute("COMMIT")
                    return "new", None
                if row.state == "done":
                    self._db.execute("COMMIT")
                    return "done", row
                if row.tool == tool and row.args_fp == args_fp and _owner_alive(row.owner) is False:
                    self._db.execute(
                        "UPDATE results SET owner = ?, claimed_at = ? WHERE key = ?", (self.owner, time.time(), key)
                    )
                    self._db.execute("COMMIT")
                    return "interrupted", row
                self._db.execute("COMMIT")
                return "running", row
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def complete(self, key: str, value: Any, metadata: dict[str, Any]) -> None:
        """Record the result of the call that owns ``key``."""
        try:
            value_text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            value_text = json.dumps(str(value), ensure_ascii=False)
        try:
            meta_text = json.dumps(metadata, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            meta_text = "{}"
        with self._lock:
            self._db.execute(
                "UPDATE results SET state = 'done', value = ?, metadata = ?, done_at = ? WHERE key = ?",
                (value_text, meta_text, time.time(), key),
            )

    def abandon(self, key: str) -> None:
        """Drop this process's claim on ``key``: the call failed before it had an effect worth keeping."""
        with self._lock:
            self._db.execute("DELETE FROM results WHERE key = ? AND state = 'running' AND owner = ?", (key, self.owner))

    def get(self, key: str) -> StoredResult | None:
        """The row for ``key``, if any."""
        with self._lock:
            return self._row(key)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def _row(self, key: str) -> StoredResult | None:
        hit = self._db.execute(
            "SELECT key, tool, args_fp, state, owner, value, metadata FROM results WHERE key = ?", (key,)
        ).fetchone()
        if hit is None:
            return None
        value = json.loads(hit[5]) if hit[5] is not None else None
        metadata = json.loads(hit[6]) if hit[6] is not None else None
        return StoredResult(hit[0], hit[1], hit[2], hit[3], hit[4], value, metadata)


_STORES: dict[Path, ResultStore] = {}
_STORES_LOCK = threading.Lock()


def result_store(data_dir: Path) -> ResultStore:
    """The process-wide store for ``data_dir`` (``<data_dir>/results.db``), opened on first use."""
    path = (data_dir / "results.db").resolve()
    with _STORES_LOCK:
        store = _STORES.get(path)
        if store is None or store.owner != _owner():  # a forked child opens its own connection
            store = _STORES[path] = ResultStore(path)
        return store
