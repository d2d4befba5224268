"""The ``[ledger]`` section of the configuration (see :mod:`aleph._config` and :mod:`aleph._ledger`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LedgerConfig"]


class LedgerConfig(BaseModel):
    """``[ledger]``: the signed audit ledger."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)  # as every section of _config

    enabled: bool = True
    """Record refusals, approvals and mutating calls."""
    directory: str | None = None
    """Where chains and keys live; default ``<data_dir>/ledger``."""
    checkpoint_every: int = Field(default=1000, ge=1, le=1_000_000)
    """Seal (sign a checkpoint of the chain's head) at least every N rows; more often when calls are few."""
    sync: Literal["write", "fsync"] = "write"
    """When a mutating call is answered: once its row is written (``write``: survives the process being
    killed, ``kill -9`` included) or once it is fsync'd (``fsync``: survives a power cut too, at the cost
    of a disk flush per call or group of concurrent calls)."""
    on_failure: Literal["refuse", "continue"] = "refuse"
    """While the ledger cannot record (disk full, permissions): ``refuse`` mutating calls or ``continue`` unrecorded."""
