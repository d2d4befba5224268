"""The ``[cluster]`` (center) and ``[cluster_node]`` (node) sections of ``aleph.toml``.

TLS is the only transport: every address must be ``tls://`` and every section that talks to the cluster
names a CA, a certificate and a key. ``tls_dir`` is the directory ``aleph cluster init`` made; the
explicit ``*_file`` keys win over it.
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ClusterConfig", "NodeConfig", "TlsFiles", "security_for"]

_HEX_KEY = re.compile(r"[0-9a-f]{64}")
_TAG = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}", re.ASCII)


def _tls_address(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.startswith("tls://"):
        raise ValueError(f"address {value!r} must start with tls:// (the cluster runs over mutual TLS only)")
    return value


def check_tags(tags: list[str]) -> list[str]:
    """Tags: at most 32, each ``[a-z0-9][a-z0-9._-]{0,31}``; duplicates dropped, order kept."""
    if len(tags) > 32:
        raise ValueError(f"at most 32 tags, got {len(tags)}")
    for tag in tags:
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise ValueError(f"tag {tag!r} must be 1-32 characters of a-z, 0-9, '.', '_' or '-'")
    return list(dict.fromkeys(tags))


class TlsFiles(BaseModel):
    """Where one party's CA, certificate and key are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ca_file: Path
    cert_file: Path
    key_file: Path

    def missing(self) -> list[str]:
        """Files that do not exist (empty when all do)."""
        return [str(p) for p in (self.ca_file, self.cert_file, self.key_file) if not p.is_file()]


def security_for(files: TlsFiles, role: Literal["client", "worker", "scheduler"]) -> Any:
    """A ``distributed.Security`` that requires TLS 1.2+ with these files for ``role``."""
    from distributed.security import Security

    kwargs = {f"tls_{role}_cert": str(files.cert_file), f"tls_{role}_key": str(files.key_file)}
    return Security(
        tls_ca_file=str(files.ca_file),
        require_encryption=True,
        tls_min_version=ssl.TLSVersion.TLSv1_2,
        **kwargs,
    )


class ClusterConfig(BaseModel):
    """``[cluster]``: how the center reaches the cluster and the limits of its calls."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["dask"] = "dask"
    """The engine; ``dask`` (distributed with mutual TLS)."""
    scheduler: str | None = None
    """The Dask scheduler, ``tls://host:port``; unset means the cluster tools answer "not configured"."""
    tls_dir: Path | None = None
    """The directory ``aleph cluster init`` made (``ca.crt``, ``center/center.crt``, ``center/center.key``)."""
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    identity: str = Field(default="cluster-center", min_length=1, max_length=128)
    """The ledger key (in this center's keystore) that signs every request; nodes pin its public key."""
    call_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """Default wall time of one remote call (a call may ask for less or more, up to ``max_timeout_seconds``)."""
    max_timeout_seconds: float = Field(default=600.0, gt=0, le=86_400)
    connect_timeout_seconds: float = Field(default=5.0, gt=0, le=120)
    max_concurrency: int = Field(default=8, ge=1, le=256)
    """How many nodes ``node_invoke_many`` talks to at once."""
    max_nodes_per_call: int = Field(default=256, ge=1, le=10_000)
    max_file_mb: int = Field(default=4096, ge=1, le=1_048_576)
    """Largest file ``node_file`` moves."""
    chunk_kib: int = Field(default=16_384, ge=64, le=65_536)
    """Transfer chunk size."""
    max_output_bytes: int = Field(default=65_536, ge=1024, le=16 * 1024 * 1024)
    """Per stream: stdout and stderr a node returns are cut to this, head and tail kept."""

    _check_scheduler = field_validator("scheduler")(_tls_address)

    def tls(self, base: Path) -> TlsFiles:
        """The center's TLS files, relative paths resolved against ``base`` (the config file's directory)."""
        d = self.tls_dir
        ca = self.ca_file or (d / "ca.crt" if d else None)
        cert = self.cert_file or (d / "center" / "center.crt" if d else None)
        key = self.key_file or (d / "center" / "center.key" if d else None)
        if ca is None or cert is None or key is None:
            raise ValueError("[cluster] needs tls_dir, or ca_file, cert_file and key_file (mutual TLS only)")
        return TlsFiles(ca_file=base / ca, cert_file=base / cert, key_file=base / key)


class NodeConfig(BaseModel):
    """``[cluster_node]``: this machine as a node (read by ``aleph cluster node``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=63)
    """The node's name: the worker's name and its certificate's CN (they must agree)."""
    scheduler: str
    """The Dask scheduler, ``tls://host:port``."""
    center_key: str
    """The center's request-signing public key, 64 hex characters (``aleph cluster init`` prints it)."""
    tls_dir: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    host: str | None = None
    """Address the worker listens on (default: the one facing the scheduler)."""
    port: int = Field(default=0, ge=0, le=65_535)
    nthreads: int = Field(default=2, ge=1, le=1024)
    tags: list[str] = Field(default_factory=list)
    """This node's own tags (the center adds its own with ``node_manage``)."""
    exec_tier: Literal["ask", "auto", "full"] = "auto"
    """The tier the center's calls run under here: ``auto`` runs what the sandbox holds back as a transaction
    (and refuses the rest: nobody on the node can approve), ``ask`` refuses every command, ``full`` runs
    whatever this node's policy and command floor allow."""
    max_file_mb: int = Field(default=4096, ge=1, le=1_048_576)
    max_concurrent_calls: int = Field(default=32, ge=1, le=4096)
    max_timeout_seconds: float = Field(default=600.0, gt=0, le=86_400)

    _check_scheduler = field_validator("scheduler")(_tls_address)

    @field_validator("center_key")
    @classmethod
    def _hex_key(cls, value: str) -> str:
        if not _HEX_KEY.fullmatch(value):
            raise ValueError("center_key must be the 64 hex characters of an Ed25519 public key")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return check_tags(value)

    def tls(self, base: Path) -> TlsFiles:
        """The node's TLS files (``tls_dir``: ``ca.crt``, ``nodes/<name>.crt``, ``nodes/<name>.key``)."""
        d = self.tls_dir
        ca = self.ca_file or (d / "ca.crt" if d else None)
        cert = self.cert_file or (d / "nodes" / f"{self.name}.crt" if d else None)
        key = self.key_file or (d / "nodes" / f"{self.name}.key" if d else None)
        if ca is None or cert is None or key is None:
            raise ValueError("[cluster_node] needs tls_dir, or ca_file, cert_file and key_file (mutual TLS only)")
        return TlsFiles(ca_file=base / ca, cert_file=base / cert, key_file=base / key)
