"""The ``[files]`` configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["FilesConfig"]

MiB = 1024 * 1024


class FilesConfig(BaseModel):
    """``[files]``: limits of the file tools, the web fetcher's network guard and the search backend."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_read_bytes: int = Field(default=2 * MiB, ge=1024, le=1024 * MiB)
    """Largest file ``file_read`` returns whole (and the cap on a ranged read's output)."""
    max_read_chars: int | None = Field(default=None, ge=1000, le=100_000_000)
    """Characters of content one ``file_read`` returns; a longer read stops at a line boundary with
    ``truncated`` and the ``offset`` to continue from. Default: ``[tools] max_output_chars`` less 1,000,
    so a read is never replaced by the chokepoint with a preview of a spilled file."""
    max_write_bytes: int = Field(default=16 * MiB, ge=1024, le=1024 * MiB)
    """Largest content ``file_write``, ``file_edit`` and ``apply_patch`` write to one file."""
    max_search_results: int = Field(default=200, ge=1, le=10_000)
    """Upper bound on ``file_ops`` search and list results."""
    web_max_bytes: int = Field(default=5 * MiB, ge=1024, le=256 * MiB)
    """``web_fetch`` stops reading a body at this many bytes (the result says it was truncated)."""
    web_timeout_seconds: float = Field(default=30.0, gt=0, le=300)
    """Wall-clock limit of one ``web_fetch`` call, redirects included."""
    web_max_redirects: int = Field(default=5, ge=0, le=20)
    """Redirect hops ``web_fetch`` follows, each one re-checked against the network guard."""
    allow_private_networks: bool = False
    """Let ``web_fetch`` reach private, loopback, link-local and other non-public addresses."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names (or IP literals) ``web_fetch`` may reach even when they resolve to a non-public address."""
    searxng_url: str | None = None
    """Base URL of a SearXNG instance (``http://localhost:8888``) used by ``search``; operator-trusted."""
    search_provider: str | None = None
    """Name of the preferred search backend (``searxng`` or one a plugin registers); default: the first."""
    search_timeout_seconds: float = Field(default=15.0, gt=0, le=120)
    """Per-backend time limit of one ``search`` call."""
    user_agent: str = "aleph-files/0.1 (+https://github.com/aleph)"
    """User-Agent sent by ``web_fetch`` and the SearXNG backend."""

    @field_validator("allowed_hosts")
    @classmethod
    def _lower(cls, hosts: list[str]) -> list[str]:
        return [h.strip().lower().strip("[]") for h in hosts if h.strip()]
