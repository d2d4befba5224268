"""``media_understand``: what an image, audio or video file is and holds; a plugged-in model's description."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import Field

from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_media._base import MediaError, Unavailable, guard, in_thread
from aleph_media._config import MediaConfig
from aleph_media._confine import OpenFile, Workspace
from aleph_media._images import dominant_colours, exif_facts, image_facts, png_for_model
from aleph_media._markup import open_image
from aleph_media._ocr import Ocr
from aleph_media._probe import decode_pcm, keyframes, probe, summarise
from aleph_media._sniff import image_type
from aleph_media._types import MediaItem

__all__ = ["Describer", "MediaUnderstandArgs", "MediaUnderstandTool"]

Describer = Callable[[MediaItem], Awaitable[str]]
_DESCRIBER_AUDIO_SECONDS = 300.0


class MediaUnderstandArgs(ToolArgs):
    path: str = Field(max_length=4096)
    """Workspace path of an image, audio or video file."""
    question: str | None = Field(default=None, max_length=4000)
    """What you want to know about it; passed to the plugged-in vision/audio model, if any."""
    include_gps: bool = False
    """Return GPS coordinates from EXIF or container tags (stripped by default)."""
    ocr: bool = True
    """Read text in an image with OCR."""
    describe: bool = True
    """Ask the plugged-in vision/audio model for a description (never invented when there is none)."""


class MediaUnderstandTool(AlephTool[MediaUnderstandArgs]):
    NAME = "media_understand"
    DESCRIPTION = (
        "Describe what a workspace image, audio or video file is and holds: dimensions, duration, codecs and "
        "streams, EXIF (GPS stripped unless include_gps), dominant colours, OCR text of images, keyframe times "
        "and colours of videos, and a description from the vision/audio model the host plugged in. Parts it "
        "cannot produce are listed under 'missing' with the reason; it never invents a caption. Read-only."
    )
    Args = MediaUnderstandArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=300_000, tags=("media", "read"))

    def __init__(self, ws: Workspace, config: MediaConfig, ocr: Ocr, describers: dict[str, Describer]) -> None:
        self.ws = ws
        self.config = config
        self.ocr = ocr
        self.describers = describers

    def _describer(self) -> tuple[str, Describer] | str:
        if self.config.describer is not None:
            fn = self.describers.get(self.config.describer)
            if fn is None:
                return f"the describer {self.config.describer!r} named in [media] describer is not registered"
            return self.config.describer, fn
        if not self.describers:
            return "no vision or audio model is plugged in (a plugin implements aleph_media_describers)"
        return next(iter(self.describers.items()))

    async def call(self, args: MediaUnderstandArgs) -> dict[str, Any]:
        chosen = self._describer() if args.describe else "not asked for (describe=false)"
        want_item = not isinstance(chosen, str)
        facts, item = await in_thread(self.measure, args, want_item)
        if isinstance(chosen, str):
            facts["missing"].append(f"description: {chosen}")
            facts["description"] = None
        elif item is not None:
            name, describe = chosen
            try:
                text = await describe(item)
            except Exception as exc:  # the host's model failed: the measured facts still stand
                facts["missing"].append(
                    f"description: the describer {name!r} failed: {type(exc).__name__}: {exc}"[:600]
                )
                facts["description"] = None
            else:
                facts["description"] = str(text)
                facts["described_by"] = name
        if not facts["missing"]:
            del facts["missing"]
        return facts

    def measure(self, args: MediaUnderstandArgs, want_item: bool) -> tuple[dict[str, Any], MediaItem | None]:
        """Synchronous body: open the file confined and measure it."""
        with guard(self.NAME), self.ws.open_file(args.path) as f:
            if f.size > self.config.max_input_bytes:
                raise MediaError(
                    f"{args.path!r} is {f.size:,} bytes, more than the {self.config.max_input_bytes:,}-byte limit "
                    "([media] max_input_bytes)"
                )
            media_type = image_type(os.pread(f.fd, 64, 0))
            if media_type is not None:
                return self._image(f, media_type, args, want_item)
            return self._av(f, args, want_item)

    def _image(
        self, f: OpenFile, media_type: str, args: MediaUnderstandArgs, want_item: bool
    ) -> tuple[dict[str, Any], MediaItem | None]:
        missing: list[str] = []
        with os.fdopen(os.dup(f.fd), "rb") as stream, open_image(stream, f.rel, self.config.max_image_pixels) as image:
            out: dict[str, Any] = {"path": f.rel, "kind": "image", "media_type": media_type, "size": f.size}
            out.update(image_facts(image))
            try:
                image.load()
            except (OSError, SyntaxError, ValueError, EOFError) as exc:
                raise MediaError(f"{f.rel!r} is a damaged image: it cannot be decoded ({exc})") from None
            exif, gps = exif_facts(image, args.include_gps)
            if exif:
                out["exif"] = exif
            if gps is not None:
                out["gps"] = gps
            out["colours"] = dominant_colours(image)
            if args.ocr:
                try:
                    out["ocr_text"] = self.ocr.text(image)
                except Unavailable as exc:
                    missing.append(f"ocr_text: {exc}")
            out["missing"] = missing
            item = None
            if want_item:
                facts = {k: v for k, v in out.items() if k != "missing"}
                item = MediaItem("image", media_type, f.rel, (png_for_model(image),), None, facts, args.question)
            return out, item

    def _av(self, f: OpenFile, args: MediaUnderstandArgs, want_item: bool) -> tuple[dict[str, Any], MediaItem | None]:
        timeout = self.config.probe_timeout_seconds
        data = probe(f.fd, f.rel, timeout)
        summary = summarise(data, args.include_gps)
        video = [s for s in summary["streams"] if s["type"] == "video" and not s.get("attached_picture")]
        audio = [s for s in summary["streams"] if s["type"] == "audio"]
        if not video and not audio:
            kinds = ", ".join(str(s["type"]) for s in summary["streams"])
            raise MediaError(f"{f.rel!r} holds neither audio nor video (streams: {kinds})")
        kind: Literal["audio", "video"] = "video" if video else "audio"
        media_type = _media_type(summary.get("container", ""), kind)
        out: dict[str, Any] = {"path": f.rel, "kind": kind, "media_type": media_type, "size": f.size, **summary}
        missing: list[str] = []
        frames: list[tuple[float, bytes]] = []
        if video and self.config.max_keyframes:
            try:
                frames = keyframes(f.fd, f.rel, self.config.max_keyframes, summary.get("duration"), timeout)
            except MediaError as exc:
                missing.append(f"keyframes: {exc}")
            out["keyframes"] = [{"time": round(t, 3), "colours": _png_colours(png)} for t, png in frames]
        out["missing"] = missing
        item = None
        if want_item:
            pcm = None
            if audio:
                seconds = min(summary.get("duration") or _DESCRIBER_AUDIO_SECONDS, _DESCRIBER_AUDIO_SECONDS)
                pcm = decode_pcm(f.fd, f.rel, 0.0, seconds, timeout)
            facts = {k: v for k, v in out.items() if k != "missing"}
            item = MediaItem(kind, media_type, f.rel, tuple(png for _, png in frames), pcm, facts, args.question)
        return out, item


def _png_colours(png: bytes) -> list[dict[str, Any]]:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return dominant_colours(image, 3)


_CONTAINER_TYPES = {
    "mov": "video/mp4",
    "matroska": "video/x-matroska",
    "avi": "video/x-msvideo",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "ogg": "audio/ogg",
    "aac": "audio/aac",
    "mpegts": "video/mp2t",
    "flv": "video/x-flv",
    "aiff": "audio/aiff",
    "asf": "video/x-ms-asf",
    "gif": "image/gif",
}


def _media_type(container: str, kind: str) -> str:
    first = container.split(",")[0]
    guess = _CONTAINER_TYPES.get(first)
    if guess is None:
        return f"{kind}/{first or 'unknown'}"
    if kind == "audio" and guess.startswith("video/"):
        return "audio/" + guess.split("/", 1)[1]
    if kind == "video" and guess in ("audio/ogg",):
        return "video/ogg"
    return guess
