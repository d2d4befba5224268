"""Documents, images, speech and video the media tests make themselves (nothing is downloaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def need(program: str, package: str) -> str:
    """The path of a Debian program the test drives; skip without it (fail under CI, which installs it)."""
    found = shutil.which(program)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is missing: scripts/setup-system installs the Debian package {package}")
        pytest.skip(f"{program} not installed (Debian package {package})")
    return found


# -- documents -----------------------------------------------------------------------------------


def make_pdf(path: Path, pages: list[str], *, title: str = "", outline: bool = False) -> Path:
    """A PDF whose page i carries the text pages[i] (reportlab), with an outline entry per page if asked."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    if title:
        c.setTitle(title)
        c.setAuthor("Aleph Tests")
    for i, text in enumerate(pages, 1):
        y = 800
        for line in text.splitlines():
            c.drawString(72, y, line)
            y -= 16
        if outline:
            c.bookmarkPage(f"p{i}")
            c.addOutlineEntry(f"Chapter {i}", f"p{i}", level=0)
        c.showPage()
    c.save()
    return path


def text_image(text: str, size: tuple[int, int] = (900, 200), font_size: int = 48) -> Any:
    """A white image with black text (DejaVu Sans), as OCR sees a scan."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, font_size) if os.path.exists(FONT) else ImageFont.load_default(font_size)
    draw.text((30, size[1] // 2 - font_size // 2), text, fill="black", font=font)
    return image


def make_scanned_pdf(path: Path, text: str) -> Path:
    """A PDF with no text layer: one page holding an image of ``text``."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 200))
    c.drawImage(ImageReader(text_image(text, (1700, 400), 96)), 0, 0, width=612, height=200)
    c.showPage()
    c.save()
    return path


def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.core_properties.title = "Quarterly report"
    d.core_properties.author = "Ada"
    d.add_heading("Quarterly report", level=1)
    d.add_paragraph("Revenue grew in every region.")
    d.add_heading("Regions", level=2)
    table = d.add_table(rows=3, cols=2)
    for r, row in enumerate([("region", "growth"), ("north", "12%"), ("south", "7%")]):
        for col, value in enumerate(row):
            table.cell(r, col).text = value
    d.add_paragraph("End of report.")
    d.save(str(path))
    return path


def make_xlsx(path: Path) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sales"
    for row in [("item", "qty"), ("apples", 3), ("pears", 5)]:
        sheet.append(row)
    other = book.create_sheet("Notes")
    other.append(["checked by", "Bob"])
    book.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    for title, body in [("Welcome", "First slide body"), ("Plan", "Second slide body")]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Numbers"
    shape = slide.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    for r, row in enumerate([("a", "b"), ("1", "2")]):
        for col, value in enumerate(row):
            shape.table.cell(r, col).text = value
    slide.notes_slide.notes_text_frame.text = "Speaker notes here"
    deck.save(str(path))
    return path


def make_epub(path: Path) -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("aleph-test-1")
    book.set_title("A Small Book")
    book.set_language("en")
    book.add_author("Grace")
    chapters = []
    for i, body in enumerate(["It was a dark night.", "Morning came."], 1):
        ch = epub.EpubHtml(title=f"Chapter {i}", file_name=f"ch{i}.xhtml", lang="en")
        ch.content = (
            f"<html><head><title>Chapter {i}</title></head><body><h1>Chapter {i}</h1><p>{body}</p></body></html>"
        )
        book.add_item(ch)
        chapters.append(ch)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = chapters
    epub.write_epub(str(path), book)
    return path


# -- audio and video -----------------------------------------------------------------------------


def make_speech(path: Path, text: str, *, lead_silence: float = 0.0) -> Path:
    """Speech synthesised by espeak-ng (WAV), optionally after ``lead_silence`` seconds of silence."""
    espeak = need("espeak-ng", "espeak-ng")
    raw = path.with_suffix(".raw.wav")
    subprocess.run([espeak, "-v", "en-us", "-s", "130", "-w", str(raw), text], check=True)
    ffmpeg = need("ffmpeg", "ffmpeg")
    filters = f"adelay={int(lead_silence * 1000)}:all=1" if lead_silence else "anull"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-i", str(raw), "-af", filters, "-ar", "22050", str(path)], check=True)
    raw.unlink()
    return path


def make_video(path: Path, seconds: int = 4) -> Path:
    """An H.264/AAC MP4 of ffmpeg's test pattern with a tone, a keyframe every second."""
    ffmpeg = need("ffmpeg", "ffmpeg")
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=duration={seconds}:size=320x240:rate=10",
         "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}", "-c:v", "libx264", "-g", "10",
         "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", "-metadata", "location=+48.8584+002.2945/",
         str(path)],
        check=True,
    )  # fmt: skip
    return path
