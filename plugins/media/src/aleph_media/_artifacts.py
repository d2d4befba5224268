"""The artifact store: immutable, content-addressed files owned by the principal that published them.

Layout under the data directory: ``media/artifacts.sqlite3`` (one row per owner and content) and
``media/blobs/sha256/<aa>/<hex>`` (the bytes, read-only, stored once however many owners publish
them). Every read of a row goes through :meth:`ArtifactStore._rows`, which always filters by owner:
a foreign artifact answers exactly like a missing one. Blob creation and removal happen inside the
same ``BEGIN IMMEDIATE`` transaction as the row change, so concurrent processes never drop a blob a
row still names.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aleph_media._base import MediaError

__all__ = ["Artifact", "ArtifactStore", "blob_path", "check_id"]

SCHEMA_VERSION = 1
_HEX = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20
_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    owner TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    session TEXT NOT NULL,
    source_path TEXT NOT NULL,
    published_at REAL NOT NULL,
    PRIMARY KEY (owner, sha256)
);
CREATE INDEX IF NOT EXISTS artifacts_session ON artifacts (owner, session, published_at);
CREATE INDEX IF NOT EXISTS artifacts_sha ON artifacts (sha256);
"""


@dataclass(frozen=True, slots=True)
class Artifact:
    """One published artifact as its owner sees it."""

    sha256: str
    name: str
    media_type: str
    size: int
    owner: str
    session: str
    source_path: str
    published_at: float

    @property
    def uri(self) -> str:
        """The artifact's address: ``aleph-artifact://sha256/<hex>``."""
        return f"aleph-artifact://sha256/{self.sha256}"

    def to_json(self) -> dict[str, Any]:
        """The form the tools return."""
        return {
            "id": self.sha256,
            "uri": self.uri,
            "name": self.name,
            "media_type": self.media_type,
            "size": self.size,
            "published_by": self.owner,
            "session": self.session,
            "source_path": self.source_path,
            "published_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.published_at)),
        }


def check_id(value: str) -> str:
    """A lower-case sha256 hex digest (``sha256:`` prefix and URI form accepted), or ValueError."""
    text = value.strip().lower()
    for prefix in ("aleph-artifact://sha256/", "sha256:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if not _HEX.match(text):
        raise ValueError(f"{value[:80]!r} is not an artifact id (64 hexadecimal digits of its sha256)")
    return text


def blob_path(root: Path, sha256: str) -> Path:
    """Where the bytes with this digest live under the family's folder ``root``."""
    return root / "blobs" / "sha256" / sha256[:2] / sha256


class ArtifactStore:
    """Content-addressed artifacts under ``root`` (the family's folder in the data directory)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blobs = root / "blobs" / "sha256"
        self.blobs.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(root / "artifacts.sqlite3", isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"{root / 'artifacts.sqlite3'} has schema {version}, newer than this aleph-media knows")
        if version < SCHEMA_VERSION:
            self._db.executescript(_SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};")

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- the one owner filter --------------------------------------------------------------------

    def _rows(self, owner: str, where: str = "", params: tuple[Any, ...] = (), tail: str = "") -> list[Artifact]:
        """Rows of ``owner`` only: every read of the table goes through here."""
        sql = (
            "SELECT sha256, name, media_type, size, owner, session, source_path, published_at "
            f"FROM artifacts WHERE owner = ? {('AND ' + where) if where else ''} {tail}"
        )
        with self._lock:
            rows = self._db.execute(sql, (owner, *params)).fetchall()
        return [Artifact(*row) for row in rows]

    def get(self, owner: str, sha256: str) -> Artifact | None:
        """``owner``'s artifact with this digest, or None (also when another principal owns it)."""
        found = self._rows(owner, "sha256 = ?", (sha256,))
        return found[0] if found else None

    def list(self, owner: str, session: str | None, limit: int) -> list[Artifact]:
        """``owner``'s artifacts, newest first; only those of ``session`` unless it is None."""
        if session is None:
            return self._rows(owner, tail="ORDER BY published_at DESC LIMIT ?", params=(limit,))
        return self._rows(owner, "session = ?", (session, limit), "ORDER BY published_at DESC LIMIT ?")

    def blob_path(self, owner: str, sha256: str) -> Path | None:
        """Where ``owner``'s artifact's bytes are, or None when ``owner`` has no such artifact."""
        return self._blob(sha256) if self.get(owner, sha256) is not None else None

    def _blob(self, sha256: str) -> Path:
        return blob_path(self.root, sha256)

    # -- publish / unpublish ---------------------------------------------------------------------

    def _stage(self, fd: int, max_bytes: int) -> tuple[Path, str, int]:
        """Copy the open file into a private temporary file while hashing it (bounded by ``max_bytes``)."""
        tmp = self.blobs / f".incoming-{secrets.token_hex(8)}"
        digest = hashlib.sha256()
        size = 0
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            offset = 0
            while True:
                chunk = os.pread(fd, _CHUNK, offset)
                if not chunk:
                    break
                offset += len(chunk)
                size += len(chunk)
                if size > max_bytes:
                    raise MediaError(
                        f"the file is larger than the {max_bytes:,}-byte limit ([media] max_artifact_bytes)"
                    )
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fsync(out)
        except BaseException:
            os.close(out)
            tmp.unlink(missing_ok=True)
            raise
        os.close(out)
        return tmp, digest.hexdigest(), size

    def publish(
        self, owner: str, session: str, fd: int, *, name: str, media_type: str, source_path: str, max_bytes: int
    ) -> tuple[Artifact, bool]:
        """Publish the open file's bytes for ``owner``; ``(artifact, created)``.

        Publishing bytes the owner already published returns the existing artifact unchanged
        (``created`` False): an artifact never changes once published.
        """
        tmp, sha256, size = self._stage(fd, max_bytes)
        try:
            with self._write() as db:
                blob = self._blob(sha256)
                if not blob.exists():
                    blob.parent.mkdir(exist_ok=True, mode=0o700)
                    os.chmod(tmp, 0o444)
                    os.replace(tmp, blob)
                row = (owner, sha256, name, media_type, size, session, source_path, time.time())
                created = db.execute("INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row).rowcount
        finally:
            tmp.unlink(missing_ok=True)
        found = self.get(owner, sha256)
        if found is None:  # pragma: no cover - the row was written above in this process
            raise MediaError("the artifact vanished right after it was published")
        return found, bool(created)

    def unpublish(self, owner: str, sha256: str) -> Artifact | None:
        """Remove ``owner``'s artifact (its bytes go when no other owner holds them); None when absent."""
        found = self.get(owner, sha256)
        if found is None:
            return None
        with self._write() as db:
            gone = db.execute("DELETE FROM artifacts WHERE owner = ? AND sha256 = ?", (owner, sha256)).rowcount
            if gone and not db.execute("SELECT 1 FROM artifacts WHERE sha256 = ? LIMIT 1", (sha256,)).fetchone():
                self._blob(sha256).unlink(missing_ok=True)
        return found if gone else None
