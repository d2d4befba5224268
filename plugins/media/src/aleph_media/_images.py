"""Facts of an image with Pillow: size, EXIF (GPS only when asked), dominant colours, PNG for a model."""

from __future__ import annotations

import io
from typing import Any

__all__ = ["dominant_colours", "exif_facts", "image_facts", "png_for_model"]

_MAX_EXIF_TAGS = 100
_MAX_VALUE_CHARS = 300
_SKIP = {0x8769, 0x8825, 0xA005, 0x927C, 0x9286}  # IFD pointers, MakerNote, UserComment (opaque blobs)
_MODEL_SIDE = 1568  # longest side sent to a describer: what common vision models accept without resizing


def _value(value: Any) -> Any:
    if isinstance(value, bytes):
        text = value.rstrip(b"\x00")
        if len(text) <= _MAX_VALUE_CHARS and all(32 <= b < 127 for b in text):
            return text.decode("ascii")
        return None
    if isinstance(value, tuple | list):
        items = [_value(v) for v in value[:16]]
        return items if all(i is not None for i in items) else None
    if isinstance(value, str):
        return value.replace("\x00", "").strip()[:_MAX_VALUE_CHARS]
    if isinstance(value, int | bool):
        return value
    try:
        number = float(value)  # IFDRational and friends
    except (TypeError, ValueError, ZeroDivisionError):
        return str(value)[:_MAX_VALUE_CHARS]
    return round(number, 6) if number == number else None


def _named(items: Any, names: dict[int, str], out: dict[str, Any]) -> None:
    for tag, value in items:
        if tag in _SKIP or len(out) >= _MAX_EXIF_TAGS:
            continue
        converted = _value(value)
        if converted not in (None, "", []):
            out[names.get(tag, f"0x{tag:04x}")] = converted


def _degrees(dms: Any, ref: Any) -> float | None:
    try:
        d, m, s = (float(x) for x in dms)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    value = d + m / 60 + s / 3600
    return round(-value if str(ref).upper() in ("S", "W") else value, 7)


def exif_facts(image: Any, include_gps: bool) -> tuple[dict[str, Any], Any]:
    """``(EXIF tags by name, GPS)``; GPS is ``None`` (none), a note (stripped), or the tags with decimal degrees."""
    from PIL import ExifTags

    exif = image.getexif()
    out: dict[str, Any] = {}
    _named(exif.items(), ExifTags.TAGS, out)
    _named(exif.get_ifd(ExifTags.IFD.Exif).items(), ExifTags.TAGS, out)
    raw_gps = exif.get_ifd(ExifTags.IFD.GPSInfo)
    if not raw_gps:
        return out, None
    if not include_gps:
        return out, "stripped (ask with include_gps=true)"
    gps: dict[str, Any] = {}
    _named(raw_gps.items(), ExifTags.GPSTAGS, gps)
    lat = _degrees(raw_gps.get(2), raw_gps.get(1))
    lon = _degrees(raw_gps.get(4), raw_gps.get(3))
    if lat is not None and lon is not None:
        gps["latitude"], gps["longitude"] = lat, lon
    return out, gps


def dominant_colours(image: Any, count: int = 5) -> list[dict[str, Any]]:
    """The ``count`` most common colours (median cut on a thumbnail) with their share of the pixels."""
    from PIL import Image

    small = image.convert("RGB")
    small.thumbnail((96, 96))
    quantised = small.quantize(colors=count, method=Image.Quantize.MEDIANCUT)
    palette = quantised.getpalette() or []
    counts = sorted(quantised.getcolors() or [], reverse=True)
    total = sum(c for c, _ in counts) or 1
    out = []
    for pixels, index in counts[:count]:
        r, g, b = palette[index * 3 : index * 3 + 3]
        out.append({"hex": f"#{r:02x}{g:02x}{b:02x}", "share": round(pixels / total, 3)})
    return out


def image_facts(image: Any) -> dict[str, Any]:
    """Format, size, mode and frames of an opened image."""
    frames = getattr(image, "n_frames", 1)
    out: dict[str, Any] = {"format": image.format, "width": image.width, "height": image.height, "mode": image.mode}
    if frames > 1:
        out["frames"] = frames
        out["animated"] = bool(getattr(image, "is_animated", False))
    return out


def png_for_model(image: Any) -> bytes:
    """The image as PNG with its longest side at most 1568 px (metadata such as EXIF/GPS is not copied)."""
    copy = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    copy.thumbnail((_MODEL_SIDE, _MODEL_SIDE))
    buf = io.BytesIO()
    copy.save(buf, format="PNG")
    return buf.getvalue()
