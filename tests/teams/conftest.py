"""Fixtures for the teams family: a private PostgreSQL server, and stores on both backends.

The PostgreSQL server is Debian's (``scripts/setup-system`` installs ``postgresql``), started once per
test session by initdb into a fresh directory, listening only on a Unix socket there, and run as the
``postgres`` system user when the tests run as root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aleph_teams._store import TeamStore, open_store


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail(
            "PostgreSQL is not installed: the store tests need Debian's postgresql package "
            "(scripts/setup-system installs it)"
        )
    return Path(found[-1]).parent


class PgServer:
    """A throwaway PostgreSQL cluster on a Unix socket."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="aleph-teams-pg-"))
        self.data = self.root / "data"
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root, but there is no 'postgres' user to run PostgreSQL as")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        self._log = open(self.root / "server.log", "wb")
        self.proc = subprocess.Popen(
            self._as_user(
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-k",
                str(self.root),
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ),
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        self._counter = itertools.count()
        deadline = time.monotonic() + 30
        while not (self.root / ".s.PGSQL.5432").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.root / "server.log").read_text(errors="replace")
                pytest.fail(f"PostgreSQL did not start:\n{log[-2000:]}")
            time.sleep(0.05)
        self._wait_ready()

    def _as_user(self, *argv: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if os.geteuid() == 0 else list(argv)

    def _run(self, *argv: str) -> None:
        subprocess.run(self._as_user(*argv), check=True, capture_output=True)

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.dsn("postgres"), autocommit=True).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def dsn(self, dbname: str) -> str:
        """A libpq connection string for ``dbname`` on this server."""
        return f"host={self.root} port=5432 user=postgres dbname={dbname}"

    def new_database(self) -> str:
        """A fresh, empty database; its DSN."""
        import psycopg

        name = f"teams_{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the server and remove its files."""
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store location on each backend: a SQLite path, or a PostgreSQL DSN."""
    if request.param == "sqlite":
        return str(tmp_path / "store" / "teams.db")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.new_database()


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Iterator[TeamStore]:
    """A :class:`TeamStore` on each backend."""
    opened = open_store(store_url, tmp_path)
    try:
        yield opened
    finally:
        with contextlib.suppress(Exception):
            opened.close()
