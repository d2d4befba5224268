"""``[interop]``: the ACP agents Aleph may start, A2A, mixture of agents and the ClawHub registry."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AcpAgentSettings", "ClawhubSettings", "InteropSettings", "MoaSettings"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AcpAgentSettings(_Strict):
    """``[interop.acp_agents.<name>]``: one external coding agent that speaks ACP on stdio."""

    command: str = Field(min_length=1)
    """The program (``gemini``, ``claude-code-acp``, a path)."""
    args: list[str] = Field(default_factory=list, max_length=64)
    env: list[str] = Field(default_factory=list, max_length=64)
    """Names of environment variables passed through (its API key, say); nothing else of Aleph's environment is."""
    isolation: Literal["bubblewrap", "none"] = "bubblewrap"
    """``bubblewrap``: the agent sees the workspace read-only, Aleph's data directory not at all, and a private
    /tmp, so its only way to change the workspace is through Aleph's fs/terminal methods (and the chokepoint).
    ``none`` runs it as a plain process, trusting it not to write behind Aleph's back."""
    network: bool = True
    """Coding agents call their model's API; false cuts the agent off the network (bubblewrap only)."""
    writable: list[str] = Field(default_factory=list, max_length=16)
    """Extra folders the agent may write (its own state, e.g. ``~/.cache/agent``); never the workspace."""
    timeout_s: int = Field(default=900, ge=10, le=7200)
    """Longest a prompt may run."""


class MoaSettings(_Strict):
    """``[interop.moa]``: mixture of agents over the models of simonw's ``llm`` registry."""

    models: list[str] = Field(default_factory=list, max_length=8)
    """Model ids asked by default (``llm models`` lists them); empty: ``moa`` needs them in its arguments."""
    aggregator: str | None = None
    """The model that writes the final answer (default: the first of ``models``)."""
    allowed: list[str] | None = None
    """If set, the only model ids ``moa`` may use."""
    max_tokens: int = Field(default=2000, ge=16, le=32_000)


class ClawhubSettings(_Strict):
    """``[interop.clawhub]``: the ClawHub skill registry."""

    registry_url: str = "https://clawhub.ai"
    max_download_bytes: int = Field(default=20 * 1024 * 1024, ge=1024, le=200 * 1024 * 1024)
    timeout_s: float = Field(default=30.0, gt=0, le=300)


class InteropSettings(_Strict):
    """``[interop]``."""

    acp_agents: dict[str, AcpAgentSettings] = Field(default_factory=dict)
    moa: MoaSettings = Field(default_factory=MoaSettings)
    clawhub: ClawhubSettings = Field(default_factory=ClawhubSettings)
