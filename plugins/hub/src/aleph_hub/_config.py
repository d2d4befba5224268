"""The ``[hub]`` configuration section."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HubConfig"]

MiB = 1024 * 1024


class HubConfig(BaseModel):
    """``[hub]``: where plugins come from and go, limits of downloads and skill archives, skill folders."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    index_url: str = "https://pypi.org/simple/"
    """The package index (PEP 503/691 simple API) the catalog is built from and installs resolve against."""
    install_target: Literal["folder", "environment"] = "folder"
    """Where ``hub_install_run`` installs: a plugin folder (``plugin_folder``, default
    ``<data_dir>/plugins/site``; removable, leaves the Python environment alone) or the runtime's own
    environment."""
    plugin_folder: str | None = None
    """The plugin folder for ``install_target = "folder"``; it must be one the loader searches
    (``<data_dir>/plugins/site`` or one of ``[plugins] paths``)."""
    catalog_prefixes: list[str] = Field(default_factory=lambda: ["aleph-"])
    """Project-name prefixes ``hub_catalog_sync`` inspects (an Aleph plugin is any distribution with an
    ``aleph`` entry point; a prefix keeps a sync of a large index bounded)."""
    max_projects: int = Field(default=200, ge=1, le=5_000)
    """Most projects one catalog sync inspects."""
    max_wheel_bytes: int = Field(default=50 * MiB, ge=1024, le=1024 * MiB)
    """Largest wheel the catalog sync downloads to read its metadata and entry points."""
    timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """Wall-clock limit of one index request."""
    pip_timeout_seconds: float = Field(default=600.0, gt=0, le=3600)
    """Wall-clock limit of one pip run (resolve or install)."""
    user_skills_dirs: list[str] = Field(default_factory=lambda: ["~/.aleph/skills", "~/.claude/skills"])
    """User skill folders, searched after the project's; the first is where ``skill_install`` puts
    ``scope = "user"`` skills and ``skill_manage`` creates new ones."""
    skills_dirs: list[str] = Field(default_factory=list)
    """More skill folders, searched between the project's and the user's."""
    max_skill_bytes: int = Field(default=50 * MiB, ge=1024, le=1024 * MiB)
    """Largest total size of one skill archive or folder ``skill_install`` accepts."""
    max_skill_files: int = Field(default=1000, ge=1, le=100_000)
    """Most files one skill may contain."""

    @field_validator("index_url")
    @classmethod
    def _index(cls, value: str) -> str:
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError("index_url must be https (plain http only for a loopback index)")
        return value if value.endswith("/") else value + "/"
