"""The ``[exec]`` configuration section."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aleph_exec._netconfig import NetworkConfig

__all__ = ["ExecConfig"]

KiB = 1024
MiB = 1024 * KiB
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CHECK_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class ExecConfig(BaseModel):
    """``[exec]``: how commands are isolated and bounded."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    isolation: Literal["auto", "bwrap", "none"] = "auto"
    """``auto``: bubblewrap when it works here, else plain process isolation; ``bwrap``: require it; ``none``."""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    """Network inside the bubblewrap sandbox: ``proxied`` (own empty network namespace; allowed hosts through
    Aleph's egress proxy), ``none`` or ``host``; ``network = "none"`` or an ``[exec.network]`` table
    (see :mod:`aleph_exec._netconfig`). Without bubblewrap the network cannot be taken away and results
    say ``network: host``."""
    cgroup: Literal["auto", "off"] = "auto"
    """Put each run in its own pids cgroup when one is writable (process cap and exact kill)."""
    env_allow: list[str] = Field(default_factory=list)
    """Extra environment variable names passed through from the host (everything else is dropped)."""
    default_timeout_seconds: float = Field(default=120.0, gt=0, le=170)
    """Wall-time limit when a call does not give one."""
    max_output_bytes: int = Field(default=256 * KiB, ge=1 * KiB, le=64 * MiB)
    """Per stream, what a result keeps: the head and the tail, with a truncation marker between."""
    output_kill_bytes: int = Field(default=64 * MiB, ge=64 * KiB, le=4096 * MiB)
    """A run that prints more than this in total is killed (an endless ``yes``)."""
    memory_mb: int = Field(default=4096, ge=64, le=1024 * 1024)
    """RLIMIT_AS (address space) of every process, in MiB."""
    max_processes: int = Field(default=256, ge=8, le=100_000)
    """Processes a run may have at once: pids.max of its cgroup (one more under bubblewrap, where the
    zygote that started the run stays in it) and RLIMIT_NPROC for non-root users."""
    max_file_mb: int = Field(default=1024, ge=1, le=1024 * 1024)
    """RLIMIT_FSIZE: the largest file a process may write, in MiB."""
    max_open_files: int = Field(default=1024, ge=64, le=65_536)
    """RLIMIT_NOFILE."""
    extra_ro_paths: list[str] = Field(default_factory=list)
    """Host directories made visible read-only inside bubblewrap (the system dirs and Python are by default)."""
    checks: dict[str, str] = Field(default_factory=dict)
    """``code_check`` checks beyond ruff and pytest: name → shell command run in the workspace."""
    default_checks: list[str] = Field(default_factory=lambda: ["ruff", "pytest"])
    """Checks ``code_check`` runs when a call names none."""
    check_timeout_seconds: float = Field(default=160.0, gt=0, le=170)
    """Wall-time limit of one check."""

    # -- transactions (docs/exec.md, "Transactions") --
    transactions: bool = True
    """Run ``bash``, ``code_exec`` and ``code_check`` on a copy-on-write view of the workspace and judge
    the changeset before anything lands (when the sandbox can; else calls are judged before they run)."""
    protected_paths: list[str] = Field(default_factory=list, max_length=256)
    """Globs relative to the workspace (``*`` in one component, ``**`` across) a changeset may not touch,
    besides Aleph's config and data, ``.git/config`` and ``.git/hooks``."""
    commit_ask_files: int = Field(default=50, ge=0, le=10_000_000)
    """More deletions and overwrites than this in one call: a human is asked (unattended: refused)."""
    commit_ask_fraction: float = Field(default=0.25, gt=0, le=1)
    """Or more than this fraction of the workspace's files (when it has ``commit_ask_min_files``)."""
    commit_ask_min_files: int = Field(default=8, ge=1, le=10_000_000)
    """The fraction rule applies from this many workspace files on."""
    commit_ask_window_minutes: int = Field(default=60, ge=1, le=7 * 24 * 60)
    """The thresholds also apply to running totals: a session's deletions and overwrites since a person
    last approved, and an agent's (across its sessions) within this many minutes."""
    max_changeset_files: int = Field(default=100_000, ge=1, le=10_000_000)
    """A changeset with more entries is refused (the work of judging it is bounded)."""
    max_changeset_mb: int = Field(default=4096, ge=1, le=1024 * 1024)
    """A changeset with more content to hash is refused."""
    undo_max_calls: int = Field(default=50, ge=0, le=100_000)
    """Committed calls whose overwritten and deleted files are kept for ``aleph undo`` (oldest dropped)."""
    undo_max_mb: int = Field(default=1024, ge=0, le=1024 * 1024)
    """Bytes kept for undo across those calls, in MiB (oldest dropped)."""
    result_paths: int = Field(default=20, ge=0, le=1000)
    """Changed paths a result lists (the counts are always complete)."""

    # -- the unprivileged sandbox (isolation, overlays) --
    sandbox_host_uid: int = Field(default=65534, ge=1, le=2**31 - 2)
    """When Aleph runs as root: the unprivileged host uid (and gid) the sandbox's user is mapped to. Never 0."""

    @field_validator("env_allow")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return names

    @field_validator("protected_paths")
    @classmethod
    def _protected(cls, globs: list[str]) -> list[str]:
        for glob in globs:
            parts = glob.split("/")
            if not glob or glob.startswith("/") or ".." in parts or "\0" in glob:
                raise ValueError(f"protected path {glob!r}: use a glob relative to the workspace, without '..'")
        return globs

    @field_validator("checks")
    @classmethod
    def _check_names(cls, checks: dict[str, str]) -> dict[str, str]:
        for name, command in checks.items():
            if not _CHECK_NAME.fullmatch(name):
                raise ValueError(f"check name {name!r}: use lowercase letters, digits, '_' or '-'")
            if not command.strip():
                raise ValueError(f"check {name!r}: the command is empty")
        return checks
