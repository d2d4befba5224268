"""Set-of-marks, locating by text / name / template / vision, and the self-check of what works here."""

from __future__ import annotations

import base64
import binascii
import io
import time
from typing import Any, Literal

from pydantic import Field, field_validator

from aleph import ExecutionFailed, ToolArgs, ToolFacts
from aleph_desktop._base import TAGS, DesktopTool, InputProblem
from aleph_desktop._element import AccessibilityUnavailable
from aleph_desktop._locate import Candidate, by_template, by_text, elapsed_ms, safe_by_name
from aleph_desktop._ocr import OcrUnavailable, TextBox
from aleph_desktop._query import snapshot
from aleph_desktop._roles import normalise_role
from aleph_desktop._shots import Screenshot, encode_image
from aleph_desktop._x11 import DisplayUnavailable, X11Display

__all__ = ["CheckPermissions", "GuiLocate", "SetOfMarks"]

READ_ONLY = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=60_000, tags=TAGS)
_PALETTE = ((230, 25, 75), (60, 140, 60), (0, 110, 200), (245, 130, 48), (145, 30, 180), (0, 150, 150))
MAX_TEMPLATE_BYTES = 2_000_000


class SomArgs(ToolArgs):
    app: str | None = Field(default=None, min_length=1, max_length=200)
    """Only mark elements of applications whose name contains this (OCR marks are not filtered)."""
    window_id: int | None = Field(default=None, ge=1, le=2**32 - 1)
    """Crop to this X window (from desktop window_list) and mark only what lies inside it."""
    ocr: Literal["auto", "always", "never"] = "auto"
    """Add OCR text boxes: "auto" only for windows the accessibility bus cannot see (Tk, X-only apps)."""
    max_elements: int = Field(default=100, ge=1, le=300)
    """Marks drawn at most."""
    max_width: int | None = Field(default=None, ge=16, le=8192)
    """Shrink the image to at most this width (marks' screenshot points follow the scale)."""
    format: Literal["png", "jpeg"] = "png"
    """Image format."""


class SetOfMarks(DesktopTool[SomArgs]):
    NAME = "desktop_som"
    DESCRIPTION = (
        "Screenshot with every interactable element outlined and numbered (set-of-marks), from accessibility "
        "boxes plus OCR text boxes for windows accessibility cannot see. Returns the image, its screenshot_id, "
        "and per mark its number, role/text, element token and the point to click in that screenshot."
    )
    Args = SomArgs
    FACTS = READ_ONLY

    async def run(self, args: SomArgs) -> Any:
        d = self.desktop
        x = d.x()
        window = None
        if args.window_id is not None:
            window = x.window(args.window_id)
            if window is None:
                raise InputProblem(f"no window with id {args.window_id} is open: see desktop action=window_list")
        shot = d.capture(window=window, max_width=args.max_width)
        marks: list[Candidate] = []
        ax_pids: set[int] = set()
        tree_truncated = False
        notes = []
        try:
            snap = await snapshot(d.atspi, args.app, 300, 1500, 3.0, x.size)
            tree_truncated = snap["tree_truncated"]
            for item in snap["elements"]:
                b = item["bounds"]
                marks.append(
                    Candidate(
                        "ax",
                        1.0,
                        b["x"],
                        b["y"],
                        b["width"],
                        b["height"],
                        item.get("name", ""),
                        item["role"],
                        token=item["element"],
                    )
                )
                d.seen[item["element"]] = tuple(item["center"])
            for app_ref, _ in await d.atspi.apps():
                pid = await d.atspi.pid(app_ref[0])
                if pid is not None:
                    ax_pids.add(pid)
        except AccessibilityUnavailable as exc:
            notes.append(f"accessibility marks left out: {exc}")
        if args.ocr != "never":
            regions = self._ocr_regions(x, shot, ax_pids, args.ocr == "always")
            try:
                for region in regions:
                    marks.extend(await self._ocr_marks(shot, region))
            except OcrUnavailable as exc:
                notes.append(str(exc))
        inside = [m for m in marks if window is None or window.contains(*m.center)]
        kept = _dedupe(inside)
        kept.sort(key=lambda m: (round(m.center[1] / 8), m.center[0]))  # rows, then left to right: stable order
        truncated = len(kept) > args.max_elements
        kept = kept[: args.max_elements]
        image = _draw(shot, kept)
        out: dict[str, Any] = {
            **shot.meta(),
            "format": args.format,
            "image_base64": encode_image(image, args.format),
            "count": len(kept),
            "truncated": truncated,
            "tree_truncated": tree_truncated,
            "marks": [_mark_json(i + 1, m, shot) for i, m in enumerate(kept)],
        }
        if window is not None:
            out["window"] = window.to_json()
        if tree_truncated:
            notes.append("the accessibility walk hit its budget: the marks do NOT cover every element")
        if notes:
            out["message"] = "; ".join(notes)
        return out

    def _ocr_regions(self, x: X11Display, shot: Screenshot, ax_pids: set[int], everything: bool) -> list[Any]:
        full = (shot.origin[0], shot.origin[1], shot.size[0], shot.size[1])
        if everything:
            return [full]
        out = []
        for w in x.windows():
            if w.pid is not None and w.pid in ax_pids:
                continue  # accessibility already marks this window's controls
            x0, y0 = max(w.x, full[0]), max(w.y, full[1])
            x1, y1 = min(w.x + w.width, full[0] + full[2]), min(w.y + w.height, full[1] + full[3])
            if x1 - x0 > 4 and y1 - y0 > 4:
                out.append((x0, y0, x1 - x0, y1 - y0))
        return out

    async def _ocr_marks(self, shot: Screenshot, region: tuple[int, int, int, int]) -> list[Candidate]:
        import anyio.to_thread
        from PIL import ImageOps

        rx, ry, rw, rh = region
        ix0, iy0 = shot.to_image(rx, ry)
        crop = shot.image.crop((int(ix0), int(iy0), int(ix0 + rw * shot.scale), int(iy0 + rh * shot.scale)))
        lines = await anyio.to_thread.run_sync(self.desktop.ocr.recognise, crop)
        # A second, black-and-white reading recovers words Tesseract drops next to widget borders.
        binary = ImageOps.autocontrast(crop.convert("L")).point(lambda v: 255 if v > 128 else 0)
        lines = _merge_readings(lines, await anyio.to_thread.run_sync(self.desktop.ocr.recognise, binary))
        out = []
        for line in lines:
            sx = rx + line.x / shot.scale
            sy = ry + line.y / shot.scale
            cand = Candidate(
                "ocr",
                line.confidence / 100,
                round(sx),
                round(sy),
                round(line.width / shot.scale),
                round(line.height / shot.scale),
                line.text,
            )
            out.append(cand)
        return out


def _overlap(a: TextBox, b: TextBox) -> float:
    w = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
    h = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
    if w <= 0 or h <= 0:
        return 0.0
    return w * h / min(a.width * a.height, b.width * b.height)


def _merge_readings(first: list[TextBox], second: list[TextBox]) -> list[TextBox]:
    """Lines of two OCR readings of one image: a box both saw keeps the longer text, new boxes are added."""
    out = list(first)
    for line in second:
        clash = [i for i, kept in enumerate(out) if _overlap(kept, line) > 0.3]
        if not clash:
            out.append(line)
        elif all(len(line.text) > len(out[i].text) for i in clash):
            for i in reversed(clash):
                del out[i]
            out.append(line)
    return out


def _dedupe(marks: list[Candidate]) -> list[Candidate]:
    # An OCR box inside an accessibility box is that element's own label: keep the element only.
    boxes = [m for m in marks if m.source == "ax"]
    out = list(boxes)
    for m in marks:
        if m.source == "ax":
            continue
        cx, cy = m.center
        if not any(b.x <= cx < b.x + b.width and b.y <= cy < b.y + b.height for b in boxes):
            out.append(m)
    return out


def _mark_json(number: int, m: Candidate, shot: Screenshot) -> dict[str, Any]:
    out = {"mark": number, **m.to_json(shot)}
    out.pop("score", None)
    return out


def _draw(shot: Screenshot, marks: list[Candidate]) -> Any:
    from PIL import ImageDraw

    image = shot.image.copy()
    draw = ImageDraw.Draw(image)
    glyph = max(2, min(6, round(image.height / 350)))
    for number, m in enumerate(marks, start=1):
        colour = _PALETTE[(number - 1) % len(_PALETTE)]
        x0, y0 = shot.to_image(m.x, m.y)
        x1, y1 = shot.to_image(m.x + m.width, m.y + m.height)
        draw.rectangle((x0, y0, x1, y1), outline=colour, width=max(1, glyph // 2))
        label = str(number)
        tw, th = 6 * len(label) + 4, 11
        # The number sits just above the box's corner when there is room, so it hides none of the label.
        ly = y0 - th if y0 - th >= 0 else y0
        draw.rectangle((x0, ly, x0 + tw, ly + th), fill=colour)
        draw.text((x0 + 2, ly), label, fill=(255, 255, 255))
    return image


class LocateArgs(ToolArgs):
    target_text: str | None = Field(default=None, max_length=500)
    """The visible label or accessible name to find (trimmed; needed except with by="template")."""
    by: Literal["auto", "name", "text", "template", "vision"] = "auto"
    """auto: accessible name, then OCR text; name / text: only that; template: template_base64; vision: a
    vision locator plugin."""
    template_base64: str | None = Field(default=None, max_length=MAX_TEMPLATE_BYTES * 4 // 3 + 4)
    """PNG or JPEG image of what to find (by="template")."""
    prefer_role: str | None = Field(default=None, min_length=1, max_length=64)
    """Accessibility role that earns a bonus, e.g. "push button"."""
    app: str | None = Field(default=None, min_length=1, max_length=200)
    """Only accessible elements of applications whose name contains this."""
    threshold: float = Field(default=0.9, ge=0.5, le=1.0)
    """Least template similarity (normalised cross-correlation) that counts as found."""
    provider: str | None = Field(default=None, min_length=1, max_length=100)
    """Vision locator to use (default: the first registered)."""

    @field_validator("prefer_role")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        return None if value is None else normalise_role(value)


class GuiLocate(DesktopTool[LocateArgs]):
    NAME = "desktop_gui_locate"
    DESCRIPTION = (
        "Find where something is on the desktop without a model: by accessible name, by OCR text, or by a "
        "template image (or by a vision locator a plugin provides). Returns found, source, confidence, the "
        "centre in screen pixels and in a new screenshot's pixels (with its screenshot_id), and candidates."
    )
    Args = LocateArgs
    FACTS = READ_ONLY

    async def run(self, args: LocateArgs) -> Any:
        text = (args.target_text or "").strip()
        if args.by != "template" and not text:
            raise InputProblem("target_text must be non-empty")
        start = time.monotonic()
        d = self.desktop
        candidates: list[Candidate] = []
        notes = []
        shot = None
        if args.by in ("auto", "name"):
            found, problem = await safe_by_name(d, text, prefer_role=args.prefer_role, app=args.app)
            candidates.extend(found)
            if problem:
                notes.append(problem)
        if args.by == "text" or (args.by == "auto" and not candidates):
            shot = d.capture()
            candidates.extend(await by_text(d, text, shot))
        if args.by == "template":
            shot = d.capture()
            template = _decode_image(args.template_base64)
            try:
                candidates.extend(by_template(shot, template, args.threshold))
            except ValueError as exc:
                raise InputProblem(str(exc)) from None
        if args.by == "vision":
            shot = d.capture()
            candidates.extend(await self._vision(shot, text, args.provider))
        shot = shot or d.capture()
        candidates.sort(key=lambda c: -c.score)
        if not candidates:
            out = {
                "found": False,
                "needle": text or "(template)",
                "screenshot_id": shot.id,
                "elapsed_ms": elapsed_ms(start),
                "hint": "Nothing matched: check the spelling, take a screenshot, or try by='text' / desktop_som.",
            }
            if notes:
                out["message"] = "; ".join(notes)
            return out
        best = candidates[0]
        return {
            "found": True,
            **best.to_json(shot),
            "confidence": round(min(best.score, 1.0), 3),
            "screenshot_id": shot.id,
            "candidates": [c.to_json(shot) for c in candidates],
            "elapsed_ms": elapsed_ms(start),
        }

    async def _vision(self, shot: Screenshot, text: str, provider: str | None) -> list[Candidate]:
        locators = self.desktop.locators
        if not locators:
            raise ExecutionFailed(
                self.NAME,
                "vision locator not available: no installed plugin implements "
                "aleph_desktop_vision_locators (see docs/desktop.md)",
            )
        name = provider or next(iter(locators))
        if name not in locators:
            raise InputProblem(f"no vision locator {name!r}; installed: {', '.join(sorted(locators))}")
        hits = await locators[name](shot.image, text)
        out = []
        for hit in list(hits)[:20]:
            sx, sy = shot.origin[0] + hit["x"] / shot.scale, shot.origin[1] + hit["y"] / shot.scale
            out.append(
                Candidate(
                    f"vision:{name}",
                    float(hit.get("score", 0.5)),
                    round(sx),
                    round(sy),
                    round(hit["width"] / shot.scale),
                    round(hit["height"] / shot.scale),
                    str(hit.get("text", "")),
                )
            )
        return out


def _decode_image(data: str | None) -> Any:
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise InputProblem('by="template" needs template_base64 (a PNG or JPEG image)')
    try:
        raw = base64.b64decode(data, validate=True)
        if len(raw) > MAX_TEMPLATE_BYTES:
            raise InputProblem(f"template image is over {MAX_TEMPLATE_BYTES} bytes")
        image = Image.open(io.BytesIO(raw))
        if image.width * image.height > 4_000_000:
            raise InputProblem("template image is over 4 megapixels")
        return image.convert("RGB")
    except (binascii.Error, ValueError, UnidentifiedImageError) as exc:
        if isinstance(exc, InputProblem):
            raise
        raise InputProblem(f"template_base64 is not a base64 PNG or JPEG image: {exc}") from None


class PermissionsArgs(ToolArgs):
    pass


class CheckPermissions(DesktopTool[PermissionsArgs]):
    NAME = "desktop_check_permissions"
    DESCRIPTION = (
        "Report what desktop control can do here: the X display (reachable, size, window manager), XTEST input, "
        "screen capture, the accessibility bus and each application's toolkit, the OCR engine and vision "
        "locators — each with ok and a detail saying what to install or start when it is missing."
    )
    Args = PermissionsArgs
    FACTS = READ_ONLY

    async def run(self, args: PermissionsArgs) -> Any:
        d = self.desktop
        checks: list[dict[str, Any]] = []

        def add(name: str, ok: bool, detail: str, **extra: Any) -> None:
            checks.append({"name": name, "ok": ok, "detail": detail, **extra})

        try:
            x = d.x()
            w, h = x.size
            add("display", True, f"{x.name} {w}x{h}", window_manager=x.has_window_manager())
            add("xtest", x.xtest, "XTEST extension present" if x.xtest else "XTEST missing: input cannot be sent")
            try:
                d.capture(max_width=64)
                add("capture", True, "XGetImage through mss")
            except (DisplayUnavailable, ValueError) as exc:
                add("capture", False, str(exc))
        except DisplayUnavailable as exc:
            add("display", False, str(exc))
        try:
            apps = await d.atspi.apps()
            add("accessibility_bus", True, f"{len(apps)} application(s) registered")
            for ref, name in apps:
                try:
                    toolkit = await d.atspi.toolkit(ref)
                    add(f"app:{name or ref[0]}", True, toolkit, pid=await d.atspi.pid(ref[0]))
                except AccessibilityUnavailable as exc:
                    add(f"app:{name or ref[0]}", False, str(exc))
        except AccessibilityUnavailable as exc:
            add("accessibility_bus", False, str(exc))
        try:
            import anyio.to_thread

            version = await anyio.to_thread.run_sync(d.ocr.check)
            add("ocr", True, f"tesseract {version} ({d.ocr.language})")
        except OcrUnavailable as exc:
            add("ocr", False, str(exc))
        add("vision_locators", bool(d.locators), ", ".join(sorted(d.locators)) or "none installed (optional)")
        required = {"display", "xtest", "capture", "accessibility_bus", "ocr"}
        return {"checks": checks, "all_ok": all(c["ok"] for c in checks if c["name"] in required)}
