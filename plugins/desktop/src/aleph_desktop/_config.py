"""The ``[desktop]`` configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DesktopConfig"]


class DesktopConfig(BaseModel):
    """Settings of the ``[desktop]`` section of ``aleph.toml``; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    display: str | None = Field(default=None, max_length=256)
    """X display to drive (like ":0"); default: the DISPLAY environment variable."""
    session_bus: str | None = Field(default=None, max_length=4096)
    """D-Bus session bus address that names the accessibility bus; default: DBUS_SESSION_BUS_ADDRESS."""
    settle_ceiling_ms: int = Field(default=1000, ge=0, le=30_000)
    """Longest wait after an action for the screen and the accessibility events to go quiet."""
    settle_quiet_ms: int = Field(default=60, ge=10, le=5_000)
    """How long the screen and the events must stay unchanged to count as settled."""
    screenshots_kept: int = Field(default=16, ge=1, le=256)
    """Screenshots remembered by id; a coordinate computed on an older one is refused."""
    screenshot_max_age_s: float = Field(default=600.0, ge=1.0, le=86_400.0)
    """A coordinate computed on a screenshot older than this is refused."""
    ocr_language: str = Field(default="eng", pattern=r"^[a-z_+]{3,40}$")
    """Tesseract language(s) for OCR, e.g. "eng" or "eng+deu" (each needs tesseract-ocr-<lang>)."""
    block_unsafe_text: bool = True
    """Refuse typing commands that fetch-and-run code, wipe the disk or fork-bomb (no approval lifts it)."""
    atspi_timeout_s: float = Field(default=3.0, ge=0.1, le=60.0)
    """How long one accessibility request may take before the application counts as not answering."""
