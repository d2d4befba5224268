"""What a file is (from its bytes, not its name) and whether a ZIP container is safe to open."""

from __future__ import annotations

import os
import zipfile
from typing import IO

from aleph_media._base import MediaError
from aleph_media._config import MediaConfig

__all__ = ["FORMATS", "check_zip", "image_type", "sniff"]

FORMATS = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "epub": "application/epub+zip",
    "html": "text/html",
    "markdown": "text/markdown",
    "text": "text/plain",
    "image": "image/*",
}
"""Document formats ``document_extract`` reads, with their media types."""

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"BM", "image/bmp"),
)
_MARKUP_PARTS = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".vml")
_MARKDOWN_EXT = (".md", ".markdown", ".mdown", ".mkd")
_HTML_EXT = (".html", ".htm", ".xhtml")


def _head(fd: int, size: int = 4096) -> bytes:
    return os.pread(fd, size, 0)


def image_type(head: bytes) -> str | None:
    """The media type of an image format Pillow reads, from the file's first bytes; None when not one."""
    for magic, media_type in _IMAGE_MAGIC:
        if head.startswith(magic):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def sniff(fd: int, name: str) -> tuple[str, str]:
    """``(format, media type)`` of the open file: magic bytes first, the name only for text formats."""
    head = _head(fd)
    lower = name.lower()
    if head.startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "pdf", FORMATS["pdf"]
    media_type = image_type(head)
    if media_type is not None:
        return "image", media_type
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_kind(fd, name), ""
    if b"\x00" in head:
        raise MediaError(
            f"{name!r} is not a document format document_extract reads (PDF, DOCX, XLSX, PPTX, EPUB, HTML, "
            "Markdown, text, PNG/JPEG/GIF/TIFF/BMP/WebP images); use media_understand for audio and video"
        )
    text = head.lstrip().lower()
    if lower.endswith(_HTML_EXT) or text.startswith((b"<!doctype html", b"<html")):
        return "html", FORMATS["html"]
    if lower.endswith(_MARKDOWN_EXT):
        return "markdown", FORMATS["markdown"]
    return "text", FORMATS["text"]


def _zip_kind(fd: int, name: str) -> str:
    try:
        with os.fdopen(os.dup(fd), "rb") as stream, zipfile.ZipFile(stream) as archive:
            names = set(archive.namelist())
            if "mimetype" in names and archive.getinfo("mimetype").file_size < 100:
                if archive.read("mimetype").strip() == b"application/epub+zip":
                    return "epub"
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise MediaError(f"{name!r} is a damaged ZIP container: {exc}") from None
    for part, kind in (("word/document.xml", "docx"), ("xl/workbook.xml", "xlsx"), ("ppt/presentation.xml", "pptx")):
        if part in names:
            return kind
    raise MediaError(f"{name!r} is a ZIP archive but not a DOCX, XLSX, PPTX or EPUB document")


def check_zip(stream: IO[bytes], name: str, config: MediaConfig) -> None:
    """Refuse a ZIP container whose members would decompress past the limits, before any parser sees it.

    The sizes come from the central directory; :mod:`zipfile` never returns more than a member's
    declared size, so a member that lies about its size cannot expand past these checks either.
    """
    try:
        with zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise MediaError(f"{name!r} is a damaged ZIP container: {exc}") from None
    finally:
        stream.seek(0)
    if len(members) > config.max_zip_members:
        raise MediaError(f"{name!r} holds {len(members)} ZIP members (limit {config.max_zip_members}); refused unread")
    total = markup = 0
    for member in members:
        total += member.file_size
        if member.filename.lower().endswith(_MARKUP_PARTS):
            markup += member.file_size
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > 1 << 20 and ratio > config.max_compression_ratio:
            raise MediaError(
                f"{name!r} looks like a zip bomb: member {member.filename[:80]!r} expands {ratio:,.0f}x "
                f"to {member.file_size:,} bytes (limit {config.max_compression_ratio}x); refused unread"
            )
    if markup > config.max_markup_bytes:
        raise MediaError(
            f"{name!r} holds {markup:,} bytes of XML, more than the {config.max_markup_bytes:,}-byte limit "
            "([media] max_markup_bytes); refused unread"
        )
    if total > config.max_uncompressed_bytes:
        raise MediaError(
            f"{name!r} would expand to {total:,} bytes (limit {config.max_uncompressed_bytes:,}, "
            "[media] max_uncompressed_bytes); refused unread"
        )
