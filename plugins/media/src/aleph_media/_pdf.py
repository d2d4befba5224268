"""PDF text, outline and metadata through pypdfium2 (PDFium); scanned pages through OCR."""

from __future__ import annotations

import threading
from typing import Any

from aleph_media._base import MediaError, Unavailable
from aleph_media._extraction import Extraction, Job

__all__ = ["read_pdf"]

# PDFium is not thread-safe: every use in this process goes through one lock.
PDFIUM_LOCK = threading.Lock()
_SCANNED_CHARS = 16  # a page with fewer characters of text but an image on it is treated as scanned


def _pdfium() -> Any:
    try:
        import pypdfium2
    except ImportError:
        raise Unavailable("PDF reading not available: pip install pypdfium2") from None
    return pypdfium2


def read_pdf(source: str, job: Job, ex: Extraction) -> None:
    """Fill ``ex`` from the PDF at ``source`` (a ``/proc/self/fd/N`` path of the confined file)."""
    pdfium = _pdfium()
    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(source)
        except pdfium.PdfiumError as exc:
            reason = str(exc)
            if "password" in reason.lower():
                raise MediaError(f"{job.name!r} is an encrypted PDF; it cannot be read without its password") from None
            raise MediaError(f"{job.name!r} is not a readable PDF ({reason})") from None
        try:
            _read(doc, pdfium, job, ex)
        finally:
            doc.close()


def _read(doc: Any, pdfium: Any, job: Job, ex: Extraction) -> None:
    count = len(doc)
    ex.metadata = {k.lower(): v for k, v in doc.get_metadata_dict(skip_empty=True).items()}
    version = doc.get_version()
    if version:
        ex.metadata["pdf_version"] = f"{version // 10}.{version % 10}"
    numbers = ex.select(count, job)
    wanted = set(numbers)
    for mark in _outline(doc):
        if mark[2] is None or mark[2] in wanted:
            ex.add_heading(mark[0], mark[1], mark[2])
    ocr_capped = False
    for n in numbers:
        if ex.full or ex.out_of_time(n, job):
            break
        page = doc[n - 1]
        try:
            text = _page_text(page, pdfium)
            if job.ocr_mode == "always" or (job.ocr_mode == "auto" and _looks_scanned(page, text)):
                if len(ex.ocr_pages) < job.config.max_ocr_pages:
                    text = job.ocr.text(_render(page, job))
                    ex.ocr_pages.append(n)
                elif not ocr_capped:
                    ocr_capped = True
                    ex.notes.append(
                        f"OCR stopped after {job.config.max_ocr_pages} pages ([media] max_ocr_pages); "
                        f"continue with pages='{n}-'"
                    )
        finally:
            page.close()
        ex.add_page(n, text)


def _page_text(page: Any, pdfium: Any) -> str:
    textpage = page.get_textpage()
    try:
        text: str = textpage.get_text_range()
    except pdfium.PdfiumError as exc:
        raise MediaError(f"a page's text could not be read ({exc})") from None
    finally:
        textpage.close()
    # PDFium ends lines with CRLF; the output uses "\n" like every other format.
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _looks_scanned(page: Any, text: str) -> bool:
    if len(text) >= _SCANNED_CHARS:
        return False
    import pypdfium2.raw as pdfium_c

    return any(True for _ in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=2))


def _render(page: Any, job: Job) -> Any:
    width, height = page.get_size()
    scale = job.config.ocr_dpi / 72
    pixels = width * scale * height * scale
    if pixels > job.config.max_image_pixels:
        scale *= (job.config.max_image_pixels / pixels) ** 0.5
    return page.render(scale=scale, grayscale=True).to_pil()


def _outline(doc: Any) -> list[tuple[int, str, int | None]]:
    out: list[tuple[int, str, int | None]] = []
    for mark in doc.get_toc(max_depth=8):
        if len(out) >= 5000:
            break
        dest = mark.get_dest()
        index = dest.get_index() if dest is not None else None
        out.append((mark.level + 1, mark.get_title() or "", None if index is None else index + 1))
    return out
