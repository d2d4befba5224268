"""OCR with Debian's Tesseract, called in process through its C API (``libtesseract.so.5``).

Why Tesseract and why in process (measured on this machine, 1280×800 screen, see docs/desktop.md):
a full-screen pass takes ~0.6 s in process with one OpenMP thread, against ~1 s for the
``tesseract`` command (which reloads its model every call, ~150 ms) and 6-10 s for rapidocr's
PP-OCRv6 models on CPU. The engine is created once and reused; calls are serialised by a lock
(a Tesseract handle is not re-entrant).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["OcrUnavailable", "TesseractEngine", "TextBox"]

_PSM_SPARSE_TEXT = 11
_LIB_NAMES = ("libtesseract.so.5", "libtesseract.so.4")


class OcrUnavailable(RuntimeError):
    """No OCR engine can run here; the message says what to install."""


@dataclass(frozen=True, slots=True)
class TextBox:
    """One line of recognised text with its box in the OCR'd image's pixels."""

    text: str
    x: int
    y: int
    width: int
    height: int
    confidence: float

    @property
    def center(self) -> tuple[float, float]:
        """The box centre."""
        return round(self.x + self.width / 2, 1), round(self.y + self.height / 2, 1)

    def to_json(self) -> dict[str, Any]:
        """The form tools return."""
        return {
            "text": self.text,
            "bounds": {"x": self.x, "y": self.y, "width": self.width, "height": self.height},
            "center": list(self.center),
            "confidence": round(self.confidence, 1),
        }


def _load() -> Any:
    # OpenMP reads OMP_THREAD_LIMIT when libgomp loads: one thread is faster on a shared 2-core host
    # (threads fight over the cores) and keeps OCR from starving the event loop.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    names = [*_LIB_NAMES, ctypes.util.find_library("tesseract")]
    for name in names:
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OcrUnavailable("OCR not available: install the Debian packages tesseract-ocr and tesseract-ocr-eng")


class TesseractEngine:
    """A warm Tesseract handle: :meth:`recognise` turns an image into text lines with boxes."""

    name = "tesseract"

    def __init__(self, language: str = "eng") -> None:
        self.language = language
        self._lock = threading.Lock()
        self._lib: Any = None
        self._handle: Any = None
        self.version = ""

    def _open(self) -> None:
        lib = _load()
        c = ctypes
        lib.TessVersion.restype = c.c_char_p
        lib.TessBaseAPICreate.restype = c.c_void_p
        lib.TessBaseAPIInit3.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p]
        lib.TessBaseAPISetImage.argtypes = [c.c_void_p, c.c_char_p, c.c_int, c.c_int, c.c_int, c.c_int]
        lib.TessBaseAPISetPageSegMode.argtypes = [c.c_void_p, c.c_int]
        lib.TessBaseAPISetSourceResolution.argtypes = [c.c_void_p, c.c_int]
        lib.TessBaseAPIRecognize.argtypes = [c.c_void_p, c.c_void_p]
        lib.TessBaseAPIGetTsvText.argtypes = [c.c_void_p, c.c_int]
        lib.TessBaseAPIGetTsvText.restype = c.c_void_p
        lib.TessDeleteText.argtypes = [c.c_void_p]
        lib.TessBaseAPIEnd.argtypes = [c.c_void_p]
        lib.TessBaseAPIDelete.argtypes = [c.c_void_p]
        handle = lib.TessBaseAPICreate()
        if lib.TessBaseAPIInit3(handle, None, self.language.encode()) != 0:
            lib.TessBaseAPIDelete(handle)
            raise OcrUnavailable(
                f"OCR not available: Tesseract has no '{self.language}' language data "
                f"(install tesseract-ocr-{self.language})"
            )
        self._lib, self._handle = lib, handle
        self.version = (lib.TessVersion() or b"").decode()

    def check(self) -> str:
        """Load the engine now; its version. Raises OcrUnavailable when it cannot run."""
        with self._lock:
            if self._handle is None:
                self._open()
        return self.version

    def close(self) -> None:
        """Release the engine."""
        with self._lock:
            if self._handle is not None:
                self._lib.TessBaseAPIEnd(self._handle)
                self._lib.TessBaseAPIDelete(self._handle)
                self._handle = None

    def recognise(self, image: Any, min_confidence: float = 40.0) -> list[TextBox]:
        """Text lines of a PIL image (words grouped by Tesseract's block, paragraph and line)."""
        gray = image.convert("L")
        data = gray.tobytes()
        with self._lock:
            if self._handle is None:
                self._open()
            lib, h = self._lib, self._handle
            lib.TessBaseAPISetImage(h, data, gray.width, gray.height, 1, gray.width)
            lib.TessBaseAPISetSourceResolution(h, 96)
            lib.TessBaseAPISetPageSegMode(h, _PSM_SPARSE_TEXT)
            if lib.TessBaseAPIRecognize(h, None) != 0:
                raise OcrUnavailable("OCR failed: Tesseract could not recognise the image")
            ptr = lib.TessBaseAPIGetTsvText(h, 0)
            try:
                tsv = ctypes.string_at(ptr).decode("utf-8", "replace")
            finally:
                lib.TessDeleteText(ptr)
        return _lines(tsv, min_confidence)


def _lines(tsv: str, min_confidence: float) -> list[TextBox]:
    groups: dict[tuple[str, ...], list[tuple[str, int, int, int, int, float]]] = {}
    for row in tsv.splitlines():
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        text = cols[11].strip()
        conf = float(cols[10])
        if not text or conf < min_confidence:
            continue
        left, top, width, height = (int(v) for v in cols[6:10])
        groups.setdefault(tuple(cols[1:5]), []).append((text, left, top, width, height, conf))
    out = []
    for words in groups.values():
        words.sort(key=lambda w: w[1])
        # Split a line where the gap between words is wide: separate labels on one row stay separate.
        run = [words[0]]
        for word in words[1:]:
            prev = run[-1]
            if word[1] - (prev[1] + prev[3]) > max(prev[4], word[4]) * 1.5:
                out.append(_merge(run))
                run = []
            run.append(word)
        out.append(_merge(run))
    return out


def _merge(words: list[tuple[str, int, int, int, int, float]]) -> TextBox:
    x0 = min(w[1] for w in words)
    y0 = min(w[2] for w in words)
    x1 = max(w[1] + w[3] for w in words)
    y1 = max(w[2] + w[4] for w in words)
    conf = sum(w[5] for w in words) / len(words)
    return TextBox(" ".join(w[0] for w in words), x0, y0, x1 - x0, y1 - y0, conf)
