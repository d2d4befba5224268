"""The result of one ``document_extract`` call, built page by page within the call's budgets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from aleph_media._base import Deadline, MediaError
from aleph_media._config import MediaConfig
from aleph_media._ocr import Ocr

__all__ = ["Extraction", "Job", "PageSpec", "parse_pages"]

OcrMode = Literal["auto", "always", "never"]
_RANGE = re.compile(r"^\s*(\d{1,9})?\s*(-)?\s*(\d{1,9})?\s*$")
_MAX_RANGES = 256


@dataclass(frozen=True, slots=True)
class PageSpec:
    """Pages asked for: inclusive 1-based ranges (``None`` end = to the last page)."""

    ranges: tuple[tuple[int, int | None], ...]

    def numbers(self, count: int, most: int) -> list[int]:
        """The asked-for page numbers that exist, in order, each once; at most ``most`` of them.

        The work is bounded by ``most`` and the number of ranges, never by the page count a file claims.
        """
        seen: set[int] = set()
        out: list[int] = []
        for start, end in self.ranges:
            last = min(end if end is not None else count, count)
            n = start
            while n <= last and len(out) < most:
                if n not in seen:
                    seen.add(n)
                    out.append(n)
                n += 1
                if n <= last and n in seen:  # skip a run already taken by an earlier range
                    n = _next_free(seen, n, last)
        return out


def parse_pages(text: str | None) -> PageSpec | None:
    """``"1-5,8,10-"`` → a :class:`PageSpec`; ValueError naming the bad part."""
    if text is None or not text.strip():
        return None
    ranges: list[tuple[int, int | None]] = []
    parts = text.split(",")
    if len(parts) > _MAX_RANGES:
        raise ValueError(f"pages: at most {_MAX_RANGES} ranges")
    for part in parts:
        m = _RANGE.match(part)
        if not m or not (m.group(1) or m.group(3)):
            raise ValueError(f"pages: {part.strip()!r} is not a page number or range like '3', '2-5' or '10-'")
        start = int(m.group(1) or 1)
        end: int | None = int(m.group(3)) if m.group(3) else (None if m.group(2) else start)
        if start < 1 or (end is not None and end < start):
            raise ValueError(f"pages: {part.strip()!r} is an empty or backwards range (pages start at 1)")
        ranges.append((start, end))
    return PageSpec(tuple(ranges))


@dataclass(slots=True)
class Job:
    """What the format readers need: limits, the OCR engine and mode, the page selection, the deadline."""

    config: MediaConfig
    ocr: Ocr
    ocr_mode: OcrMode
    pages: PageSpec | None
    deadline: Deadline
    name: str


@dataclass(slots=True)
class Extraction:
    """Pages, headings, tables and metadata gathered so far, with the text budget and notes."""

    max_chars: int
    max_cells: int
    page_count: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    pages: list[dict[str, Any]] = field(default_factory=list)
    headings: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)
    ocr_pages: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    chars: int = 0
    cells: int = 0
    truncated: bool = False

    @property
    def full(self) -> bool:
        """Whether the text budget is spent (readers stop adding pages)."""
        return self.chars >= self.max_chars

    def add_page(self, number: int, text: str, **extra: Any) -> None:
        """Add a page's text, cut at the text budget (the note says where to continue)."""
        left = self.max_chars - self.chars
        if len(text) > left:
            text = text[: max(left, 0)]
            self.truncated = True
            self.notes.append(
                f"the text budget of {self.max_chars} characters ran out in page {number}; "
                f"continue with pages='{number}-' (the page starts over) or narrow the range"
            )
        self.chars += len(text)
        self.pages.append({"number": number, **extra, "text": text})

    def add_heading(self, level: int, text: str, page: int | None = None) -> None:
        """Add a heading (level 1 = top) on ``page``."""
        text = " ".join(text.split())
        if not text or len(self.headings) >= 10_000:
            return
        self.headings.append({"level": level, "text": text[:500], **({"page": page} if page is not None else {})})

    def add_table(self, rows: list[list[Any]], page: int | None = None, name: str | None = None) -> None:
        """Add a table (rows of cells as strings), cut at the cell budget."""
        out: list[list[str]] = []
        for row in rows:
            if self.cells + len(row) > self.max_cells:
                self.truncated = True
                self.notes.append(f"the cell budget of {self.max_cells} cells ran out; later table rows are left out")
                break
            self.cells += len(row)
            out.append(["" if v is None else str(v) for v in row])
        if out or name:
            entry: dict[str, Any] = {"rows": out}
            if page is not None:
                entry["page"] = page
            if name:
                entry["name"] = name
            self.tables.append(entry)

    def select(self, count: int, job: Job, unit: str = "page") -> list[int]:
        """The page numbers to read out of ``count``: the asked-for ones, capped at ``max_pages`` (noted)."""
        self.page_count = count
        cap = job.config.max_pages
        if job.pages is not None:
            wanted = job.pages.numbers(count, cap + 1)
        else:
            wanted = list(range(1, min(count, cap + 1) + 1))
        if job.pages is not None and not wanted:
            raise MediaError(f"{job.name!r} has {count} {unit}s; none of pages={_spec(job.pages)!r} exists")
        if len(wanted) > cap:
            rest = wanted[cap]
            self.truncated = True
            self.notes.append(
                f"more than {cap} {unit}s asked for, {cap} read ([media] max_pages); continue with pages='{rest}-'"
            )
            wanted = wanted[:cap]
        return wanted

    def out_of_time(self, number: int, job: Job) -> bool:
        """True (and a note) when the call's time budget is spent before ``number``."""
        if not job.deadline.expired():
            return False
        self.truncated = True
        self.notes.append(
            f"the time budget of {job.deadline.seconds:g} s ([media] call_timeout_seconds) ran out before "
            f"page {number}; continue with pages='{number}-'"
        )
        return True

    def to_json(self, path: str, fmt: str, media_type: str) -> dict[str, Any]:
        """The tool's output."""
        out: dict[str, Any] = {"path": path, "format": fmt, "media_type": media_type}
        if self.page_count is not None:
            out["page_count"] = self.page_count
        out["metadata"] = self.metadata
        out["pages"] = self.pages
        out["headings"] = self.headings
        out["tables"] = self.tables
        if self.ocr_pages:
            out["ocr_pages"] = self.ocr_pages
        out["chars"] = self.chars
        out["truncated"] = self.truncated
        if self.notes:
            out["notes"] = self.notes
        return out


def _next_free(seen: set[int], n: int, last: int) -> int:
    # Overlapping ranges: jump over pages already taken; the set holds at most ``most`` numbers.
    while n <= last and n in seen:
        n += 1
    return n


def _spec(spec: PageSpec) -> str:
    return ",".join(f"{a}-{'' if b is None else b}" if b != a else str(a) for a, b in spec.ranges)
