"""``document_extract``: text, structure and metadata of a workspace document, within bounds."""

from __future__ import annotations

import io
import os
from typing import Any, Literal

from pydantic import Field

from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolError, ToolFacts, ValidationFailed
from aleph_media._base import Deadline, MediaError, guard, in_thread
from aleph_media._config import MediaConfig
from aleph_media._confine import OpenFile, Workspace
from aleph_media._extraction import Extraction, Job, parse_pages
from aleph_media._markup import read_epub, read_html, read_image, read_markdown, read_text
from aleph_media._ocr import Ocr
from aleph_media._office import read_docx, read_pptx, read_xlsx
from aleph_media._pdf import read_pdf
from aleph_media._sniff import FORMATS, check_zip, sniff

__all__ = ["DocumentExtractArgs", "DocumentExtractTool", "read_bounded"]

_ZIPPED = {"docx": read_docx, "xlsx": read_xlsx, "pptx": read_pptx, "epub": read_epub}
_TEXTUAL = {"html": read_html, "markdown": read_markdown, "text": read_text}
_SINGLE_PAGE = ("docx", "html", "markdown", "text")


class DocumentExtractArgs(ToolArgs):
    path: str = Field(max_length=4096)
    """Workspace path of the document: PDF, DOCX, XLSX, PPTX, EPUB, HTML, Markdown, text, or an image."""
    pages: str | None = Field(default=None, max_length=2000)
    """Pages to read, e.g. "1-5,8" or "10-" (slides for PPTX, sheets for XLSX, chapters for EPUB, frames
    for images). Default: all, up to the per-call page limit; a note names where to continue."""
    ocr: Literal["auto", "always", "never"] = "auto"
    """OCR: "auto" reads images and scanned PDF pages (no text layer) with Tesseract; "always" OCRs every
    PDF page; "never" returns only the text layer."""


def read_bounded(fd: int, size: int, limit: int, name: str, key: str = "max_input_bytes") -> bytes:
    """The whole file, refusing it unread when it is larger than ``limit`` bytes (``[media] key``)."""
    if size > limit:
        raise MediaError(f"{name!r} is {size:,} bytes, more than the {limit:,}-byte limit ([media] {key})")
    chunks = []
    left = limit + 1
    offset = 0
    while left > 0:
        chunk = os.pread(fd, min(left, 1 << 22), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise MediaError(f"{name!r} grew past the {limit:,}-byte limit while it was read")
    return data


class DocumentExtractTool(AlephTool[DocumentExtractArgs]):
    NAME = "document_extract"
    DESCRIPTION = (
        "Extract text, structure and metadata from a workspace document: PDF, DOCX, XLSX, PPTX, EPUB, HTML, "
        "Markdown, plain text, or an image (PNG, JPEG, TIFF, GIF, BMP, WebP). Returns pages (slides, sheets, "
        "chapters) with their text, headings (level, text, page), tables (rows of cells) and metadata. Scanned "
        "PDF pages and images are read with OCR. Use pages='1-5' to read part of a long document; a note says "
        "where to continue when a limit cut the result. Read-only."
    )
    Args = DocumentExtractArgs
    FACTS = ToolFacts(
        idempotent=True, concurrent_safe=True, max_duration_ms=300_000, tags=("media", "documents", "read")
    )

    def __init__(self, ws: Workspace, config: MediaConfig, ocr: Ocr, max_chars: int) -> None:
        self.ws = ws
        self.config = config
        self.ocr = ocr
        self.max_chars = max_chars

    async def call(self, args: DocumentExtractArgs) -> dict[str, Any]:
        try:
            spec = parse_pages(args.pages)
        except ValueError as exc:
            raise ValidationFailed(self.NAME, str(exc)) from None
        return await in_thread(self.extract, args.path, spec, args.ocr)

    def extract(self, path: str, spec: Any, ocr_mode: Any) -> dict[str, Any]:
        """Synchronous body: open the file confined, read it with the reader of its format."""
        with guard(self.NAME), self.ws.open_file(path) as f:
            if f.size > self.config.max_input_bytes:
                raise MediaError(
                    f"{path!r} is {f.size:,} bytes, more than the {self.config.max_input_bytes:,}-byte limit "
                    "([media] max_input_bytes)"
                )
            fmt, media_type = sniff(f.fd, f.rel)
            job = Job(self.config, self.ocr, ocr_mode, spec, Deadline(self.config.call_timeout_seconds), f.rel)
            ex = Extraction(self.max_chars, self.config.max_cells)
            try:
                self._read(f, fmt, job, ex)
            except (ToolError, MediaError, MemoryError, OSError):
                raise
            except Exception as exc:  # a parser's own error on a hostile or damaged file: report, never crash
                raise ExecutionFailed(
                    self.NAME, f"{path!r} could not be read as {fmt.upper()}: {type(exc).__name__}: {str(exc)[:300]}"
                ) from None
            if spec is not None and fmt in _SINGLE_PAGE:
                ex.notes.append(f"{fmt.upper()} has no pages; pages= was ignored and the whole document read")
            return ex.to_json(f.rel, fmt, media_type or FORMATS[fmt])

    def _read(self, f: OpenFile, fmt: str, job: Job, ex: Extraction) -> None:
        if fmt == "pdf":
            # PDFium reads the already-open (confined) file through its /proc magic link: the same inode.
            read_pdf(f"/proc/self/fd/{f.fd}", job, ex)
            return
        if fmt in _ZIPPED or fmt == "image":
            data = read_bounded(f.fd, f.size, self.config.max_input_bytes, f.rel)
        else:  # parsed into a tree: the markup limit applies to the whole file
            data = read_bounded(f.fd, f.size, self.config.max_markup_bytes, f.rel, "max_markup_bytes")
        if fmt in _ZIPPED:
            stream = io.BytesIO(data)
            check_zip(stream, f.rel, self.config)
            _ZIPPED[fmt](stream, job, ex)
        elif fmt == "image":
            read_image(io.BytesIO(data), job, ex)
        else:
            _TEXTUAL[fmt](data, job, ex)
