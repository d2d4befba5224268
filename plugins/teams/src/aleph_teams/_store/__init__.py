"""The durable store: SQLite (WAL) in the data directory by default, PostgreSQL for teams over several hosts."""

from __future__ import annotations

from pathlib import Path

from aleph_teams._store._common import SETTABLE, TERMINAL, StoreError
from aleph_teams._store._db import Database, PostgresDatabase, SqliteDatabase, open_database
from aleph_teams._store._teams import TeamStore

__all__ = [
    "SETTABLE",
    "TERMINAL",
    "Database",
    "PostgresDatabase",
    "SqliteDatabase",
    "StoreError",
    "TeamStore",
    "open_store",
]


def open_store(url: str | None, data_dir: Path) -> TeamStore:
    """The store at ``url`` (``postgresql://…``, a SQLite path) or ``<data_dir>/teams/teams.db``."""
    return TeamStore(open_database(url, data_dir / "teams" / "teams.db"))
