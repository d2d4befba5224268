"""Trust records for installed plugins: what a human approved each distribution to add.

Installing a plugin is a permission change: its tools, hooks and facts become part of what an agent
may do. A tool that installs plugins (the hub) records the new distribution here as ``pending``
together with what it adds, asks a human, and marks it ``trusted`` once approved. The plugin loader
consults this file before importing an entry point:

- a ``pending`` distribution is held back: it is not imported, so none of its tools or hooks exist;
- a ``trusted`` distribution at another version is held back until approved again;
- a ``trusted`` distribution whose tools or hooks no longer match the approved digest (its files
  were edited, a dependency changed what it registers) has its tools withdrawn and is held back,
  as a changed MCP tool definition is re-gated;
- a distribution with no record loads as it always has, unless ``[plugins] require_trust = true``.

The file is ``<data_dir>/plugins/trust.json``, written atomically with mode 0600 and sealed
(:class:`aleph.StateSeal`, a secret in the keystore directory): a file another process edited, replaced,
rolled back or deleted no longer matches its seal, and then every distribution is held back and every
record counts as pending until a human approves again (``aleph plugins trust``). A file written before
seals existed is read with every record pending.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from aleph._atomic import write_atomic
from aleph._seal import StateSeal

if TYPE_CHECKING:
    from aleph._contract._registry import RegisteredTool

__all__ = ["HeldPlugin", "PluginTrust", "TrustRecord", "adds_digest", "canonical_distribution", "plugin_adds"]

log = logging.getLogger("aleph.plugins")

TrustStatus = Literal["pending", "trusted"]

_CANON = re.compile(r"[-_.]+")


def canonical_distribution(name: str) -> str:
    """A distribution name normalised as PEP 503 does (``Aleph_Foo.bar`` → ``aleph-foo-bar``)."""
    return _CANON.sub("-", name).lower()


def plugin_adds(
    distribution: str,
    version: str | None,
    entry_points: Iterable[str],
    tools: Iterable[RegisteredTool],
    hooks: Iterable[str],
) -> dict[str, Any]:
    """What a plugin adds, in the form a human approves and :func:`adds_digest` hashes.

    Tools carry their full definition (name, description, input schema) and facts; hooks are the
    hook names the plugin implements (``aleph_tool_policy``, ``aleph_approval_requester``, ...).
    """
    listed = []
    for entry in sorted(tools, key=lambda e: e.name):
        definition = entry.tool.definition()
        listed.append(
            {
                "name": entry.name,
                "description": definition.description,
                "input_schema": definition.input_schema,
                "facts": entry.facts.to_json(),
            }
        )
    return {
        "distribution": canonical_distribution(distribution),
        "version": version,
        "entry_points": sorted(entry_points),
        "tools": listed,
        "hooks": sorted(set(hooks)),
    }


def adds_digest(adds: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of :func:`plugin_adds`' result: what an approval binds to."""
    text = json.dumps(adds, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class TrustRecord:
    """One distribution's record: its status, the version and digest approved, and what it adds."""

    distribution: str
    version: str | None
    status: TrustStatus
    digest: str
    adds: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    """Who recorded it (``hub``, ``cli``)."""
    updated: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The JSON form stored in ``trust.json`` and shown by ``aleph plugins --json``."""
        return {
            "version": self.version,
            "status": self.status,
            "digest": self.digest,
            "adds": self.adds,
            "source": self.source,
            "updated": self.updated,
        }


@dataclass(frozen=True, slots=True)
class HeldPlugin:
    """An installed plugin the loader held back, and why."""

    name: str
    distribution: str | None
    version: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph plugins --json``."""
        return {"name": self.name, "distribution": self.distribution, "version": self.version, "reason": self.reason}


class PluginTrust:
    """``<data_dir>/plugins/trust.json``: one :class:`TrustRecord` per distribution, thread-safe."""

    def __init__(self, path: Path, seal: StateSeal | None = None) -> None:
        self.path = path
        self.seal = seal if seal is not None else StateSeal(path.parent.parent / "ledger" / "keys", "plugin-trust")
        """What seals the file: by default the keystore of the default ledger directory beside ``plugins/``."""
        self._lock = threading.Lock()
        self._records: dict[str, TrustRecord] | None = None
        self.broken: str | None = None
        """Why the file could not be read; while set, every distribution is held back and writes fail."""
        self.tampered: str | None = None
        """Why the file is not what Aleph last wrote; while set, every distribution is held back. A
        human's approval (a write) seals the file afresh."""

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def _load(self) -> dict[str, TrustRecord]:
        if self._records is not None:
            return self._records
        records: dict[str, TrustRecord] = {}
        try:
            data = self._read()
            sealed = self.seal.matches(str(self.path), data)
            if sealed is False:
                self.tampered = (
                    f"the plugin trust file {self.path} was changed outside Aleph (it no longer matches its seal);"
                    " every plugin is held back until a human approves it again with `aleph plugins trust`"
                )
                log.warning("%s", self.tampered)
            if data is None:
                raise FileNotFoundError(self.path)
            raw = json.loads(data.decode("utf-8"))
            dists = raw.get("distributions", {}) if isinstance(raw, dict) else {}
            for name, item in dists.items():
                if not isinstance(item, dict) or item.get("status") not in ("pending", "trusted"):
                    continue
                adds = item.get("adds")
                records[str(name)] = TrustRecord(
                    str(name),
                    item.get("version"),
                    # Only a sealed file vouches for a human's "trusted".
                    item["status"] if sealed else "pending",
                    str(item.get("digest", "")),
                    adds if isinstance(adds, dict) else {},
                    str(item.get("source", "")),
                    float(item.get("updated", 0.0)),
                )
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError) as exc:
            # An unreadable record must not turn into "no records": every held plugin would load.
            # Fail closed until a person repairs or removes the file.
            self.broken = f"the plugin trust file {self.path} is unreadable ({exc}); repair or remove it"
            log.warning("%s", self.broken)
        self._records = records
        return records

    def get(self, distribution: str) -> TrustRecord | None:
        """The record of ``distribution`` (any spelling), or None."""
        with self._lock:
            return self._load().get(canonical_distribution(distribution))

    def records(self) -> list[TrustRecord]:
        """Every record, by distribution name."""
        with self._lock:
            return [self._load()[k] for k in sorted(self._load())]

    def hold(self, adds: Mapping[str, Any], *, source: str) -> TrustRecord:
        """Record the distribution ``adds`` describes as ``pending`` (held back until approved)."""
        return self._put(adds, "pending", source)

    def trust(self, adds: Mapping[str, Any], *, source: str) -> TrustRecord:
        """Record the distribution ``adds`` describes as ``trusted``: a human approved exactly this."""
        return self._put(adds, "trusted", source)

    def remove(self, distribution: str) -> bool:
        """Forget ``distribution``'s record (after it was uninstalled); True if there was one."""
        with self._lock:
            records = self._load()
            if self.broken is not None:
                raise OSError(self.broken)
            if records.pop(canonical_distribution(distribution), None) is None:
                return False
            self._save(records)
            return True

    def hold_reason(self, distribution: str | None, version: str | None, *, require_trust: bool) -> str | None:
        """Why the loader must not import ``distribution`` at ``version`` now, or None to load it."""
        with self._lock:
            self._load()
        if self.broken is not None:
            return self.broken
        if self.tampered is not None:
            return self.tampered
        if distribution is None:
            return "it has no distribution metadata, and [plugins] require_trust is on" if require_trust else None
        record = self.get(distribution)
        if record is None:
            if require_trust:
                return "no human has approved it ([plugins] require_trust is on); approve it with `aleph plugins trust`"
            return None
        if record.status == "pending":
            return "it was installed and awaits a human's approval of what it adds"
        if record.version != version:
            return f"version {version} is installed but {record.version} was approved; approve the new version first"
        return None

    def _put(self, adds: Mapping[str, Any], status: TrustStatus, source: str) -> TrustRecord:
        dist = canonical_distribution(str(adds.get("distribution", "")))
        if not dist:
            raise ValueError("a trust record needs the distribution's name")
        record = TrustRecord(dist, adds.get("version"), status, adds_digest(adds), dict(adds), source, time.time())
        with self._lock:
            records = self._load()
            if self.broken is not None:
                raise OSError(self.broken)
            records[dist] = record
            self._save(records)
        return record

    def _save(self, records: dict[str, TrustRecord]) -> None:
        data = json.dumps(
            {"version": 1, "distributions": {k: v.to_json() for k, v in sorted(records.items())}},
            indent=2,
            sort_keys=True,
        ).encode("utf-8")
        with self._file_lock():  # the file and its seal change together, one process at a time
            write_atomic(self.path, data)
            self.seal.record(str(self.path), data)
        self.tampered = None

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
