"""Values the family hands to the engines a host plugs in (see :mod:`aleph_media.hookspec`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["MediaItem", "SpeechAudio"]

SAMPLE_RATE = 16_000
"""Sample rate of every PCM buffer the family hands out (mono, signed 16-bit little-endian)."""


@dataclass(frozen=True, slots=True)
class MediaItem:
    """What ``media_understand`` gives a describer: the media, what was measured, the caller's question."""

    kind: Literal["image", "audio", "video"]
    """Which kind of file it is."""
    media_type: str
    """Its media type, e.g. ``image/png`` or ``video/mp4``."""
    path: str
    """Its workspace-relative path (for the model's context; the bytes are in ``images``/``audio``)."""
    images: tuple[bytes, ...] = ()
    """PNG images: the image itself (downscaled to the describer limit), or a video's keyframes."""
    audio: bytes | None = None
    """The sound track as 16 kHz mono signed 16-bit PCM (at most ``[media] max_audio_seconds``)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What ``media_understand`` measured (dimensions, duration, codecs, OCR text, ...)."""
    prompt: str | None = None
    """The caller's question about the file, if any."""


@dataclass(frozen=True, slots=True)
class SpeechAudio:
    """What ``audio_transcribe`` gives a speech engine."""

    pcm: bytes
    """16 kHz mono signed 16-bit little-endian PCM."""
    language: str
    """The language asked for (BCP 47, e.g. ``en``)."""
    sample_rate: int = SAMPLE_RATE
    """Always 16,000."""
