"""The ``desktop`` tool: look at the screen and act on it (pointer, keyboard, accessibility actions).

Every acting call names its target window to the policy before it runs (:meth:`resolve_subjects`),
waits for the screen to settle afterwards instead of sleeping, and records the window and the
hashes of the screen before and after in its ledger row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from aleph import ToolError, ToolFacts
from aleph_desktop._args import ELEMENT, KEYBOARD, DesktopArgs
from aleph_desktop._base import TAGS, DesktopTool, InputProblem, Refused, annotate, current_call, unsafe_text_reason
from aleph_desktop._element import AccessibilityUnavailable, Element, parse_token
from aleph_desktop._locate import Candidate, by_name, by_text
from aleph_desktop._query import focused
from aleph_desktop._shots import Screenshot, StaleScreenshot
from aleph_desktop._x11 import DisplayUnavailable, Window, key_names_to_keysyms

__all__ = ["DesktopControl"]

_BUTTONS = {"left": 1, "middle": 2, "right": 3}
_TEXT_ROLES = frozenset({"text", "entry", "password text", "terminal", "editbar", "autocomplete"})
_NUMBER_ROLES = frozenset({"spin button", "slider", "dial", "scroll bar"})


@dataclass(slots=True)
class _Target:
    point: tuple[int, int] | None = None
    element: Element | None = None
    window: Window | None = None
    via: str = "pixels"
    found: Candidate | None = None


class DesktopControl(DesktopTool[DesktopArgs]):
    NAME = "desktop"
    DESCRIPTION = (
        "See and control the Linux desktop. action=screenshot returns an image with a screenshot_id; pointer "
        "actions (click, double_click, right_click, hover, drag, scroll) take x/y in that screenshot's pixels "
        "plus its screenshot_id, or an element token, or a visible name; type_text and key_combo go to the "
        "focused window; press / set_value / select act on an accessibility element (by token or role+name) "
        "without pixels, falling back to OCR and the pointer. Each action waits for the screen to settle and "
        "returns a fresh screenshot."
    )
    Args = DesktopArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=False, max_duration_ms=60_000, tags=TAGS)

    # -- policy ------------------------------------------------------------------------------

    def resolve_subjects(self, input: Mapping[str, Any] | BaseModel) -> dict[str, str]:
        """The window this call will act on (``app`` = WM_CLASS, ``title``), resolved now for the policy."""
        try:
            args = input if isinstance(input, DesktopArgs) else DesktopArgs.model_validate(dict(input))
        except ValidationError:
            return {"unresolved": "the arguments are not valid"}
        if args.action in ("screenshot", "ocr", "cursor_position", "window_list", "wait"):
            return {}
        if args.action == "batch":
            return {"unresolved": "a batch is judged action by action"}
        try:
            window = self._judge_window(args)
        except (DisplayUnavailable, StaleScreenshot, InputProblem, ValueError) as exc:
            return {"unresolved": str(exc)[:200]}
        if window is None:
            return {"unresolved": "no window at the target"}
        return {"app": window.app, "title": window.title}

    def _judge_window(self, args: DesktopArgs) -> Window | None:
        x = self.desktop.x()
        if args.action == "focus_window":
            return self._named_window(args)
        if args.x is not None and args.y is not None and args.screenshot_id is not None:
            shot = self.desktop.shots.get(args.screenshot_id)
            return x.window_at(*shot.to_screen(args.x, args.y))
        if args.element is not None:
            center = self.desktop.seen.get(args.element)
            if center is None:
                raise InputProblem("the element was not returned by an earlier query, so its window is unknown")
            return x.window_at(*center)
        if args.action in KEYBOARD or args.action == "scroll":
            return x.focused_window()
        center = self.desktop.named.get((args.role, args.name, args.target_app, args.via))
        if center is None:
            raise InputProblem("a role/name target is found when the action runs")
        return x.window_at(*center)

    def _named_window(self, args: DesktopArgs) -> Window:
        windows = self.desktop.x().windows()
        if args.window_id is not None:
            match = [w for w in windows if w.id == args.window_id]
        else:
            needle = (args.target_app or "").lower()
            match = [w for w in windows if needle in w.app.lower() or needle in w.title.lower()]
        if not match:
            raise InputProblem(f"no open window matches {args.window_id or args.target_app!r}: see window_list")
        return match[0]

    async def _recheck(self, args: DesktopArgs, judged: dict[str, str], window: Window | None) -> None:
        # The policy judged this call on the window it could name beforehand. If it could not name one
        # (a role/name target), ask the chokepoint again now that the real window is known.
        ctx = current_call()
        if ctx is None or "unresolved" not in judged or window is None:
            return
        explanation = ctx.explain(self.NAME, args.model_dump(exclude_defaults=True))
        decision = explanation.decision
        if decision == "deny":
            raise Refused(f"acting on {window.app} {window.title!r} is denied: {explanation.reason}")
        if decision == "ask":
            raise Refused(
                f"acting on {window.app} {window.title!r} needs approval: query the element first "
                "(desktop_ax_query_by_role) and act on its token so the approval can name the window"
            )

    # -- entry -------------------------------------------------------------------------------

    async def run(self, args: DesktopArgs) -> Any:
        a = args.action
        if a == "batch":
            return await self._batch(args)
        x = self.desktop.x()
        if a == "cursor_position":
            px, py = x.pointer()
            return {"x": px, "y": py}
        if a == "window_list":
            return {"windows": [w.to_json() for w in x.windows()]}
        if a in ("screenshot", "ocr"):
            return await self._look(args)
        if a == "wait":
            return {"settle": await self.desktop.settle(self.desktop.tiles())}
        if args.text is not None and self.desktop.config.block_unsafe_text and a in ("type_text", "set_value"):
            reason = unsafe_text_reason(args.text)
            if reason:
                raise Refused(reason)
        judged = self.resolve_subjects(args)
        target = await self._resolve(args)
        if target.window is None and target.point is not None:
            target.window = x.window_at(*target.point)
        if target.window is None and a in KEYBOARD:
            target.window = x.focused_window()
        await self._recheck(args, judged, target.window)
        before_hash, tiles = self.desktop.baseline()
        detail = await self._perform(args, target)
        self.desktop.atspi.invalidate()  # what this action changed must be read afresh
        settle = await self.desktop.settle(tiles)
        out: dict[str, Any] = {"action": a, "done": True, "via": target.via, **detail, "settle": settle}
        if target.window is not None:
            out["window"] = target.window.to_json()
        after_hash: str
        if args.observe == "none":
            after_hash = self.desktop.frame_hash()
        else:
            after = self.desktop.capture()
            after_hash = after.sha256
            out["screenshot"] = self._shot_json(after, args.format, image=args.observe == "screenshot")
        window_ref = f"{target.window.app}:{target.window.title}" if target.window else ""
        annotate(window=window_ref, screenshot_before=before_hash, screenshot_after=after_hash)
        return out

    # -- perception --------------------------------------------------------------------------

    def _shot_json(self, shot: Screenshot, fmt: str, *, image: bool = True) -> dict[str, Any]:
        out = shot.meta()
        out["format"] = fmt
        if image:
            out["image_base64"] = shot.encode(fmt)
        return out

    async def _look(self, args: DesktopArgs) -> dict[str, Any]:
        window = self._named_window(args) if args.window_id is not None else None
        region = (args.region.x, args.region.y, args.region.width, args.region.height) if args.region else None
        try:
            shot = self.desktop.capture(
                region=region, window=window, max_width=args.max_width, max_height=args.max_height
            )
        except ValueError as exc:
            raise InputProblem(str(exc)) from None
        if args.action == "screenshot":
            out = self._shot_json(shot, args.format)
            if window is not None:
                out["window"] = window.to_json()
            return out
        lines = await self.desktop.recognise(shot)
        return {
            **shot.meta(),
            "engine": f"tesseract {self.desktop.ocr.version}".strip(),
            "text": "\n".join(line.text for line in lines),
            "lines": [line.to_json() for line in lines],
        }

    # -- targets -----------------------------------------------------------------------------

    async def _resolve(self, args: DesktopArgs) -> _Target:
        if args.action == "focus_window":
            return _Target(window=self._named_window(args), via="x11")
        if args.x is not None and args.y is not None and args.screenshot_id is not None:
            return _Target(point=self._point(args.screenshot_id, args.x, args.y), via="pixels")
        if args.element is not None:
            try:
                ref = parse_token(args.element)
            except ValueError as exc:
                raise InputProblem(str(exc)) from None
            try:
                element = await self.desktop.atspi.describe(ref)
            except AccessibilityUnavailable as exc:
                raise InputProblem(f"element {args.element} is gone (or its app stopped answering): {exc}") from None
            self.desktop.remember([element])
            return _Target(point=_center(element), element=element, via="accessibility")
        if args.name is not None or args.role is not None:
            return await self._find(args)
        return _Target(via="keyboard" if args.action in KEYBOARD else "pixels")

    def _point(self, shot_id: str, x: float, y: float) -> tuple[int, int]:
        shot = self.desktop.shots.get(shot_id)
        point = shot.to_screen(x, y)
        disp = self.desktop.x()
        self.desktop.shots.check_current(shot, *point, disp.windows(), disp.size)
        return point

    async def _find(self, args: DesktopArgs) -> _Target:
        problems = []
        if args.via != "pixels":
            try:
                hits = (
                    await by_name(self.desktop, args.name or "", role=args.role, app=args.target_app)
                    if args.name
                    else await self._by_role_only(args)
                )
                if not hits and args.action in ELEMENT and args.name:
                    # Menu items of a closed menu and rows of a collapsed list are not showing, yet can be acted on.
                    hits = await by_name(
                        self.desktop, args.name, role=args.role, app=args.target_app, include_hidden=True
                    )
                if hits:
                    best = hits[0]
                    if best.element is not None and best.element.center is not None:
                        self._note(args, best.center)
                    return _Target(point=_center(best.element), element=best.element, via="accessibility", found=best)
                problems.append(f"no accessible {args.role or 'element'} named {args.name!r}")
            except AccessibilityUnavailable as exc:
                problems.append(str(exc))
        if args.via != "accessibility" and args.name:
            for window in self._ocr_windows(args):
                shot = self.desktop.capture(window=window)
                hits = await by_text(self.desktop, args.name, shot)
                if hits:
                    best = hits[0]
                    c = best.center
                    self._note(args, c)
                    return _Target(point=(round(c[0]), round(c[1])), via="pixels", found=best)
            problems.append(f"no text {args.name!r} on screen (OCR)")
        raise InputProblem("; ".join(problems) + ": check the name with desktop_ax_snapshot or desktop_som")

    def _ocr_windows(self, args: DesktopArgs) -> list[Window | None]:
        """Where the pixel path reads text: the whole screen, or the named window and what covers it.

        With target_app the OCR reads only that window, so a label shown elsewhere cannot be hit; the
        windows stacked above it (its open menus, popups, dialogs) are read first, each on its own,
        because a menu's items drawn over the window's own text would otherwise merge into one line.
        """
        if not args.target_app:
            return [None]
        target = self._named_window(args)
        above = []
        for w in self.desktop.x().windows():
            if w.id == target.id:
                break
            if (
                w.x < target.x + target.width
                and target.x < w.x + w.width
                and w.y < target.y + target.height
                and target.y < w.y + w.height
            ):
                above.append(w)
        return [*above, target]

    def _note(self, args: DesktopArgs, center: tuple[float, float]) -> None:
        named = self.desktop.named
        named[(args.role, args.name, args.target_app, args.via)] = center
        while len(named) > 256:
            named.pop(next(iter(named)))

    async def _by_role_only(self, args: DesktopArgs) -> list[Candidate]:
        from aleph_desktop._query import find

        result = await find(self.desktop.atspi, role=args.role, name=None, app=args.target_app, max_results=2)
        elements = [e for e in result["elements"] if e.center is not None]
        if len(elements) != 1:
            raise InputProblem(f"{len(elements)} showing elements have role {args.role!r}: add a name")
        e = elements[0]
        assert e.bounds is not None
        x, y, w, h = e.bounds
        return [Candidate("ax", 1.0, x, y, w, h, e.name, e.role, e)]

    # -- acting ------------------------------------------------------------------------------

    async def _perform(self, args: DesktopArgs, target: _Target) -> dict[str, Any]:
        a = args.action
        x = self.desktop.x()
        detail: dict[str, Any] = {}
        if target.found is not None:
            detail["target"] = target.found.to_json()
        elif target.element is not None:
            detail["target"] = target.element.to_json()
        if a in ELEMENT:
            return {**detail, **await self._element_action(args, target)}
        if a == "focus_window":
            assert target.window is not None
            x.focus(target.window)
            return detail
        if a == "type_text":
            assert args.text is not None
            await self._check_typing_target(target)
            x.type_text(args.text)
            return {**detail, "typed_chars": len(args.text)}
        if a == "key_combo":
            try:
                syms = key_names_to_keysyms(args.keys)
            except ValueError as exc:
                raise InputProblem(str(exc)) from None
            if "+".join(k.lower() for k in args.keys) in ("ctrl+alt+backspace", "ctrl+alt+delete"):
                raise Refused("blocked: this key combination would end or reset the session")
            x.key_combo(syms)
            return {**detail, "keys": args.keys}
        point = target.point
        if a == "scroll":
            if point is None:
                point = x.pointer()
            x.scroll(*point, args.delta_x, args.delta_y)
            return {**detail, "at": list(point), "delta": [args.delta_x, args.delta_y]}
        if point is None:
            raise InputProblem(f"{a} found no point to act on")
        if a == "hover":
            x.move(*point)
        elif a == "drag":
            assert args.end_x is not None and args.end_y is not None and args.screenshot_id is not None
            end = self._point(args.screenshot_id, args.end_x, args.end_y)
            x.drag(point, end, _BUTTONS[args.button])
            detail["to"] = list(end)
        else:
            button = 3 if a == "right_click" else _BUTTONS[args.button]
            x.click(*point, button, 2 if a == "double_click" else 1)
        return {**detail, "at": list(point)}

    async def _check_typing_target(self, target: _Target) -> None:
        # A password field is never typed into by the agent, whatever the policy says.
        try:
            element = target.element or await focused(self.desktop.atspi)
        except AccessibilityUnavailable:
            return  # no accessibility here: the keyboard still works, only this check is skipped
        if element is not None and element.secure:
            raise Refused("typing into a password field is refused; let the person type it")

    async def _element_action(self, args: DesktopArgs, target: _Target) -> dict[str, Any]:
        x = self.desktop.x()
        element, point = target.element, target.point
        a = args.action
        if element is not None:
            done = await self._ax(args, element)
            if done is not None:
                return done
            target.via = "pixels"  # the element does not take this action semantically: use the pointer
        if point is None:
            raise InputProblem(f"{a}: the target has no accessible action and no on-screen box")
        if a == "set_value":
            assert args.text is not None
            if element is not None and element.secure:
                raise Refused("setting a password field is refused; let the person type it")
            x.click(*point, 1, 3)  # three clicks select the field's whole text, so typing replaces it
            await asyncio.sleep(0.05)
            x.type_text(args.text)
            return {"at": list(point), "fallback": "pointer"}
        x.click(*point, 1, 1)
        result: dict[str, Any] = {"at": list(point)}
        if element is not None:
            result["fallback"] = "pointer"
        return result

    async def _ax(self, args: DesktopArgs, element: Element) -> dict[str, Any] | None:
        atspi = self.desktop.atspi
        if args.action == "press":
            name = await atspi.do_action(element.ref)
            return None if name is None else {"ax_action": name}
        if args.action == "select":
            if await atspi.select(element.ref):
                return {"ax_action": "select"}
            name = await atspi.do_action(element.ref, ("select", "click", "activate", "press", "toggle"))
            return None if name is None else {"ax_action": name}
        assert args.text is not None
        if element.secure:
            raise Refused("setting a password field is refused; let the person type it")
        if element.role in _NUMBER_ROLES:
            try:
                number = float(args.text)
            except ValueError:
                raise InputProblem(f"{element.role} takes a number, got {args.text!r}") from None
            if await atspi.set_number(element.ref, number):
                return {"ax_action": "set_value", "value": await atspi.value(element)}
            return None
        if element.role == "combo box":
            return await self._choose(element, args.text)
        if await atspi.set_text(element.ref, args.text):
            value = await atspi.value(element)
            return {"ax_action": "set_text", "verified": value == args.text, "value": value}
        return None

    async def _choose(self, combo: Element, option: str) -> dict[str, Any] | None:
        atspi = self.desktop.atspi
        items = await atspi.matches(combo.ref, roles=["menu item", "list item"], showing=False, count=500)
        described = await asyncio.gather(*(atspi.describe(r, bounds=False) for r in items), return_exceptions=True)
        options = [e for e in described if isinstance(e, Element)]
        wanted = option.strip().lower()
        pick = next((e for e in options if e.name.strip().lower() == wanted), None)
        if pick is None:
            names = ", ".join(sorted({e.name for e in options if e.name})[:20])
            raise InputProblem(f"combo box {combo.name!r} has no option {option!r} (options: {names})")
        name = await atspi.do_action(pick.ref)
        return None if name is None else {"ax_action": f"choose {pick.name}"}

    # -- batch -------------------------------------------------------------------------------

    async def _batch(self, args: DesktopArgs) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        ctx = current_call()
        for index, action in enumerate(args.actions):
            sub = action.model_dump(exclude_defaults=True)
            sub["action"] = action.action
            if "observe" not in action.model_fields_set and index < len(args.actions) - 1:
                sub["observe"] = "id"  # one image per batch (the last action's), not one per step
            try:
                if ctx is not None:
                    # Each action passes the chokepoint under its own arguments and gets its own ledger row.
                    output = await ctx.subcall(self.NAME, sub)
                    data = getattr(output, "value", output)
                else:
                    data = await self.call(self.parse(sub))
                results.append({"index": index, "success": True, "data": data})
            except ToolError as exc:
                results.append({"index": index, "success": False, "error": str(exc)})
                break
        return {"results": results, "success": bool(results) and results[-1]["success"]}


def _center(element: Element | None) -> tuple[int, int] | None:
    if element is None or element.center is None:
        return None
    cx, cy = element.center
    return round(cx), round(cy)
