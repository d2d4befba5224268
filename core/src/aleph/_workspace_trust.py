"""Workspaces whose own ``aleph.toml`` the operator trusts, bound to the file's path and its exact bytes.

``aleph config trust [PATH]`` records the file's resolved path and SHA-256 in the operator's data
directory (``<data_dir>/workspaces/trust.json``, sealed with the keystore secret like every state that
decides what runs). A trusted file is read as the operator's own configuration; a file whose bytes
changed since, or one nobody trusted, may only tighten (see :mod:`aleph._config_tighten`).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from aleph._atomic import write_atomic
from aleph._seal import StateSeal

__all__ = ["WorkspaceTrust", "file_digest"]

_MAX_RECORDS = 10_000


def file_digest(data: bytes) -> str:
    """``sha256:<hex>`` of a configuration file's bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class WorkspaceTrust:
    """The trusted workspace configuration files of one operator.

    :param path: the sealed record file (``<data_dir>/workspaces/trust.json``).
    :param seal: the keystore seal (``workspace-trust`` purpose).
    """

    def __init__(self, path: Path, seal: StateSeal) -> None:
        self.path = path
        self.seal = seal

    @classmethod
    def at(cls, data_dir: Path, key_dir: Path) -> WorkspaceTrust:
        """The operator's record in ``data_dir``, sealed under the keystore ``key_dir``."""
        return cls(data_dir / "workspaces" / "trust.json", StateSeal(key_dir, "workspace-trust"))

    def _records(self) -> dict[str, dict[str, object]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        if not self.seal.matches(str(self.path), data):
            return {}  # edited outside Aleph (or never sealed): trusts nothing
        try:
            records = json.loads(data).get("files", {})
        except (ValueError, AttributeError):
            return {}
        return records if isinstance(records, dict) else {}

    def trusted(self, file: Path, data: bytes) -> bool:
        """Whether the operator trusted ``file`` with exactly these bytes."""
        record = self._records().get(str(file.resolve()))
        return isinstance(record, dict) and record.get("digest") == file_digest(data)

    def trust(self, file: Path) -> str:
        """Trust ``file`` as it is now; returns its digest."""
        data = file.read_bytes()
        records = self._records()
        records[str(file.resolve())] = {"digest": file_digest(data), "at": time.time()}
        if len(records) > _MAX_RECORDS:
            raise ValueError(f"more than {_MAX_RECORDS} trusted workspaces; revoke some first")
        self._save(records)
        return file_digest(data)

    def revoke(self, file: Path) -> bool:
        """Stop trusting ``file``; True when it was trusted."""
        records = self._records()
        if records.pop(str(file.resolve()), None) is None:
            return False
        self._save(records)
        return True

    def _save(self, records: dict[str, dict[str, object]]) -> None:
        data = json.dumps({"version": 1, "files": records}, indent=1, sort_keys=True).encode("utf-8")
        write_atomic(self.path, data)
        self.seal.record(str(self.path), data)
