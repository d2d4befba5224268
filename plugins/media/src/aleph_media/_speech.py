"""``audio_transcribe``: speech to text offline with timestamps (pocketsphinx, or an engine a plugin adds)."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import Field

from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts
from aleph_media._base import Deadline, MediaError, Unavailable, guard, in_thread
from aleph_media._config import MediaConfig
from aleph_media._confine import Workspace
from aleph_media._probe import decode_pcm, probe, summarise
from aleph_media._types import SAMPLE_RATE, SpeechAudio

__all__ = ["AudioTranscribeArgs", "AudioTranscribeTool", "Pocketsphinx", "SpeechEngine"]

SpeechEngine = Callable[[SpeechAudio], Awaitable[list[dict[str, Any]]]]
_FRAMES_PER_SECOND = 100  # pocketsphinx's default frame rate (-frate)
_FILLER = re.compile(r"^(<s>|</s>|<sil>|\[.*\]|<.*>)$")
_ALTERNATE = re.compile(r"\(\d+\)$")


class Pocketsphinx:
    """The built-in engine: pocketsphinx 5 with the US English model shipped in its wheel.

    One decoder per runtime (loading the model costs about half a second), used under a lock: a
    decoder is not re-entrant. Speech is cut into utterances by pocketsphinx's own voice activity
    detector, and each utterance is decoded with word timings.
    """

    name = "pocketsphinx"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoder: Any = None

    def _open(self) -> Any:
        try:
            from pocketsphinx import Decoder
        except ImportError:
            raise Unavailable("speech recognition not available: pip install pocketsphinx") from None
        return Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")

    def transcribe(self, pcm: bytes, deadline: Deadline) -> tuple[list[dict[str, Any]], bool]:
        """Segments of ``pcm`` (16 kHz mono s16le), and whether the deadline cut the work short."""
        from pocketsphinx import Segmenter

        segments: list[dict[str, Any]] = []
        with self._lock:
            if self._decoder is None:
                self._decoder = self._open()
            decoder = self._decoder
            for utterance in Segmenter(sample_rate=SAMPLE_RATE).segment(io.BytesIO(pcm)):
                if deadline.expired():
                    return segments, True
                decoder.start_utt()
                decoder.process_raw(utterance.pcm, full_utt=True)
                decoder.end_utt()
                offset = float(utterance.start_time)
                words = [
                    {
                        "word": _ALTERNATE.sub("", seg.word),
                        "start": round(offset + seg.start_frame / _FRAMES_PER_SECOND, 2),
                        "end": round(offset + (seg.end_frame + 1) / _FRAMES_PER_SECOND, 2),
                    }
                    for seg in decoder.seg()
                    if not _FILLER.match(seg.word)
                ]
                if words:
                    segments.append(
                        {
                            "start": words[0]["start"],
                            "end": words[-1]["end"],
                            "text": " ".join(w["word"] for w in words),
                            "words": words,
                        }
                    )
        return segments, False


class AudioTranscribeArgs(ToolArgs):
    path: str = Field(max_length=4096)
    """Workspace path of an audio (or video) file in any format ffmpeg reads."""
    start: float = Field(default=0.0, ge=0, le=1_000_000)
    """Second to start at."""
    duration: float | None = Field(default=None, gt=0, le=86_400)
    """Seconds to transcribe from ``start`` (default: to the end, within the length limit)."""
    language: str = Field(default="en", pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?$")
    """Spoken language (BCP 47, e.g. "en"); the built-in engine knows English only."""
    words: bool = False
    """Include each word with its start and end time."""


class AudioTranscribeTool(AlephTool[AudioTranscribeArgs]):
    NAME = "audio_transcribe"
    DESCRIPTION = (
        "Transcribe speech in a workspace audio or video file to text, offline, with timestamps: segments "
        "(start, end in seconds, text) and optionally word timings. Use start/duration for part of a long "
        "recording. The built-in engine (pocketsphinx) knows English; the host may plug in a better one. Read-only."
    )
    Args = AudioTranscribeArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("media", "audio", "read"))

    def __init__(
        self, ws: Workspace, config: MediaConfig, builtin: Pocketsphinx, engines: dict[str, SpeechEngine]
    ) -> None:
        self.ws = ws
        self.config = config
        self.builtin = builtin
        self.engines = engines

    def engine_name(self) -> str:
        """The engine a call uses: ``[media] speech_engine``, else the first plugged in, else pocketsphinx."""
        if self.config.speech_engine is not None:
            return self.config.speech_engine
        return next(iter(self.engines), Pocketsphinx.name)

    async def call(self, args: AudioTranscribeArgs) -> dict[str, Any]:
        engine = self.engine_name()
        if engine != Pocketsphinx.name and engine not in self.engines:
            raise ExecutionFailed(
                self.NAME, f"speech engine {engine!r} ([media] speech_engine) not available: no plugin registered it"
            )
        if engine == Pocketsphinx.name and args.language.lower().split("-")[0] != "en":
            raise ExecutionFailed(
                self.NAME,
                f"speech recognition for {args.language!r} not available: the built-in pocketsphinx engine ships an "
                "English model only; a plugin can add an engine (aleph_media_speech_engines)",
            )
        deadline = Deadline(self.config.transcribe_timeout_seconds)
        began = time.monotonic()
        pcm, span = await in_thread(self.decode, args)
        seconds = len(pcm) / (2 * SAMPLE_RATE)
        cut = False
        with guard(self.NAME):
            if engine == Pocketsphinx.name:
                segments, cut = await in_thread(self.builtin.transcribe, pcm, deadline)
            else:
                try:
                    raw = await self.engines[engine](SpeechAudio(pcm, args.language))
                except Exception as exc:  # the plugged-in engine's own failure, named
                    raise MediaError(
                        f"speech engine {engine!r} failed: {type(exc).__name__}: {str(exc)[:300]}"
                    ) from None
                segments = _checked(raw, engine, seconds)
        out: dict[str, Any] = {"path": span["path"], "engine": engine, "language": args.language}
        out.update(start=args.start, duration=round(seconds, 3))
        for seg in segments:
            seg["start"] = round(seg["start"] + args.start, 2)
            seg["end"] = round(seg["end"] + args.start, 2)
            for w in seg.get("words", ()):
                w["start"], w["end"] = round(w["start"] + args.start, 2), round(w["end"] + args.start, 2)
            if not args.words:
                seg.pop("words", None)
        out["text"] = " ".join(s["text"] for s in segments if s["text"])
        out["segments"] = segments
        out["real_time_factor"] = round((time.monotonic() - began) / seconds, 3) if seconds else None
        if cut:
            last = segments[-1]["end"] if segments else args.start
            out["truncated"] = True
            out["note"] = (
                f"the time budget of {deadline.seconds:g} s ([media] transcribe_timeout_seconds) ran out; "
                f"continue with start={last}"
            )
        return out

    def decode(self, args: AudioTranscribeArgs) -> tuple[bytes, dict[str, Any]]:
        """Synchronous body: probe the confined file, check its length, decode the asked span to PCM."""
        limit = self.config.max_audio_seconds
        with guard(self.NAME), self.ws.open_file(args.path) as f:
            if f.size > self.config.max_input_bytes:
                raise MediaError(f"{args.path!r} is larger than the {self.config.max_input_bytes:,}-byte limit")
            summary = summarise(probe(f.fd, f.rel, self.config.probe_timeout_seconds), include_gps=False)
            kinds = [s["type"] for s in summary["streams"]]
            if "audio" not in kinds:
                raise MediaError(f"{f.rel!r} has no audio stream (it holds {', '.join(map(str, kinds)) or 'nothing'})")
            total = summary.get("duration")
            if total is not None and args.start >= total:
                raise MediaError(f"start={args.start:g} is past the end of {f.rel!r} ({total:g} s long)")
            seconds = args.duration if args.duration is not None else (total - args.start if total else limit)
            if seconds > limit:
                raise MediaError(
                    f"{f.rel!r} has {seconds:,.0f} s of audio from start={args.start:g}, more than the "
                    f"{limit:g}-second limit ([media] max_audio_seconds); transcribe it in parts (start, duration)"
                )
            timeout = max(self.config.probe_timeout_seconds, seconds / 10)
            pcm = decode_pcm(f.fd, f.rel, args.start, seconds, timeout)
            return pcm, {"path": f.rel}


def _checked(raw: Any, engine: str, seconds: float) -> list[dict[str, Any]]:
    """A plugged-in engine's segments, checked; an engine that answers badly is an error naming it."""
    if not isinstance(raw, list):
        raise MediaError(f"speech engine {engine!r} returned {type(raw).__name__}, not a list of segments")
    out = []
    for seg in raw[:100_000]:
        try:
            start, end, text = float(seg["start"]), float(seg["end"]), str(seg["text"])
        except (KeyError, TypeError, ValueError):
            raise MediaError(f"speech engine {engine!r} returned a segment without start, end and text") from None
        if not (0 <= start <= end <= seconds + 1):
            raise MediaError(f"speech engine {engine!r} returned a segment outside the audio ({start}-{end} s)")
        entry: dict[str, Any] = {"start": start, "end": end, "text": text.strip()}
        words = seg.get("words")
        if isinstance(words, list):
            entry["words"] = [
                {"word": str(w["word"]), "start": float(w["start"]), "end": float(w["end"])}
                for w in words[:100_000]
                if isinstance(w, dict) and {"word", "start", "end"} <= w.keys()
            ]
        out.append(entry)
    return out
