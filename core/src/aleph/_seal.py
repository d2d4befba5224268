"""Seals on state files that decide what runs: a file edited by anything but Aleph is not believed.

Trust records, standing approvals and approved skill digests are files a human's decision produced.
A process that can write them (a plugin, a script with the user's rights) must not be able to turn
"pending" into "trusted" or add a grant. So Aleph seals each such state with HMAC-SHA256 under a
secret kept in the keystore directory (``<ledger dir>/keys``, mode 0700, the secret 0600), beside the
ledger's signing keys and out of reach of the sandboxed tools, and keeps the seal of the latest state
there as well (its *witness*): an edited, replaced, rolled-back or deleted state file no longer matches
and is treated as untrusted by whoever reads it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from aleph._atomic import write_atomic

__all__ = ["StateSeal"]

_SECRET = "state-seal.secret"
_WITNESSES = "seals"


class StateSeal:
    """HMAC seals for one kind of state (``purpose``), under the secret of a keystore directory.

    :param key_dir: the keystore directory (``<ledger dir>/keys``); the secret is created there on first use.
    :param purpose: what is sealed (``plugin-trust``, ``approval-grants``, ``hub-skills``); seals made for
        one purpose never verify for another.
    """

    def __init__(self, key_dir: Path, purpose: str) -> None:
        if not purpose or not purpose.replace("-", "").isalnum():
            raise ValueError(f"a seal purpose is letters, digits and '-', got {purpose!r}")
        self.key_dir = Path(key_dir)
        self.purpose = purpose
        self._key: bytes | None = None

    def _secret(self) -> bytes:
        path = self.key_dir / _SECRET
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            self.key_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:  # O_EXCL: two processes creating it at once agree on the one that landed first
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                raw = path.read_bytes()
            else:
                raw = secrets.token_bytes(32)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(raw)
                    fh.flush()
                    os.fsync(fh.fileno())
        if len(raw) != 32:
            raise OSError(f"the seal secret {path} is damaged ({len(raw)} bytes, not 32)")
        return raw

    def _purpose_key(self) -> bytes:
        if self._key is None:
            self._key = hmac.new(self._secret(), b"aleph-state-seal-v1\0" + self.purpose.encode(), "sha256").digest()
        return self._key

    def sign(self, data: bytes) -> str:
        """The seal of ``data``: ``hmac-sha256:<hex>``."""
        return "hmac-sha256:" + hmac.new(self._purpose_key(), data, hashlib.sha256).hexdigest()

    def verify(self, data: bytes, seal: str | None) -> bool:
        """Whether ``seal`` is this purpose's seal of ``data`` (constant-time)."""
        return isinstance(seal, str) and hmac.compare_digest(self.sign(data), seal)

    # -- the witness: the seal of the latest state, kept beside the secret ------------------------

    def _witness_path(self, name: str) -> Path:
        stem = hashlib.sha256(name.encode()).hexdigest()[:24]
        return self.key_dir / _WITNESSES / f"{self.purpose}-{stem}.seal"

    def witness(self, name: str) -> str | None:
        """The seal recorded for the latest state of ``name`` (a state file's path), or None if never sealed."""
        try:
            return self._witness_path(name).read_text(encoding="ascii").strip() or None
        except FileNotFoundError:
            return None

    def record(self, name: str, data: bytes) -> str:
        """Seal ``data`` as the latest state of ``name`` and return the seal."""
        seal = self.sign(data)
        path = self._witness_path(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, seal)
        return seal

    def matches(self, name: str, data: bytes | None) -> bool | None:
        """Whether ``data`` (None: the file is missing) is the latest state of ``name`` Aleph sealed.

        None when ``name`` was never sealed (state written before seals existed).
        """
        recorded = self.witness(name)
        if recorded is None:
            return None
        return data is not None and self.verify(data, recorded)
