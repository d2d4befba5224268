"""The ``[browser]`` configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aleph_browser._policy import OriginPattern

__all__ = ["BrowserConfig"]


class BrowserConfig(BaseModel):
    """Settings of the ``[browser]`` section of ``aleph.toml``; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    executable: str | None = Field(default=None, max_length=4096)
    """Chromium to drive; default: the first of /usr/bin/chromium, chromium-browser, google-chrome found."""
    headless: bool = True
    """Run without a window (the only mode tested here)."""
    extra_args: list[str] = Field(default_factory=list, max_length=50)
    """Extra Chromium command-line flags, appended to the built-in ones."""
    idle_timeout_seconds: float = Field(default=300.0, ge=0.5, le=86_400)
    """Close the browser after this long without a browser tool call; the next call relaunches it."""
    evaluate_requires_approval: bool = True
    """browser_evaluate runs page JavaScript: ask a human before each call (through the chokepoint)."""
    allowed_origins: list[str] = Field(default_factory=list, max_length=1000)
    """If non-empty, only these origins may be requested (`https://example.com`, `*.example.com`, `http://127.0.0.1:*`)."""
    blocked_origins: list[str] = Field(default_factory=list, max_length=1000)
    """Origins never requested, whatever allowed_origins says."""
    block_private_addresses: bool = True
    """Refuse loopback, private, link-local and other non-public addresses unless allowed_origins names them."""
    max_snapshot_chars: int = Field(default=20_000, ge=1_000, le=2_000_000)
    """Default character budget of a snapshot; a longer one is cut with a marker saying how to narrow it."""
    action_timeout_ms: int = Field(default=10_000, ge=100, le=300_000)
    """How long an action waits for its element to be actionable."""
    navigation_timeout_ms: int = Field(default=30_000, ge=100, le=300_000)
    """How long a navigation may take."""
    console_buffer: int = Field(default=500, ge=10, le=100_000)
    """Console messages kept per tab (oldest dropped first)."""
    network_buffer: int = Field(default=500, ge=10, le=100_000)
    """Network requests kept per tab (oldest dropped first)."""
    max_tabs: int = Field(default=20, ge=1, le=500)
    """Tabs one session may have open at once."""
    downloads_dir: str = Field(default="downloads", min_length=1, max_length=1024)
    """Workspace-relative directory where downloads are saved."""
    viewport_width: int = Field(default=1280, ge=100, le=7680)
    """Initial viewport width of new tabs."""
    viewport_height: int = Field(default=720, ge=100, le=4320)
    """Initial viewport height of new tabs."""

    @field_validator("allowed_origins", "blocked_origins")
    @classmethod
    def _check_patterns(cls, value: list[str]) -> list[str]:
        for item in value:
            OriginPattern.parse(item)
        return value
