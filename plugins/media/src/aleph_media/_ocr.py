"""OCR with Debian's Tesseract (``tesseract-ocr``) through pytesseract, bounded by a timeout per image."""

from __future__ import annotations

import os
import threading
from typing import Any

from aleph_media._base import MediaError, Unavailable

__all__ = ["Ocr"]

# One OpenMP thread per run: faster on a small shared host, and it keeps OCR from starving the loop.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")


class Ocr:
    """Recognise text in PIL images; checks once that Tesseract and the language data are installed."""

    def __init__(self, language: str, timeout: float) -> None:
        self.language = language
        self.timeout = timeout
        self._lock = threading.Lock()
        self._version: str | None = None

    def version(self) -> str:
        """Tesseract's version; raises :class:`Unavailable` (saying what to install) when it cannot run."""
        with self._lock:
            if self._version is None:
                try:
                    import pytesseract
                except ImportError:
                    raise Unavailable("OCR not available: pip install pytesseract") from None
                try:
                    self._version = str(pytesseract.get_tesseract_version())
                    languages = set(pytesseract.get_languages(config=""))
                except (pytesseract.TesseractNotFoundError, OSError):
                    raise Unavailable("OCR not available: install the Debian package tesseract-ocr") from None
                missing = [lang for lang in self.language.split("+") if lang not in languages]
                if missing:
                    self._version = None
                    raise Unavailable(
                        f"OCR not available: Tesseract has no language data for {', '.join(missing)} "
                        f"(install tesseract-ocr-{missing[0]})"
                    )
            return self._version

    def text(self, image: Any) -> str:
        """The text Tesseract reads in ``image`` (page segmentation: automatic)."""
        import pytesseract

        self.version()
        try:
            out = pytesseract.image_to_string(image.convert("L"), lang=self.language, timeout=self.timeout)
        except RuntimeError as exc:  # pytesseract raises RuntimeError("Tesseract process timeout")
            raise MediaError(f"OCR gave up after {self.timeout:g} seconds ([media] ocr_timeout_seconds)") from exc
        except pytesseract.TesseractError as exc:
            raise MediaError(f"OCR failed: {exc}") from None
        return "\n".join(line.rstrip() for line in str(out).strip().splitlines())
