"""``pdf_generate`` (markdown or text → PDF with fpdf2) and ``image_generate`` (through provider plugins).

fpdf2 is pure Python (its dependencies are Pillow, fontTools and defusedxml) and renders the HTML
that python-markdown produces: headings, emphasis, lists, code, links, rules and simple tables.
WeasyPrint would render CSS better but pulls Pango and Cairo; ReportLab has no HTML/markdown
input. A DejaVu TTF (Debian ``fonts-dejavu-core``) is used when present for full Unicode;
otherwise the core Helvetica font and characters outside Latin-1 become ``?``.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from pydantic import Field

from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph_exec._workdir import WorkdirError, write_in_workspace

__all__ = ["ImageFn", "ImageGenerateTool", "PdfGenerateTool", "render_pdf"]

ImageFn = Callable[[str, str], Awaitable[bytes]]
"""An image backend: ``await generate(prompt, size)`` → PNG or JPEG bytes."""

_FONT_DIRS = ("/usr/share/fonts/truetype/dejavu",)
_FONT_FILES = {"": "DejaVuSans.ttf", "B": "DejaVuSans-Bold.ttf", "I": "DejaVuSans-Oblique.ttf"}
_FONT_FILES["BI"] = "DejaVuSans-BoldOblique.ttf"
_MONO = "DejaVuSansMono.ttf"


def _unicode_font() -> Path | None:
    for folder in _FONT_DIRS:
        base = Path(folder)
        if all((base / f).is_file() for f in _FONT_FILES.values()):
            return base
    return None


def render_pdf(content: str, fmt: Literal["markdown", "text"], title: str | None) -> tuple[bytes, int]:
    """Render ``content`` to PDF bytes; returns (bytes, page count)."""
    import markdown
    from fpdf import FPDF
    from fpdf.errors import FPDFException
    from fpdf.fonts import TextStyle

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=True, margin=15)
    fonts = _unicode_font()
    family = "Helvetica"
    if fonts is not None:
        for style, name in _FONT_FILES.items():
            pdf.add_font("DejaVu", style, str(fonts / name))
        if (fonts / _MONO).is_file():
            pdf.add_font("DejaVuMono", "", str(fonts / _MONO))
        family = "DejaVu"
    else:
        content = content.encode("latin-1", "replace").decode("latin-1")
        title = title.encode("latin-1", "replace").decode("latin-1") if title else title
    if title:
        pdf.set_title(title)
    pdf.add_page()
    pdf.set_font(family, size=11)

    def plain() -> None:
        pdf.multi_cell(0, 6, content, new_x="LMARGIN", new_y="NEXT")

    if fmt == "text":
        plain()
    else:
        html = markdown.markdown(content, extensions=["tables", "fenced_code", "sane_lists"])
        fixed = "DejaVuMono" if fonts is not None and (fonts / _MONO).is_file() else "Courier"
        try:
            mono = TextStyle(font_family=fixed)
            pdf.write_html(html, font_family=family, tag_styles={"code": mono, "pre": mono})
        except (FPDFException, ValueError, KeyError, NotImplementedError):
            # Markup fpdf2 cannot lay out (nested tables, odd HTML in the source) falls back to plain text.
            pdf = _restart(pdf, family, fonts, title)
            pdf.multi_cell(0, 6, content, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output()), pdf.pages_count


def _restart(old: Any, family: str, fonts: Path | None, title: str | None) -> Any:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=True, margin=15)
    if fonts is not None:
        for style, name in _FONT_FILES.items():
            pdf.add_font("DejaVu", style, str(fonts / name))
    if title:
        pdf.set_title(title)
    pdf.add_page()
    pdf.set_font(family, size=11)
    return pdf


class PdfGenerateArgs(ToolArgs):
    content: str = Field(min_length=1, max_length=2_000_000)
    """The document: markdown (headings, lists, emphasis, code, tables) or plain text."""
    output_path: str = Field(max_length=4096, pattern=r"(?i)\.pdf$")
    """Where to write the PDF, relative to the workspace; must end in .pdf."""
    format: Literal["markdown", "text"] = "markdown"
    """How to read ``content``."""
    title: str | None = Field(default=None, max_length=300)
    """Document title (PDF metadata)."""
    overwrite: bool = False
    """Replace an existing file at output_path."""


class PdfGenerateTool(AlephTool[PdfGenerateArgs]):
    NAME = "pdf_generate"
    DESCRIPTION = (
        "Turn markdown or plain text into a PDF file in the workspace (A4, Unicode text when a DejaVu font is "
        "installed). Returns the path, size and page count."
    )
    Args = PdfGenerateArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=("filesystem", "write"))

    def __init__(self, workspace: Path, protected: Iterable[Path]) -> None:
        self.workspace = Path(workspace).resolve()
        self.protected = list(protected)

    async def call(self, args: PdfGenerateArgs) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self._run, args)

    def _run(self, args: PdfGenerateArgs) -> dict[str, Any]:
        data, pages = render_pdf(args.content, args.format, args.title)
        try:
            rel = write_in_workspace(
                self.workspace, args.output_path, data, protected=self.protected, overwrite=args.overwrite
            )
        except WorkdirError as exc:
            raise ExecutionFailed(self.NAME, f"output_path: {exc}") from None
        return {"path": rel, "bytes": len(data), "pages": pages}


_SIZE = r"[1-9][0-9]{1,3}x[1-9][0-9]{1,3}"


class ImageGenerateArgs(ToolArgs):
    prompt: str = Field(min_length=1, max_length=4000)
    """What the image should show."""
    size: str = Field(default="1024x1024", pattern=rf"^{_SIZE}$")
    """WIDTHxHEIGHT in pixels, e.g. 1024x1024."""
    output_path: str | None = Field(default=None, max_length=4096)
    """Where to save it in the workspace; default images/<random>.png (or .jpg)."""
    provider: str | None = Field(default=None, max_length=64)
    """A specific image provider by name; default the first registered."""


class ImageGenerateTool(AlephTool[ImageGenerateArgs]):
    NAME = "image_generate"
    DESCRIPTION = (
        "Generate an image from a text prompt with an installed image provider and save it in the workspace. "
        "Returns the saved path and format."
    )
    Args = ImageGenerateArgs
    FACTS = ToolFacts(max_duration_ms=120_000, tags=("network", "write"))

    def __init__(self, providers: Mapping[str, ImageFn], workspace: Path, protected: Iterable[Path]) -> None:
        self.providers = dict(providers)
        self.workspace = Path(workspace).resolve()
        self.protected = list(protected)

    async def call(self, args: ImageGenerateArgs) -> dict[str, Any]:
        if not self.providers:
            raise ExecutionFailed(
                self.NAME,
                "image generation not available: no provider configured "
                "(install a plugin that implements aleph_image_providers)",
            )
        if args.provider is not None and args.provider not in self.providers:
            known = ", ".join(self.providers)
            raise ValidationFailed(
                self.NAME, f"provider: unknown image provider {args.provider!r} (available: {known})"
            )
        name = args.provider or next(iter(self.providers))
        width, height = (int(v) for v in args.size.split("x"))
        if width > 4096 or height > 4096:
            raise ValidationFailed(self.NAME, "size: at most 4096x4096")
        data = await self.providers[name](args.prompt, args.size)
        if not isinstance(data, bytes | bytearray) or len(data) > 64 * 1024 * 1024:
            raise ExecutionFailed(self.NAME, f"provider {name!r} returned no image (or more than 64 MiB)")
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            fmt, ext = "png", ".png"
        elif data[:3] == b"\xff\xd8\xff":
            fmt, ext = "jpeg", ".jpg"
        else:
            raise ExecutionFailed(self.NAME, f"provider {name!r} returned bytes that are neither PNG nor JPEG")
        slug = re.sub(r"[^a-z0-9]+", "-", args.prompt.lower())[:40].strip("-") or "image"
        path = args.output_path or f"images/{slug}-{secrets.token_hex(3)}{ext}"
        try:
            rel = await anyio.to_thread.run_sync(
                lambda: write_in_workspace(self.workspace, path, bytes(data), protected=self.protected)
            )
        except WorkdirError as exc:
            raise ExecutionFailed(self.NAME, f"output_path: {exc}") from None
        return {"path": rel, "format": fmt, "bytes": len(data), "provider": name, "size": args.size}
