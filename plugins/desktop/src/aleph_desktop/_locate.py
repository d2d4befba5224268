"""Finding things on screen without a model: by accessibility name, by OCR text, by template image."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aleph_desktop._desktop import Desktop
from aleph_desktop._element import AccessibilityUnavailable, Element
from aleph_desktop._ocr import TextBox
from aleph_desktop._query import find, score_name
from aleph_desktop._roles import INTERACTABLE_ROLES
from aleph_desktop._shots import Screenshot

__all__ = ["Candidate", "by_name", "by_template", "by_text"]

OCR_WEIGHT = 0.75
"""OCR matches count for less than accessibility ones: the text may be misread and carries no role."""
MAX_CANDIDATES = 5


@dataclass(slots=True)
class Candidate:
    """A place on screen that matches: its box in screen pixels, score, where it came from."""

    source: str
    score: float
    x: int
    y: int
    width: int
    height: int
    text: str = ""
    role: str | None = None
    element: Element | None = field(default=None, repr=False)
    token: str = ""

    @property
    def center(self) -> tuple[float, float]:
        """The box centre in screen pixels."""
        return round(self.x + self.width / 2, 1), round(self.y + self.height / 2, 1)

    def to_json(self, shot: Screenshot | None = None) -> dict[str, Any]:
        """The form tools return; with ``shot``, the centre also in that screenshot's pixels."""
        out: dict[str, Any] = {
            "source": self.source,
            "score": round(self.score, 3),
            "text": self.text,
            "bounds": {"x": self.x, "y": self.y, "width": self.width, "height": self.height},
            "center": list(self.center),
        }
        if self.role:
            out["role"] = self.role
        if self.element is not None or self.token:
            out["element"] = self.element.token if self.element is not None else self.token
        if shot is not None:
            out["screenshot_point"] = list(shot.to_image(*self.center))
        return out


async def by_name(
    desktop: Desktop,
    text: str,
    *,
    role: str | None = None,
    prefer_role: str | None = None,
    app: str | None = None,
    include_hidden: bool = False,
) -> list[Candidate]:
    """Accessible elements named like ``text``: exact 1.0, prefix 0.9, substring 0.8; others roles ×0.5.

    With ``include_hidden``, elements without an on-screen box (items of a closed menu) are kept too:
    they can still be acted on through accessibility, never through pixels.
    """
    result = await find(desktop.atspi, role=role, name=text, app=app, max_results=50, showing=not include_hidden)
    out = []
    for score, element in zip(result["scores"], result["elements"], strict=True):
        if element.center is None and not include_hidden:
            continue
        if element.role not in INTERACTABLE_ROLES:
            score *= 0.5
        if prefer_role and element.role == prefer_role:
            score += 0.1
        x, y, w, h = element.bounds or (0, 0, 0, 0)
        out.append(Candidate("ax", score, x, y, w, h, element.name, element.role, element))
    out.sort(key=lambda c: -c.score)
    desktop.remember([c.element for c in out if c.element is not None])
    return out[:MAX_CANDIDATES]


def fuzzy_score(read: str, needle: str) -> float:
    """0.7 when OCR's reading is one or two characters off ``needle`` (a stray quote, l for I), else 0."""
    import difflib

    a = "".join(c for c in read.lower() if c.isalnum() or c == " ").strip()
    b = "".join(c for c in needle.lower() if c.isalnum() or c == " ").strip()
    if not a or not b:
        return 0.0
    if a == b:
        return 0.95
    if len(b) < 4:
        return 0.0
    # The whole line, or a run of as many words as the needle has (labels on one row merge into a line).
    words, n = a.split(), max(1, len(b.split()))
    spans = [a] + [" ".join(words[i : i + n]) for i in range(max(0, len(words) - n + 1))]
    if any(difflib.SequenceMatcher(None, span, b).ratio() >= 0.8 for span in spans):
        return 0.7
    return 0.0


def _screen_box(shot: Screenshot, box: TextBox) -> tuple[int, int, int, int]:
    x0, y0 = shot.origin[0] + box.x / shot.scale, shot.origin[1] + box.y / shot.scale
    return round(x0), round(y0), round(box.width / shot.scale), round(box.height / shot.scale)


ZOOM_BELOW = 500_000
"""A capture of fewer pixels than this (one window) is read again at 2× when the text was not found."""


async def by_text(desktop: Desktop, text: str, shot: Screenshot) -> list[Candidate]:
    """OCR lines of ``shot`` that read like ``text`` (the same scoring ×0.75), or a word inside a line.

    Tesseract misses some 12-13 px GUI text in one rendering and not another, so a capture that did
    not show the text is read again in black and white and, when small, at twice its size.
    """
    found = await _by_text(desktop, text, shot, 1, False)
    if not found:
        found = await _by_text(desktop, text, shot, 1, True)
    if not found and shot.width * shot.height < ZOOM_BELOW:
        found = await _by_text(desktop, text, shot, 2, False)
    return found


async def _by_text(desktop: Desktop, text: str, shot: Screenshot, zoom: int, binarize: bool) -> list[Candidate]:
    lines = await desktop.recognise(shot, zoom, binarize=binarize)
    out = []
    for line in lines:
        score = score_name(line.text, text) or fuzzy_score(line.text, text)
        box = line
        if score == 0.0:
            continue
        if score < 1.0:
            box = _narrow(line, text) or line  # point at the words that match, not the whole line
        x, y, w, h = _screen_box(shot, box)
        out.append(Candidate("ocr", score * OCR_WEIGHT, x, y, w, h, line.text))
    out.sort(key=lambda c: -c.score)
    return out[:MAX_CANDIDATES]


def _narrow(line: TextBox, needle: str) -> TextBox | None:
    # Estimate the sub-box of the matched characters from their position in the line (monospace guess).
    start = line.text.lower().find(needle.strip().lower())
    if start < 0 or not line.text:
        return None
    per_char = line.width / len(line.text)
    return TextBox(
        needle,
        round(line.x + start * per_char),
        line.y,
        max(2, round(len(needle) * per_char)),
        line.height,
        line.confidence,
    )


def by_template(shot: Screenshot, template: Any, threshold: float = 0.9) -> list[Candidate]:
    """Places in ``shot`` that look like the ``template`` image (normalised cross-correlation, OpenCV-free)."""
    import numpy as np

    image = np.asarray(shot.image.convert("L"), dtype=np.float32)
    tpl = np.asarray(template.convert("L"), dtype=np.float32)
    th, tw = tpl.shape
    if th > image.shape[0] or tw > image.shape[1] or th < 2 or tw < 2:
        raise ValueError(f"template of {tw}x{th} pixels does not fit the {image.shape[1]}x{image.shape[0]} capture")
    scores = _ncc(image, tpl)
    out = []
    for _ in range(MAX_CANDIDATES):
        iy, ix = np.unravel_index(int(np.argmax(scores)), scores.shape)
        best = float(scores[iy, ix])
        if best < threshold:
            break
        x, y = shot.origin[0] + ix / shot.scale, shot.origin[1] + iy / shot.scale
        out.append(Candidate("template", best, round(x), round(y), round(tw / shot.scale), round(th / shot.scale)))
        scores[max(0, iy - th // 2) : iy + th // 2 + 1, max(0, ix - tw // 2) : ix + tw // 2 + 1] = -1.0
    return out


def _ncc(image: Any, tpl: Any) -> Any:
    """Normalised cross-correlation of ``tpl`` at every position of ``image`` (FFT correlation + integral images)."""
    import numpy as np

    th, tw = tpl.shape
    t = tpl - tpl.mean()
    t_norm = float(np.sqrt((t * t).sum()))
    h, w = image.shape
    fh, fw = h + th - 1, w + tw - 1
    corr = np.fft.irfft2(np.fft.rfft2(image, (fh, fw)) * np.fft.rfft2(t[::-1, ::-1], (fh, fw)), (fh, fw))
    corr = corr[th - 1 : h, tw - 1 : w]
    sums = _window_sums(image, th, tw)
    sq = _window_sums(image * image, th, tw)
    n = th * tw
    var = np.maximum(sq - sums * sums / n, 0.0)
    denom = np.sqrt(var) * (t_norm if t_norm > 0 else 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # A near-flat window (std below one grey level) has no shape to compare: float noise there would
        # otherwise divide into scores far above 1.
        out = np.clip(np.where(var > n, corr / denom, 0.0), -1.0, 1.0)
    if t_norm == 0:  # a flat template: match flat regions of the same brightness
        out = np.where(var < 1e-3, 1.0 - np.abs(sums / n - tpl.mean()) / 255.0, 0.0)
    return out.astype(np.float32)


def _window_sums(a: Any, th: int, tw: int) -> Any:
    import numpy as np

    c = np.pad(a, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    return c[th:, tw:] - c[:-th, tw:] - c[th:, :-tw] + c[:-th, :-tw]


async def safe_by_name(desktop: Desktop, text: str, **kwargs: Any) -> tuple[list[Candidate], str | None]:
    """:func:`by_name`, with an unreachable accessibility bus reported instead of raised."""
    try:
        return await by_name(desktop, text, **kwargs), None
    except AccessibilityUnavailable as exc:
        return [], str(exc)


def elapsed_ms(start: float) -> int:
    """Milliseconds since ``start`` (a ``time.monotonic()`` value)."""
    return round((time.monotonic() - start) * 1000)
