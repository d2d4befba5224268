"""Two backends behind one small interface: SQLite (WAL, the default) and PostgreSQL (psycopg 3).

The store writes one SQL text for both: ``?`` placeholders (turned into ``%s`` for psycopg) and the
``ON CONFLICT`` / ``RETURNING`` forms both engines share. A write transaction is serialised on SQLite
(``BEGIN IMMEDIATE``) and takes row locks on PostgreSQL (``tx.for_update``). Every committed write
wakes waiters in this process at once and in other processes through the backend's own channel.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from aleph_teams._store._schema import SCHEMA_VERSION, migrations, schema
from aleph_teams._store._wake import SocketBus, Wakeup

__all__ = ["Database", "IntegrityError", "PostgresDatabase", "SqliteDatabase", "Tx", "open_database"]

log = logging.getLogger("aleph.teams")
_CHANNEL = "aleph_teams"


class IntegrityError(Exception):
    """A uniqueness or reference constraint refused the write (both engines' errors map here)."""


class Tx(Protocol):
    """One transaction: run statements, read rows."""

    for_update: str
    """``" FOR UPDATE"`` on PostgreSQL (lock the rows read), empty on SQLite (the write lock is held)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (empty for statements that return none)."""
        ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a query, or None."""
        ...


class Database(Protocol):
    """What the store needs from a backend."""

    dialect: str
    wakeup: Wakeup

    def write(self) -> contextlib.AbstractContextManager[Tx]:
        """A write transaction: committed on exit, rolled back on error; wakes waiters after commit."""
        ...

    def read(self) -> contextlib.AbstractContextManager[Tx]:
        """A read-only view (one consistent snapshot)."""
        ...

    def close(self) -> None:
        """Release connections and listeners."""
        ...


class _SqliteTx:
    for_update = ""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.changed = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            cur = self._conn.execute(sql, tuple(params))
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc
        rows = cur.fetchall()
        if cur.rowcount and cur.rowcount > 0:
            self.changed = True
        return rows

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self.execute(sql, params)
        return rows[0] if rows else None


class SqliteDatabase:
    """The default backend: one SQLite file in WAL mode, shared safely by every process on the host."""

    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.wakeup = Wakeup()
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # durable across a killed process; WAL keeps it atomic
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()
        self._bus = SocketBus(path, self.wakeup)

    def _migrate(self) -> None:
        with self.write() as tx:
            tx.execute("CREATE TABLE IF NOT EXISTS teams_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            found = tx.one("SELECT value FROM teams_meta WHERE key = 'schema_version'")
            if found is not None and int(found[0]) > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} has teams schema {found[0]}, newer than this aleph-teams ({SCHEMA_VERSION}); "
                    "upgrade aleph-teams"
                )
            if found is not None:  # an existing store: bring its tables up to date before adding new ones
                for statement in migrations("sqlite", int(found[0])):
                    tx.execute(statement)
            for statement in schema("sqlite"):
                tx.execute(statement)
            tx.execute(
                "INSERT INTO teams_meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    @contextlib.contextmanager
    def write(self) -> Iterator[Tx]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            tx = _SqliteTx(self._conn)
            try:
                yield tx
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        if tx.changed:
            self.wakeup.bump()
            bus = getattr(self, "_bus", None)
            if bus is not None:
                bus.publish()

    @contextlib.contextmanager
    def read(self) -> Iterator[Tx]:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield _SqliteTx(self._conn)
            finally:
                self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._bus.close()
            self._conn.close()


class _PgTx:
    for_update = " FOR UPDATE"

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.changed = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            cur = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        except psycopg.errors.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc
        if cur.rowcount and cur.rowcount > 0 and not sql.lstrip().upper().startswith("SELECT"):
            self.changed = True
        return list(cur.fetchall()) if cur.description is not None else []

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self.execute(sql, params)
        return rows[0] if rows else None


class PostgresDatabase:
    """PostgreSQL through psycopg 3, for teams spread over several hosts; LISTEN/NOTIFY carries wake-ups."""

    dialect = "postgres"

    def __init__(self, dsn: str) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise RuntimeError(
                "PostgreSQL store not available: psycopg is not installed (pip install 'aleph-teams[postgres]')"
            ) from exc
        self.dsn = dsn
        self.wakeup = Wakeup()
        self._lock = threading.RLock()
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._closed = False
        with self.write() as tx:
            # One migrator at a time across hosts: a transaction-scoped advisory lock.
            tx.execute("SELECT pg_advisory_xact_lock(7302011)")
            tx.execute("CREATE TABLE IF NOT EXISTS teams_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            found = tx.one("SELECT value FROM teams_meta WHERE key = 'schema_version'")
            if found is not None and int(found[0]) > SCHEMA_VERSION:
                raise RuntimeError(f"the database has teams schema {found[0]}, newer than this aleph-teams")
            if found is not None:  # an existing store: bring its tables up to date before adding new ones
                for statement in migrations("postgres", int(found[0])):
                    tx.execute(statement)
            for statement in schema("postgres"):
                tx.execute(statement)
            tx.execute(
                "INSERT INTO teams_meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
        self._listener = psycopg.connect(dsn, autocommit=True)
        self._listener.execute(f"LISTEN {_CHANNEL}")
        self._thread = threading.Thread(target=self._listen, name="aleph-teams-listen", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._closed:
            try:
                for _ in self._listener.notifies(timeout=0.5):
                    self.wakeup.bump()
            except Exception:
                if not self._closed:
                    log.exception("the PostgreSQL change listener stopped")
                return

    @contextlib.contextmanager
    def write(self) -> Iterator[Tx]:
        with self._lock, self._conn.transaction():
            tx = _PgTx(self._conn)
            yield tx
            if tx.changed:
                self._conn.execute(f"NOTIFY {_CHANNEL}")  # delivered to listeners at commit
        if tx.changed:
            self.wakeup.bump()

    @contextlib.contextmanager
    def read(self) -> Iterator[Tx]:
        with self._lock, self._conn.transaction():
            self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield _PgTx(self._conn)

    def close(self) -> None:
        self._closed = True
        self._thread.join(timeout=2)
        with contextlib.suppress(Exception):
            self._listener.close()
        with self._lock, contextlib.suppress(Exception):
            self._conn.close()


def open_database(url: str | None, default_path: Path) -> Database:
    """``postgresql://…`` (or a libpq ``key=value`` string) → PostgreSQL; a path or None → SQLite."""
    if url and (url.startswith(("postgres://", "postgresql://")) or "dbname=" in url or "host=" in url):
        return PostgresDatabase(url)
    if url and url.startswith("sqlite:///"):
        return SqliteDatabase(Path(url[len("sqlite:///") - 1 :]))
    return SqliteDatabase(Path(url) if url else default_path)
