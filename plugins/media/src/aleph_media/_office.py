"""DOCX (python-docx), XLSX (openpyxl) and PPTX (python-pptx): text, headings, tables, metadata.

Each reader gets the container in memory after :func:`aleph_media._sniff.check_zip` accepted its sizes.
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import datetime
from typing import Any

from aleph_media._base import MediaError, Unavailable
from aleph_media._extraction import Extraction, Job

__all__ = ["read_docx", "read_pptx", "read_xlsx"]

_HEADING = re.compile(r"^(?:heading|überschrift|titre)\s*(\d)$", re.IGNORECASE)
_CORE_FIELDS = (
    "title",
    "author",
    "subject",
    "keywords",
    "category",
    "comments",
    "created",
    "modified",
    "last_modified_by",
)
_ROWS_PER_TIME_CHECK = 2000


def _core(props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _CORE_FIELDS:
        value = getattr(props, key, None)
        if value in (None, ""):
            continue
        out[key] = value.isoformat() if isinstance(value, datetime) else str(value)
    return out


def _damaged(job: Job, exc: Exception) -> MediaError:
    return MediaError(f"{job.name!r} is a damaged document ({type(exc).__name__}: {str(exc)[:300]})")


# -- DOCX ----------------------------------------------------------------------------------------


def read_docx(data: io.BytesIO, job: Job, ex: Extraction) -> None:
    """Paragraphs and tables in document order; ``Heading N`` and ``Title`` styles become headings."""
    try:
        import docx
        from docx.table import Table
    except ImportError:
        raise Unavailable("DOCX reading not available: pip install python-docx") from None
    try:
        document = docx.Document(data)
    except (KeyError, ValueError, zipfile.BadZipFile, SyntaxError) as exc:
        raise _damaged(job, exc) from None
    ex.metadata = _core(document.core_properties)
    ex.page_count = 1
    lines: list[str] = []
    size = 0
    for block in document.iter_inner_content():
        if size > ex.max_chars or job.deadline.expired():
            break
        if isinstance(block, Table):
            rows = [[cell.text for cell in row.cells] for row in block.rows]
            ex.add_table(rows, page=1)
            text = "\n".join("\t".join(row) for row in rows)
        else:
            text = block.text
            level = _heading_level(block.style.name if block.style is not None else "")
            if level:
                ex.add_heading(level, text, 1)
        if text:
            lines.append(text)
            size += len(text) + 1
    if job.deadline.expired():
        ex.truncated = True
        ex.notes.append(f"the time budget of {job.deadline.seconds:g} s ran out; the text is cut")
    ex.add_page(1, "\n".join(lines))


def _heading_level(style: str) -> int:
    if style.lower() == "title":
        return 1
    m = _HEADING.match(style.strip())
    return int(m.group(1)) if m else 0


# -- XLSX ----------------------------------------------------------------------------------------


def read_xlsx(data: io.BytesIO, job: Job, ex: Extraction) -> None:
    """Each sheet is a page (its ``label`` is the sheet name): a table of cell values and its TSV text."""
    try:
        import openpyxl
    except ImportError:
        raise Unavailable("XLSX reading not available: pip install openpyxl") from None
    try:
        book = openpyxl.load_workbook(data, read_only=True, data_only=True)
    except (KeyError, ValueError, zipfile.BadZipFile, SyntaxError, TypeError) as exc:
        raise _damaged(job, exc) from None
    try:
        ex.metadata = _core(book.properties)
        ex.metadata["sheets"] = list(book.sheetnames)
        sheets = book.worksheets
        for n in ex.select(len(sheets), job, "sheet"):
            if ex.full or ex.out_of_time(n, job):
                break
            sheet = sheets[n - 1]
            rows = _sheet_rows(sheet, job, ex)
            ex.add_table(rows, page=n, name=sheet.title)
            ex.add_page(n, "\n".join("\t".join(row) for row in rows), label=sheet.title)
    finally:
        book.close()


def _sheet_rows(sheet: Any, job: Job, ex: Extraction) -> list[list[str]]:
    rows: list[list[str]] = []
    cells = ex.cells
    for i, values in enumerate(sheet.iter_rows(values_only=True)):
        if i % _ROWS_PER_TIME_CHECK == 0 and job.deadline.expired():
            ex.notes.append(f"sheet {sheet.title!r}: the time budget ran out after {i} rows")
            ex.truncated = True
            break
        row = ["" if v is None else (v.isoformat() if isinstance(v, datetime) else str(v)) for v in values]
        while row and row[-1] == "":
            row.pop()
        if not row:
            continue
        cells += len(row)
        if cells > ex.max_cells:
            break  # add_table notes the cut
        rows.append(row)
    return rows


# -- PPTX ----------------------------------------------------------------------------------------


def read_pptx(data: io.BytesIO, job: Job, ex: Extraction) -> None:
    """Each slide is a page: its title is a heading, text frames its text, tables its tables, plus notes."""
    try:
        import pptx
    except ImportError:
        raise Unavailable("PPTX reading not available: pip install python-pptx") from None
    try:
        deck = pptx.Presentation(data)
    except (KeyError, ValueError, zipfile.BadZipFile, SyntaxError) as exc:
        raise _damaged(job, exc) from None
    ex.metadata = _core(deck.core_properties)
    slides = list(deck.slides)
    for n in ex.select(len(slides), job, "slide"):
        if ex.full or ex.out_of_time(n, job):
            break
        slide = slides[n - 1]
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text if title_shape is not None and title_shape.has_text_frame else ""
        if title:
            ex.add_heading(1, title, n)
        texts: list[str] = []
        _shapes(slide.shapes, texts, ex, n, depth=0)
        extra: dict[str, Any] = {}
        if title:
            extra["label"] = " ".join(title.split())
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                extra["notes"] = notes.text.strip()
        ex.add_page(n, "\n".join(t for t in texts if t), **extra)


def _shapes(shapes: Any, texts: list[str], ex: Extraction, page: int, depth: int) -> None:
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6 and depth < 8:  # MSO_SHAPE_TYPE.GROUP
            _shapes(shape.shapes, texts, ex, page, depth + 1)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
            ex.add_table(rows, page=page)
            texts.append("\n".join("\t".join(row) for row in rows))
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            texts.append(shape.text_frame.text)
