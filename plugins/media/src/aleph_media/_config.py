"""The ``[media]`` configuration section: every limit an input controls."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MediaConfig"]

MiB = 1024 * 1024


class MediaConfig(BaseModel):
    """``[media]``: limits of the document, media, speech and artifact tools."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_input_bytes: int = Field(default=256 * MiB, ge=1024, le=8192 * MiB)
    """Largest file any media tool opens."""
    max_uncompressed_bytes: int = Field(default=256 * MiB, ge=1024, le=8192 * MiB)
    """Largest total uncompressed size of a ZIP container (DOCX, XLSX, PPTX, EPUB), checked before parsing."""
    max_markup_bytes: int = Field(default=64 * MiB, ge=1024, le=4096 * MiB)
    """Largest markup a parser builds a tree of: an HTML, Markdown or text file, or the XML/XHTML parts of one
    DOCX, XLSX, PPTX or EPUB together (parsers need several times this in memory)."""
    max_zip_members: int = Field(default=10_000, ge=10, le=1_000_000)
    """Most members a ZIP container may hold."""
    max_compression_ratio: int = Field(default=200, ge=10, le=100_000)
    """Highest uncompressed-to-compressed ratio of one ZIP member (zip bombs compress far beyond this)."""
    max_pages: int = Field(default=200, ge=1, le=100_000)
    """Pages (slides, sheets, chapters) one ``document_extract`` call reads; the rest is named in a note."""
    max_cells: int = Field(default=200_000, ge=100, le=50_000_000)
    """Spreadsheet and table cells one call reads."""
    max_output_chars: int | None = Field(default=None, ge=1000, le=100_000_000)
    """Characters of text one call returns. Default: ``[tools] max_output_chars`` less 2,000."""
    max_image_pixels: int = Field(default=64_000_000, ge=10_000, le=1_000_000_000)
    """Largest image (width x height) decoded; also the bound on a rendered PDF page."""
    ocr_language: str = Field(default="eng", pattern=r"^[A-Za-z_+]{3,64}$")
    """Tesseract language(s), e.g. ``eng`` or ``eng+deu`` (the Debian ``tesseract-ocr-*`` data must be installed)."""
    ocr_dpi: int = Field(default=200, ge=72, le=600)
    """Resolution scanned PDF pages are rendered at for OCR."""
    ocr_timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """Wall-clock limit of one Tesseract run (one image or page)."""
    max_ocr_pages: int = Field(default=20, ge=1, le=10_000)
    """Pages one call sends through OCR."""
    call_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    """Wall-clock budget of one extraction; pages past it are left for the next call (named in a note)."""
    probe_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """Wall-clock limit of one ``ffprobe`` or keyframe ``ffmpeg`` run."""
    max_keyframes: int = Field(default=8, ge=0, le=64)
    """Keyframes ``media_understand`` takes from a video."""
    max_audio_seconds: float = Field(default=1800.0, gt=0, le=86_400)
    """Longest audio ``audio_transcribe`` decodes; longer audio is refused unless a range is given."""
    transcribe_timeout_seconds: float = Field(default=1800.0, gt=0, le=86_400)
    """Wall-clock limit of one transcription."""
    speech_engine: str | None = None
    """Name of the speech engine ``audio_transcribe`` uses (``pocketsphinx`` or one a plugin registers);
    default: the first engine a plugin registered, else ``pocketsphinx``."""
    describer: str | None = None
    """Name of the vision/audio model ``media_understand`` asks for a description (one a plugin registers);
    default: the first registered."""
    max_artifact_bytes: int = Field(default=512 * MiB, ge=1024, le=65_536 * MiB)
    """Largest file ``artifact_publish`` accepts."""
    max_resource_bytes: int = Field(default=64 * MiB, ge=1024, le=4096 * MiB)
    """Largest artifact ``aleph serve`` hands an MCP client as a resource (it travels base64-encoded)."""
    max_artifacts_listed: int = Field(default=500, ge=1, le=100_000)
    """Most artifacts one ``artifact_list`` returns."""
