"""The ``[memory]`` configuration section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MemoryConfig"]


class MemoryConfig(BaseModel):
    """``[memory]``: where memory and notes live, which embedder and summariser to use, and the limits."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    notes_dir: str = "notes"
    """Folder of the workspace holding the Markdown notes (relative to the workspace root)."""
    embedder: str | None = None
    """Name of an embedder registered through ``aleph_memory_embedders``, or ``"none"`` for lexical search
    only. Unset: ``minilm-onnx`` when it is installed (``pip install aleph-memory`` brings it), else lexical
    search with a ``degraded`` note saying what is missing."""
    summariser: str | None = None
    """Name of a summariser registered through ``aleph_memory_summarisers`` (default: the only one)."""
    max_facts: int = Field(default=10_000, ge=1, le=10_000_000)
    """Currently valid facts one agent may hold; ``remember`` refuses an ``add`` beyond it."""
    max_fact_chars: int = Field(default=4_000, ge=16, le=100_000)
    """Longest fact ``remember`` stores."""
    max_note_chars: int = Field(default=1_048_576, ge=1024, le=16 * 1_048_576)
    """Longest note body ``note_manage`` writes."""
    max_notes: int = Field(default=20_000, ge=1, le=1_000_000)
    """Notes indexed for search and the link graph; more are reported as not indexed."""

    @field_validator("notes_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        if not value or value.startswith("/") or "\x00" in value or ".." in value.split("/"):
            raise ValueError("notes_dir must be a relative folder inside the workspace, without '..'")
        return value.strip("/")
