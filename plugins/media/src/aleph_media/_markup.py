"""HTML (BeautifulSoup over lxml), Markdown (markdown-it-py), EPUB (EbookLib), plain text and images."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from aleph_media._base import MediaError, Unavailable
from aleph_media._extraction import Extraction, Job

__all__ = ["decode_text", "open_image", "read_epub", "read_html", "read_image", "read_markdown", "read_text"]

_BLANKS = re.compile(r"\n[ \t\r\f\v]*(?:\n[ \t\r\f\v]*)+")
_DROP = ("script", "style", "noscript", "template", "head")


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), else Latin-1 as a lossless fallback."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# -- HTML ----------------------------------------------------------------------------------------


def _soup(markup: bytes | str) -> Any:
    try:
        from bs4 import BeautifulSoup
    except ImportError:
        raise Unavailable("HTML reading not available: pip install beautifulsoup4 lxml") from None
    return BeautifulSoup(markup, "lxml")


def _html_into(soup: Any, ex: Extraction, page: int) -> str:
    """Headings and tables of ``soup`` into ``ex``; its visible text."""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for h in soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
        ex.add_heading(int(h.name[1]), h.get_text(" "), page)
    for table in soup.find_all("table"):
        if table.find_parent("table") is not None:
            continue  # a nested table is part of its outer table's cell text
        rows = [
            [cell.get_text(" ", strip=True) for cell in tr.find_all(["th", "td"], recursive=False)]
            for tr in table.find_all("tr")
        ]
        ex.add_table([r for r in rows if r], page=page)
    return _BLANKS.sub("\n\n", soup.get_text("\n")).strip()


def read_html(data: bytes, job: Job, ex: Extraction) -> None:
    """Visible text, ``h1``-``h6`` headings, tables, and the title and ``<meta>`` description/author."""
    soup = _soup(data)
    meta: dict[str, Any] = {}
    if soup.title is not None and soup.title.string:
        meta["title"] = soup.title.string.strip()
    for tag in soup.find_all("meta"):
        key = str(tag.get("name") or tag.get("property") or "").lower()
        if key in ("description", "author", "keywords", "og:title", "og:description") and tag.get("content"):
            meta[key] = str(tag["content"])[:1000]
    ex.metadata = meta
    ex.page_count = 1
    ex.add_page(1, _html_into(soup, ex, 1))


# -- Markdown ------------------------------------------------------------------------------------


def read_markdown(data: bytes, job: Job, ex: Extraction) -> None:
    """The source text as written, ATX/setext headings and pipe tables parsed by markdown-it-py."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        raise Unavailable("Markdown reading not available: pip install markdown-it-py") from None
    text = decode_text(data)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    rows: list[list[str]] = []
    row: list[str] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            ex.add_heading(int(token.tag[1]), tokens[i + 1].content, 1)
        elif token.type == "table_open":
            rows = []
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and i and tokens[i - 1].type in ("th_open", "td_open"):
            row.append(token.content)
        elif token.type == "tr_close":
            rows.append(row)
        elif token.type == "table_close":
            ex.add_table(rows, page=1)
    ex.page_count = 1
    ex.add_page(1, text)


def read_text(data: bytes, job: Job, ex: Extraction) -> None:
    """Plain text: one page."""
    ex.page_count = 1
    ex.add_page(1, decode_text(data))


# -- EPUB ----------------------------------------------------------------------------------------


def read_epub(data: io.BytesIO, job: Job, ex: Extraction) -> None:
    """Each spine document (chapter) is a page; Dublin Core metadata; headings and tables per chapter."""
    try:
        import ebooklib
        from ebooklib import epub
    except ImportError:
        raise Unavailable("EPUB reading not available: pip install ebooklib") from None
    try:
        book = epub.read_epub(data, options={"ignore_ncx": True})
    except (KeyError, ValueError, zipfile.BadZipFile, SyntaxError, AttributeError, epub.EpubException) as exc:
        raise MediaError(f"{job.name!r} is a damaged EPUB ({type(exc).__name__}: {str(exc)[:300]})") from None
    meta: dict[str, Any] = {}
    for key in ("title", "creator", "language", "publisher", "date", "identifier", "description"):
        values = [str(v[0]) for v in book.get_metadata("DC", key) if v and v[0]]
        if values:
            meta[key] = values[0] if len(values) == 1 else values
    ex.metadata = meta
    chapters = []
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is not None and item.get_type() == ebooklib.ITEM_DOCUMENT:
            chapters.append(item)
    titles = _toc_titles(book.toc)
    for n in ex.select(len(chapters), job, "chapter"):
        if ex.full or ex.out_of_time(n, job):
            break
        item = chapters[n - 1]
        soup = _soup(item.get_content())
        heading = soup.find(["h1", "h2", "h3"])
        title = titles.get(item.get_name()) or (heading.get_text(" ") if heading is not None else "")
        label = " ".join(str(title).split()) or item.get_name()
        ex.add_page(n, _html_into(soup, ex, n), label=label)


def _toc_titles(toc: Any, depth: int = 0) -> dict[str, str]:
    """Chapter file → its title in the book's table of contents (first entry wins)."""
    out: dict[str, str] = {}
    for entry in toc if isinstance(toc, list | tuple) else ():
        if isinstance(entry, tuple) and len(entry) == 2 and depth < 8:
            section, children = entry
            for key, value in _toc_titles([section, *children], depth + 1).items():
                out.setdefault(key, value)
            continue
        href = str(getattr(entry, "href", "") or "").split("#", 1)[0]
        title = str(getattr(entry, "title", "") or "")
        if href and title:
            out.setdefault(href, title)
    return out


# -- images --------------------------------------------------------------------------------------


def open_image(source: Any, name: str, max_pixels: int) -> Any:
    """A PIL image whose header was read and whose size was checked; nothing is decoded yet."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise Unavailable("image reading not available: pip install pillow") from None
    try:
        image = Image.open(source)
    except UnidentifiedImageError:
        raise MediaError(f"{name!r} is not an image Pillow can read (unknown or damaged format)") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise MediaError(
            f"{name!r} declares more pixels than Pillow decodes safely (a decompression bomb); refused undecoded"
        ) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise MediaError(f"{name!r} is a damaged image ({exc})") from None
    width, height = image.size
    if width * height > max_pixels:
        image.close()
        raise MediaError(
            f"{name!r} is {width}x{height} pixels, more than the {max_pixels:,}-pixel limit "
            "([media] max_image_pixels); refused undecoded"
        )
    return image


def read_image(source: Any, job: Job, ex: Extraction) -> None:
    """Each frame (TIFF pages, GIF frames) is a page whose text comes from OCR (unless ``ocr='never'``)."""
    image = open_image(source, job.name, job.config.max_image_pixels)
    with image:
        ex.metadata = {"format": image.format, "width": image.width, "height": image.height, "mode": image.mode}
        frames = getattr(image, "n_frames", 1)
        for n in ex.select(frames, job, "frame"):
            if ex.full or ex.out_of_time(n, job):
                break
            if job.ocr_mode == "never":
                ex.add_page(n, "")
                continue
            if len(ex.ocr_pages) >= job.config.max_ocr_pages:
                ex.truncated = True
                ex.notes.append(f"OCR stopped after {job.config.max_ocr_pages} frames; continue with pages='{n}-'")
                break
            try:
                image.seek(n - 1)
                image.load()
            except (OSError, SyntaxError, ValueError, EOFError) as exc:
                raise MediaError(f"{job.name!r} is a damaged image: frame {n} cannot be decoded ({exc})") from None
            ex.add_page(n, job.ocr.text(image))
            ex.ocr_pages.append(n)
