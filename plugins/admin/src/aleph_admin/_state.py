"""What every admin tool shares: the plugin context, the store, the vault and the managed file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

import aleph
from aleph_admin._managed import ManagedFile
from aleph_admin._store import AdminStore
from aleph_admin._vault import Vault

__all__ = ["AGENT_NAME", "AdminState", "ModelsConfig", "caller", "missing_agent"]

AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")


class ModelsConfig(BaseModel):
    """``[models]``: the models a host offers when simonw's ``llm`` is not installed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    available: list[str] = Field(default_factory=list)
    """Model ids the host can use."""
    default: str | None = None
    """The model a session uses until ``select_model`` picks another."""


@dataclass
class AdminState:
    """Built at registration; the runtime parts are reached at call time through ``context``."""

    context: aleph.PluginContext
    store: AdminStore
    vault: Vault
    models: ModelsConfig
    started: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def managed(self) -> ManagedFile:
        """The managed configuration file of the configuration in force."""
        return ManagedFile(self.context.current_config().managed_file)

    def keystore(self) -> aleph.Keystore:
        """The ledger's keystore (a keystore of its own under the data directory when the ledger is off)."""
        ledger = self.context.ledger
        if ledger is not None:
            return ledger.keystore
        return aleph.Keystore(self.context.data_dir / "admin" / "keys")

    def key_dir(self) -> Path:
        """Where the vault key lives: beside the signing keys."""
        return self.keystore().directory


def caller(tool: str) -> aleph.Principal:
    """The principal of the running call (tools run only inside the chokepoint)."""
    principal = aleph.current_principal()
    if principal is None:
        raise aleph.ExecutionFailed(tool, "no principal is bound: call this tool through a tool service")
    return principal


def missing_agent(tool: str, name: str) -> aleph.ExecutionFailed:
    """One answer for an agent that does not exist and one that is not the caller's."""
    return aleph.ExecutionFailed(tool, f"no agent {name!r} of yours: agent_list shows the agents you created")
