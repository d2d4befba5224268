"""The runtime's desktop: one display connection, one accessibility client, screenshots, OCR, settling."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from aleph_desktop._atspi import AtspiClient
from aleph_desktop._config import DesktopConfig
from aleph_desktop._element import Element
from aleph_desktop._ocr import TesseractEngine, TextBox
from aleph_desktop._query import Cursors
from aleph_desktop._shots import Screenshot, ScreenshotStore
from aleph_desktop._x11 import DisplayUnavailable, Window, X11Display

__all__ = ["Desktop", "VisionLocator"]

VisionLocator = Callable[[Any, str], Any]
"""``await locate(image, description)`` → list of ``{x, y, width, height, score, text?}`` in image pixels."""

_SETTLE_POLL_S = 0.015
_SEEN_MAX = 4096


class Desktop:
    """What every desktop tool shares within one runtime (created by the plugin, closed with the runtime)."""

    def __init__(self, config: DesktopConfig, locators: dict[str, VisionLocator] | None = None) -> None:
        self.config = config
        self.shots = ScreenshotStore(config.screenshots_kept, config.screenshot_max_age_s)
        self.atspi = AtspiClient(config.session_bus, timeout=config.atspi_timeout_s)
        self.ocr = TesseractEngine(config.ocr_language)
        self.locators = dict(locators or {})
        self.cursors = Cursors()
        self.seen: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """Last known screen centre of elements tools returned, for judging a later action on them."""
        self.named: dict[tuple[str | None, ...], tuple[float, float]] = {}
        """Where a role/name target was last found, so the policy can be asked again about its window."""
        self._x: X11Display | None = None

    def remember(self, elements: list[Element]) -> None:
        """Note where ``elements`` are, so the policy can name their window before an action runs."""
        for element in elements:
            if element.center is not None:
                self.seen[element.token] = element.center
                self.seen.move_to_end(element.token)
        while len(self.seen) > _SEEN_MAX:
            self.seen.popitem(last=False)

    # -- the display -------------------------------------------------------------------------

    def x(self) -> X11Display:
        """The display connection, opened on first use; raises DisplayUnavailable."""
        if self._x is None:
            self._x = X11Display(self.config.display)
        return self._x

    async def aclose(self) -> None:
        """Close the display, the accessibility connection and the OCR engine."""
        if self._x is not None:
            self._x.close()
            self._x = None
        self.atspi.close()
        await anyio.to_thread.run_sync(self.ocr.close)

    # -- capture -----------------------------------------------------------------------------

    def capture(
        self,
        *,
        region: tuple[int, int, int, int] | None = None,
        window: Window | None = None,
        max_width: int | None = None,
        max_height: int | None = None,
    ) -> Screenshot:
        """Capture the screen (or a region or window of it) and remember it under a new id."""
        x = self.x()
        screen = x.size
        if window is not None:
            region = (window.x, window.y, window.width, window.height)
        rx, ry, rw, rh = region or (0, 0, *screen)
        rgb, w, h = x.capture(rx, ry, rw, rh)
        origin = (max(0, rx), max(0, ry))
        windows = tuple(x.windows())
        if windows and _blank(rgb, w, h):
            # Windows are mapped yet every pixel is black: the capture saw nothing (wrong display, no output).
            raise DisplayUnavailable(f"screen capture returned a blank frame on {x.name}: no pixels to look at")
        return self.shots.add(rgb, (w, h), origin, screen, windows, max_width, max_height)

    def frame_hash(self) -> str:
        """SHA-256 of the whole screen right now (the ledger's before/after hashes)."""
        x = self.x()
        rgb, _, _ = x.capture(0, 0, *x.size)
        return hashlib.sha256(rgb).hexdigest()

    def baseline(self) -> tuple[str, Any]:
        """The screen before an action: its SHA-256 (for the ledger) and its tiles (for :meth:`settle`), one grab."""
        x = self.x()
        rgb, w, h = x.capture(0, 0, *x.size)
        return hashlib.sha256(rgb).hexdigest(), _tile_sums(rgb, w, h)

    def tiles(self) -> Any:
        """Per-tile pixel sums of the screen right now (16×16 tiles): the unit :meth:`settle` compares."""
        x = self.x()
        width, height = x.size
        rgb, w, h = x.capture(0, 0, width, height)
        return _tile_sums(rgb, w, h)

    async def settle(self, before: Any = None) -> dict[str, Any]:
        """Wait until the screen and the accessibility events stay unchanged for ``settle_quiet_ms``.

        Ends at ``settle_ceiling_ms`` at the latest. This replaces a fixed sleep: a quick UI settles in
        tens of milliseconds, a slow one gets the ceiling, and the result says which happened. Tiles
        that keep changing on their own (a spinner, a progress animation) are recognised after they
        change three times and no longer hold the screen "busy".
        """
        import numpy as np

        ceiling = self.config.settle_ceiling_ms / 1000
        quiet = self.config.settle_quiet_ms / 1000
        start = time.monotonic()
        last = before
        changes: Any = None
        changed_at = start
        events = self.atspi.events
        changed = False
        while True:
            await asyncio.sleep(_SETTLE_POLL_S)
            now = time.monotonic()
            current = self.tiles()
            if last is not None and current.shape == last.shape:
                diff = current != last
                changes = diff.astype(np.int16) if changes is None else changes + diff
                animated = changes >= 3
                if (diff & ~animated).any():
                    changed, changed_at = True, now
            last = current
            if self.atspi.events != events:
                events, changed_at = self.atspi.events, now
            if now - changed_at >= quiet and (changed or now - start >= quiet * 2):
                return {"settled": True, "waited_ms": round((now - start) * 1000), "changed": changed}
            if now - start >= ceiling:
                return {"settled": False, "waited_ms": round((now - start) * 1000), "changed": changed}

    # -- OCR ---------------------------------------------------------------------------------

    async def recognise(self, shot: Screenshot, zoom: int = 1, *, binarize: bool = False) -> list[TextBox]:
        """OCR of a screenshot, boxes in its image pixels (run in a worker thread), read at ``zoom``× its size.

        ``binarize`` reads a black-and-white copy: Tesseract loses words framed by a widget's border
        (a ridge, a bevel) that it reads once the border's shading is gone.
        """
        image = shot.image
        if binarize:
            from PIL import ImageOps

            image = ImageOps.autocontrast(image.convert("L")).point(lambda v: 255 if v > 128 else 0)
        if zoom == 1:
            return await anyio.to_thread.run_sync(self.ocr.recognise, image)
        from PIL import Image

        big = image.resize((image.width * zoom, image.height * zoom), Image.Resampling.LANCZOS)
        lines = await anyio.to_thread.run_sync(self.ocr.recognise, big)
        return [
            TextBox(b.text, b.x // zoom, b.y // zoom, max(1, b.width // zoom), max(1, b.height // zoom), b.confidence)
            for b in lines
        ]


def _tile_sums(rgb: bytes, width: int, height: int, tile: int = 16) -> Any:
    import numpy as np

    frame = np.frombuffer(rgb, dtype=np.uint8).reshape(height, width, 4)
    th, tw = height // tile, width // tile
    return frame[: th * tile, : tw * tile].reshape(th, tile, tw, tile, 4).sum(axis=(1, 3, 4), dtype=np.uint32)


def _blank(rgb: bytes, width: int, height: int) -> bool:
    """Whether every pixel of a BGRX frame is black (the padding byte X is ignored)."""
    import numpy as np

    pixels = np.frombuffer(rgb, dtype="<u4", count=width * height)
    if (pixels[::997] & 0x00FFFFFF).any():
        return False  # a sample already shows colour: the usual case, decided in microseconds
    return not (pixels & 0x00FFFFFF).any()
