"""ffprobe and ffmpeg (Debian's ``ffmpeg``) on a confined file: facts, keyframes, decoded speech audio.

The tools hand the already-open descriptor to the child (``/dev/fd/N``, the same inode), and the child
may open nothing else: ``-protocol_whitelist file`` and a demuxer allow-list of plain container formats
keep playlists (HLS, DASH, concat, image sequences) from pulling in other files or URLs, and the file
size limit of 0 keeps it from writing any. Every run has a timeout and its process group is killed.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any

from aleph_media._base import MediaError, run_bounded, which
from aleph_media._types import SAMPLE_RATE

__all__ = ["decode_pcm", "keyframes", "probe", "summarise"]

DEMUXERS = (
    "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,wav,w64,mp3,flac,ogg,aac,asf,mpegts,mpeg,flv,aiff,amr,caf,m4v,"
    "ivf,nut,wv,ac3,eac3,dts,truehd,au,gif,apng"
)
"""Container formats the children may demux; nothing that names other files or URLs."""
_SAFE = ("-protocol_whitelist", "file", "-format_whitelist", DEMUXERS)
_PTS = re.compile(rb"pts_time:\s*([0-9.]+)")
_PNG_END = b"IEND\xaeB`\x82"
_GPS_TAGS = ("location", "location-eng", "com.apple.quicktime.location.iso6709", "xyz")
_MAX_TAG_CHARS = 500


def probe(fd: int, name: str, timeout: float) -> dict[str, Any]:
    """The format and streams ffprobe reports for the open file (its JSON)."""
    argv = [which("ffprobe", "ffmpeg"), "-v", "error", *_SAFE, "-of", "json", "-show_format", "-show_streams"]
    out, _ = run_bounded(
        [*argv, "-i", f"/dev/fd/{fd}"],
        timeout=timeout,
        pass_fds=(fd,),
        max_output=4 << 20,
        what=f"{name!r} is not an audio or video file ffmpeg can read (documents: use document_extract)",
    )
    try:
        data: dict[str, Any] = json.loads(out)
    except ValueError:
        raise MediaError(f"{name!r}: ffprobe gave an unreadable answer") from None
    if not data.get("streams"):
        raise MediaError(f"{name!r} holds no audio or video stream")
    return data


def _rate(value: str | None) -> float | None:
    try:
        r = Fraction(value or "")
    except (ValueError, ZeroDivisionError):
        return None
    return round(float(r), 3) if r else None


def _num(value: Any) -> float | None:
    try:
        return round(float(value), 3)
    except (TypeError, ValueError):
        return None


def _tags(tags: dict[str, Any] | None, include_gps: bool) -> tuple[dict[str, str], bool]:
    out: dict[str, str] = {}
    stripped = False
    for key, value in (tags or {}).items():
        if key.lower() in _GPS_TAGS and not include_gps:
            stripped = True
            continue
        if len(out) < 64:
            out[str(key)[:100]] = str(value)[:_MAX_TAG_CHARS]
    return out, stripped


def summarise(data: dict[str, Any], include_gps: bool) -> dict[str, Any]:
    """The facts a user wants from ffprobe's JSON: container, duration, bit rate, streams, tags."""
    fmt = data.get("format", {})
    streams = []
    gps_stripped = False
    for s in data.get("streams", [])[:32]:
        kind = s.get("codec_type")
        entry: dict[str, Any] = {"index": s.get("index"), "type": kind, "codec": s.get("codec_name")}
        if kind == "video":
            entry.update(width=s.get("width"), height=s.get("height"), fps=_rate(s.get("avg_frame_rate")))
            entry["pixel_format"] = s.get("pix_fmt")
            if (s.get("disposition") or {}).get("attached_pic"):
                entry["attached_picture"] = True
        elif kind == "audio":
            entry.update(sample_rate=int(s.get("sample_rate") or 0) or None, channels=s.get("channels"))
            entry["channel_layout"] = s.get("channel_layout")
        duration = _num(s.get("duration"))
        if duration is not None:
            entry["duration"] = duration
        tags, stripped = _tags(s.get("tags"), include_gps)
        gps_stripped |= stripped
        if tags:
            entry["tags"] = tags
        streams.append({k: v for k, v in entry.items() if v is not None})
    tags, stripped = _tags(fmt.get("tags"), include_gps)
    out: dict[str, Any] = {
        "container": fmt.get("format_name"),
        "duration": _num(fmt.get("duration")),
        "bit_rate": int(fmt.get("bit_rate")) if str(fmt.get("bit_rate", "")).isdigit() else None,
        "streams": streams,
    }
    if tags:
        out["tags"] = tags
    if gps_stripped or stripped:
        out["gps"] = "stripped (ask with include_gps=true)"
    return {k: v for k, v in out.items() if v is not None}


def keyframes(fd: int, name: str, count: int, duration: float | None, timeout: float) -> list[tuple[float, bytes]]:
    """Up to ``count`` keyframes spread over the video, as ``(time in seconds, PNG bytes)`` (256 px wide at most)."""
    if count <= 0:
        return []
    gap = max((duration or 0) / count, 0.001)
    vf = f"select='isnan(prev_selected_t)+gte(t-prev_selected_t\\,{gap:.3f})',showinfo,scale=w='min(512,iw)':h=-2"
    argv = [which("ffmpeg", "ffmpeg"), "-hide_banner", "-nostats", "-nostdin", "-v", "info", *_SAFE]
    argv += ["-skip_frame", "nokey", "-i", f"/dev/fd/{fd}", "-map", "0:v:0", "-vf", vf, "-fps_mode", "passthrough"]
    argv += ["-frames:v", str(count), "-f", "image2pipe", "-c:v", "png", "-"]
    out, err = run_bounded(
        argv, timeout=timeout, pass_fds=(fd,), max_output=count * (4 << 20), what=f"keyframes of {name!r}"
    )
    times = [float(t) for t in _PTS.findall(err)]
    images = [chunk + _PNG_END for chunk in out.split(_PNG_END) if chunk]
    return list(zip(times, images, strict=False))


def decode_pcm(fd: int, name: str, start: float, seconds: float, timeout: float) -> bytes:
    """The first audio stream from ``start`` for at most ``seconds``, as 16 kHz mono s16le PCM."""
    argv = [which("ffmpeg", "ffmpeg"), "-hide_banner", "-nostats", "-nostdin", "-v", "error", *_SAFE]
    if start > 0:
        argv += ["-ss", f"{start:.3f}"]
    argv += ["-i", f"/dev/fd/{fd}", "-t", f"{seconds:.3f}", "-map", "0:a:0", "-vn", "-sn", "-dn"]
    argv += ["-ac", "1", "-ar", str(SAMPLE_RATE), "-f", "s16le", "-"]
    out, _ = run_bounded(
        argv,
        timeout=timeout,
        pass_fds=(fd,),
        max_output=int(seconds * SAMPLE_RATE * 2) + (1 << 16),
        what=f"the audio of {name!r} could not be decoded",
    )
    return out
