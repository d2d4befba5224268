"""Tools that open pages, read them and act on their elements."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Literal

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Response
from pydantic import Field, model_validator

from aleph import ToolArgs, ToolFacts
from aleph_browser._base import BrowserTool, SnapshotChoice, TargetArgs
from aleph_browser._manager import BrowserManager, BrowserProblem, PolicyRefusal, Tab
from aleph_browser._proxy import BLOCK_HEADER
from aleph_browser._snapshot import REF_TARGET, budget, delta, find

__all__ = [
    "BrowserClick",
    "BrowserDialog",
    "BrowserDrag",
    "BrowserFillForm",
    "BrowserHover",
    "BrowserNavigate",
    "BrowserOpen",
    "BrowserPressKey",
    "BrowserScroll",
    "BrowserSelect",
    "BrowserSnapshot",
    "BrowserType",
    "BrowserUpload",
    "BrowserWaitFor",
    "fill_field",
    "goto",
]

TAGS = ("browser",)


def _label(args: TargetArgs) -> str:
    return f"{args.element} ({args.target})" if args.element else args.target


async def goto(manager: BrowserManager, tab: Tab, url: str) -> str:
    """Navigate ``tab`` to ``url``; a policy block anywhere in the redirect chain raises :class:`PolicyRefusal`."""
    manager.check_url(url)
    session = tab.session
    mark = session.block_seq
    response: Response | None = None

    async def go() -> None:
        nonlocal response
        response = await tab.page.goto(url, wait_until="load")

    try:
        await manager.act(tab, go)
    except PlaywrightError:
        blocked = session.blocks_since(mark)
        if blocked:
            raise PolicyRefusal(f"navigation to {url} was stopped at {blocked[0][0]}: {blocked[0][1]}") from None
        raise
    if response is not None and response.headers.get(BLOCK_HEADER.lower()):
        why = (session.proxy.reason_for(response.url) if session.proxy else None) or "blocked by the origin policy"
        raise PolicyRefusal(f"navigation to {url} was stopped at {response.url}: {why}")
    status = f" (HTTP {response.status})" if response is not None and response.status >= 400 else ""
    return f"Navigated to {url}{status}."


class OpenArgs(ToolArgs):
    url: str = Field(default="about:blank", min_length=1, max_length=4096)
    """The http(s) URL to open (data: and about:blank also work)."""
    new_tab: bool = True
    """Open in a new tab (the current tab is reused when it is blank)."""
    snapshot: Literal["none", "delta", "full"] = "full"
    """Snapshot to return: "full" (default here), "delta" or "none"."""


class BrowserOpen(BrowserTool[OpenArgs]):
    NAME = "browser_open"
    DESCRIPTION = (
        "Open a URL in the browser (launching it if needed) in a new tab of your session and return the page's "
        "accessibility snapshot, whose [ref=eN] markers are the targets for browser_click, browser_type and the "
        "other actions. Subject to the origin policy; refusals say which rule blocked what."
    )
    Args = OpenArgs
    FACTS = ToolFacts(untrusted_output="web page", max_duration_ms=120_000, tags=(*TAGS, "network"))

    async def run(self, args: OpenArgs) -> str:
        self.manager.check_url(args.url)
        session = await self.manager.session()
        current = session.tabs.get(session.current or "")
        if current is not None and (not args.new_tab or current.page.url == "about:blank"):
            tab = current
        else:
            tab = await self.manager.new_tab(session)
        what = await goto(self.manager, tab, args.url) if args.url != "about:blank" else "Opened a blank tab."
        return await self.manager.report(tab, what, snapshot=args.snapshot)


class NavigateArgs(SnapshotChoice):
    url: str | None = Field(default=None, min_length=1, max_length=4096)
    """The URL to load in the current tab (leave out when using action)."""
    action: Literal["goto", "back", "forward", "reload"] = "goto"
    """goto (needs url), or back / forward / reload in the tab's history."""

    @model_validator(mode="after")
    def _needs_url(self) -> NavigateArgs:
        if self.action == "goto" and self.url is None:
            raise ValueError("url is required when action is goto")
        return self


class BrowserNavigate(BrowserTool[NavigateArgs]):
    NAME = "browser_navigate"
    DESCRIPTION = (
        "Load a URL in the current tab, or go back, forward or reload. Every request, redirect hop and subresource "
        "is checked against the origin policy; a blocked navigation fails naming the rule."
    )
    Args = NavigateArgs
    FACTS = ToolFacts(untrusted_output="web page", max_duration_ms=120_000, tags=(*TAGS, "network"))

    async def run(self, args: NavigateArgs) -> str:
        tab = await self.manager.tab()
        if args.action == "goto":
            assert args.url is not None
            what = await goto(self.manager, tab, args.url)
        else:
            page = tab.page
            step = {"back": page.go_back, "forward": page.go_forward, "reload": page.reload}[args.action]
            await self.manager.act(tab, step)
            what = f"Went {args.action}." if args.action != "reload" else "Reloaded."
        return await self.manager.report(tab, what, snapshot=args.snapshot)


class SnapshotArgs(ToolArgs):
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Snapshot only this element's subtree (a ref like e4, or a selector)."""
    depth: int | None = Field(default=None, ge=1, le=100)
    """Limit the tree to this many levels."""
    max_chars: int | None = Field(default=None, ge=500, le=2_000_000)
    """Character budget (default [browser] max_snapshot_chars); longer snapshots end with a truncation marker."""
    mode: Literal["full", "delta"] = "full"
    """full, or delta: only nodes added, removed or changed since this tab's previous snapshot."""
    find: str | None = Field(default=None, min_length=1, max_length=200)
    """Only the lines containing this text (case-insensitive), each with its ancestors and refs."""

    @model_validator(mode="after")
    def _delta_is_whole_page(self) -> SnapshotArgs:
        if self.mode == "delta" and (self.target is not None or self.depth is not None or self.find is not None):
            raise ValueError("mode delta compares whole-page snapshots; leave out target, depth and find")
        return self


class BrowserSnapshot(BrowserTool[SnapshotArgs]):
    NAME = "browser_snapshot"
    DESCRIPTION = (
        "Return the current tab's accessibility snapshot as YAML: roles, names and [ref=eN] markers to use as "
        "`target` in actions. Narrow it with target (a subtree), depth, find (only matching lines) and max_chars, "
        "or ask for mode=delta to get only what changed since the last snapshot. Refs stay valid until the page "
        "changes."
    )
    Args = SnapshotArgs
    FACTS = ToolFacts(untrusted_output="web page", idempotent=True, max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: SnapshotArgs) -> str:
        tab = await self.manager.tab()
        limit = args.max_chars or self.manager.config.max_snapshot_chars
        if args.mode == "delta":
            previous = tab.last_snapshot
            full = await self.manager.snapshot(tab)
            if previous is not None:
                change = delta(previous, full)
                body = budget(change.text, limit, hint="call browser_snapshot with mode full")
                return f"Page: {tab.page.url} (tab {tab.id})\n{body}"
            return f"Page: {tab.page.url} (tab {tab.id})\n# no earlier snapshot of this tab: full snapshot\n" + budget(
                full, limit
            )
        text = await self.manager.snapshot(tab, target=args.target, depth=args.depth)
        if args.find is not None:
            text = find(text, args.find)
        return f"Page: {tab.page.url} (tab {tab.id})\n" + budget(text, limit)


class ClickArgs(TargetArgs):
    double: bool = False
    """Double-click instead of a single click."""
    button: Literal["left", "right", "middle"] = "left"
    """Mouse button."""


class BrowserClick(BrowserTool[ClickArgs]):
    NAME = "browser_click"
    DESCRIPTION = (
        "Click an element named by a snapshot ref (e4) or a selector. Returns what happened, the page, new console "
        "errors, any dialog that opened, and a delta snapshot."
    )
    Args = ClickArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: ClickArgs) -> str:
        tab = await self.manager.tab()
        resolved = await self.manager.resolve(tab, args.target)
        locator = resolved[0]
        if args.double:
            await self.manager.act(tab, lambda: locator.dblclick(button=args.button), verify=resolved)
        else:
            await self.manager.act(tab, lambda: locator.click(button=args.button), verify=resolved)
        verb = "Double-clicked" if args.double else "Clicked"
        return await self.manager.report(tab, f"{verb} {_label(args)}.", snapshot=args.snapshot)


class TypeArgs(TargetArgs):
    text: str = Field(max_length=100_000)
    """Text to enter; it replaces the field's content."""
    submit: bool = False
    """Press Enter afterwards."""
    slowly: bool = False
    """Type one key at a time (fires key handlers) instead of filling at once."""


class BrowserType(BrowserTool[TypeArgs]):
    NAME = "browser_type"
    DESCRIPTION = (
        "Type text into an editable element (input, textarea, contenteditable) named by a ref or selector, "
        "replacing its content; optionally press Enter to submit."
    )
    Args = TypeArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: TypeArgs) -> str:
        tab = await self.manager.tab()
        resolved = await self.manager.resolve(tab, args.target)
        locator = resolved[0]

        async def type_it() -> None:
            if args.slowly:
                await locator.fill("")
                await locator.press_sequentially(args.text)
            else:
                await locator.fill(args.text)
            if args.submit:
                await locator.press("Enter")

        await self.manager.act(tab, type_it, verify=resolved)
        what = f"Typed {len(args.text)} characters into {_label(args)}" + (
            " and pressed Enter." if args.submit else "."
        )
        return await self.manager.report(tab, what, snapshot=args.snapshot)


class FormField(ToolArgs):
    target: str = Field(min_length=1, max_length=1000)
    """Ref or selector of the field."""
    value: str = Field(max_length=100_000)
    """Text for inputs; option value or label for selects; "true"/"false" for checkboxes, radios and switches."""
    element: str | None = Field(default=None, max_length=500)
    """Human-readable field name."""


class FillFormArgs(SnapshotChoice):
    fields: list[FormField] = Field(min_length=1, max_length=100)
    """The fields to fill, in order."""


_FIELD_KIND = """e => {
  const type = (e.getAttribute('type') || '').toLowerCase(), role = e.getAttribute('role');
  if (type === 'checkbox' || type === 'radio' || ['checkbox', 'radio', 'switch'].includes(role)) return 'check';
  if (e.tagName === 'SELECT') return 'select';
  return 'fill';
}"""
_TRUE = ("true", "1", "yes", "on", "checked")


async def fill_field(manager: BrowserManager, tab: Tab, target: str, value: str) -> None:
    """Fill one form field the way its kind needs (text, select or checkbox/radio)."""
    locator = await manager.locate(tab, target)
    kind = await locator.evaluate(_FIELD_KIND)
    if kind == "check":
        await locator.set_checked(value.strip().lower() in _TRUE)
    elif kind == "select":
        await locator.select_option(value)
    else:
        await locator.fill(value)


class BrowserFillForm(BrowserTool[FillFormArgs]):
    NAME = "browser_fill_form"
    DESCRIPTION = (
        "Fill several form fields in one call: text inputs get the text, selects the option with that value or "
        'label, checkboxes/radios/switches are set from "true"/"false". Does not submit the form.'
    )
    Args = FillFormArgs
    FACTS = ToolFacts(max_duration_ms=120_000, tags=TAGS)

    def sub_calls(self, input: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Each field as the typing it is: a rule on ``browser_type`` holds for every field filled."""
        return [
            ("browser_type", {"target": f.get("target"), "text": f.get("value")})
            for f in input.get("fields") or []
            if isinstance(f, dict)
        ]

    async def run(self, args: FillFormArgs) -> str:
        tab = await self.manager.tab()
        for i, field in enumerate(args.fields, 1):
            try:
                await self.manager.act(tab, partial(fill_field, self.manager, tab, field.target, field.value))
            except BrowserProblem as exc:
                raise BrowserProblem(f"field {i} ({field.element or field.target}): {exc}") from None
        return await self.manager.report(tab, f"Filled {len(args.fields)} field(s).", snapshot=args.snapshot)


class SelectArgs(TargetArgs):
    values: list[str] = Field(min_length=1, max_length=50)
    """Option values or labels to select (several for a multiple select)."""


class BrowserSelect(BrowserTool[SelectArgs]):
    NAME = "browser_select"
    DESCRIPTION = "Select one or more options of a <select> element by option value or visible label."
    Args = SelectArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: SelectArgs) -> str:
        tab = await self.manager.tab()
        resolved = await self.manager.resolve(tab, args.target)
        locator = resolved[0]
        chosen: list[str] = []

        async def pick() -> None:
            chosen.extend(await locator.select_option(args.values))

        await self.manager.act(tab, pick, verify=resolved)
        return await self.manager.report(tab, f"Selected {chosen} in {_label(args)}.", snapshot=args.snapshot)


class PressKeyArgs(SnapshotChoice):
    key: str = Field(min_length=1, max_length=64)
    """Key or chord such as Enter, ArrowDown, Escape, Control+A."""
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Element to focus first (ref or selector); default: whatever has focus."""


class BrowserPressKey(BrowserTool[PressKeyArgs]):
    NAME = "browser_press_key"
    DESCRIPTION = "Press a key or chord (Enter, Tab, ArrowDown, Escape, Control+A) on the focused element or a target."
    Args = PressKeyArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: PressKeyArgs) -> str:
        tab = await self.manager.tab()
        if args.target is not None:
            resolved = await self.manager.resolve(tab, args.target)
            locator = resolved[0]
            await self.manager.act(tab, lambda: locator.press(args.key), verify=resolved)
        else:
            await self.manager.act(tab, lambda: tab.page.keyboard.press(args.key))
        return await self.manager.report(tab, f"Pressed {args.key}.", snapshot=args.snapshot)


class BrowserHover(BrowserTool[TargetArgs]):
    NAME = "browser_hover"
    DESCRIPTION = "Move the mouse over an element (ref or selector), e.g. to open a menu or show a tooltip."
    Args = TargetArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: TargetArgs) -> str:
        tab = await self.manager.tab()
        resolved = await self.manager.resolve(tab, args.target)
        await self.manager.act(tab, resolved[0].hover, verify=resolved)
        return await self.manager.report(tab, f"Hovered {_label(args)}.", snapshot=args.snapshot)


class DragArgs(SnapshotChoice):
    source: str = Field(min_length=1, max_length=1000)
    """Ref or selector of the element to drag."""
    target: str = Field(min_length=1, max_length=1000)
    """Ref or selector of the element to drop onto."""
    source_element: str | None = Field(default=None, max_length=500)
    """Human-readable description of the dragged element."""
    target_element: str | None = Field(default=None, max_length=500)
    """Human-readable description of the drop target."""


class BrowserDrag(BrowserTool[DragArgs]):
    NAME = "browser_drag"
    DESCRIPTION = "Drag one element (ref or selector) and drop it onto another (HTML5 drag and drop and mouse drags)."
    Args = DragArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: DragArgs) -> str:
        tab = await self.manager.tab()
        source = await self.manager.locate(tab, args.source)
        target = await self.manager.locate(tab, args.target)
        await self.manager.act(tab, lambda: source.drag_to(target))
        what = f"Dragged {args.source_element or args.source} onto {args.target_element or args.target}."
        return await self.manager.report(tab, what, snapshot=args.snapshot)


class ScrollArgs(SnapshotChoice):
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Scroll this element into view (ref or selector)."""
    direction: Literal["down", "up", "left", "right", "top", "bottom"] = "down"
    """Without target: scroll the page this way (top/bottom jump to the ends)."""
    amount: int = Field(default=600, ge=1, le=100_000)
    """Pixels to scroll for down/up/left/right."""


_SETTLED_OFFSET = """(before) => new Promise((resolve) => {
  const start = performance.now();
  let last = [-1, -1], still = 0;
  const tick = () => {
    const now = [Math.round(window.scrollX), Math.round(window.scrollY)];
    const moved = before === null || now[0] !== before[0] || now[1] !== before[1];
    still = moved && now[0] === last[0] && now[1] === last[1] ? still + 1 : 0;
    last = now;
    if (still >= 2 || performance.now() - start > 1000) resolve(now); else requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})"""


class BrowserScroll(BrowserTool[ScrollArgs]):
    NAME = "browser_scroll"
    DESCRIPTION = "Scroll an element into view, or scroll the page up/down/left/right by pixels or to the top/bottom."
    Args = ScrollArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: ScrollArgs) -> str:
        tab = await self.manager.tab()
        page = tab.page
        before = None  # the offset before a wheel scroll; None when the scroll is synchronous
        if args.target is not None:
            locator = await self.manager.locate(tab, args.target)
            await self.manager.act(tab, locator.scroll_into_view_if_needed)
            what = f"Scrolled {args.target} into view"
        elif args.direction in ("top", "bottom"):
            script = (
                "window.scrollTo(0, 0)" if args.direction == "top" else "window.scrollTo(0, document.body.scrollHeight)"
            )
            await self.manager.act(tab, lambda: page.evaluate(script))
            what = f"Scrolled to the {args.direction}"
        else:
            dx, dy = {"down": (0, 1), "up": (0, -1), "right": (1, 0), "left": (-1, 0)}[args.direction]
            before = await page.evaluate("[Math.round(window.scrollX), Math.round(window.scrollY)]")
            await self.manager.act(tab, lambda: page.mouse.wheel(dx * args.amount, dy * args.amount))
            what = f"Scrolled {args.direction} {args.amount}px"
        # A wheel scroll lands asynchronously (the compositor applies it a frame or more later): read the
        # offset once it has moved and then held still for two frames, waiting at most one second (a page
        # that cannot scroll further never moves, so the wait is bounded).
        x, y = await page.evaluate(_SETTLED_OFFSET, before)
        return await self.manager.report(tab, f"{what}; page offset now x={x}, y={y}.", snapshot=args.snapshot)


class UploadArgs(TargetArgs):
    paths: list[str] = Field(min_length=1, max_length=20)
    """Workspace-relative files to upload (no '..', no symlinks)."""


class BrowserUpload(BrowserTool[UploadArgs]):
    NAME = "browser_upload"
    DESCRIPTION = (
        "Upload workspace files through a file input (or an element that opens a file chooser). Paths are "
        "workspace-relative; '..', symlinks and files outside the workspace are refused."
    )
    Args = UploadArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=(*TAGS, "filesystem"))

    async def run(self, args: UploadArgs) -> str:
        files = [str(self.manager.path(p, must_exist=True)) for p in args.paths]
        tab = await self.manager.tab()
        locator = await self.manager.locate(tab, args.target)
        is_input = await locator.evaluate("e => e.tagName === 'INPUT' && (e.type || '').toLowerCase() === 'file'")
        if is_input:
            await self.manager.act(tab, lambda: locator.set_input_files(files))
        else:

            async def choose() -> None:
                async with tab.page.expect_file_chooser() as info:
                    await locator.click()
                await (await info.value).set_files(files)

            await self.manager.act(tab, choose)
        return await self.manager.report(
            tab, f"Uploaded {', '.join(args.paths)} via {_label(args)}.", snapshot=args.snapshot
        )


class DialogArgs(SnapshotChoice):
    action: Literal["accept", "dismiss"]
    """accept (OK) or dismiss (Cancel) the open dialog; with no dialog open, applies to the next one."""
    prompt_text: str | None = Field(default=None, max_length=10_000)
    """Text to answer a prompt() dialog with when accepting."""


class BrowserDialog(BrowserTool[DialogArgs]):
    NAME = "browser_dialog"
    DESCRIPTION = (
        "Answer the JavaScript dialog (alert, confirm, prompt, beforeunload) that is blocking the current tab; "
        "when none is open, the answer is kept for the next dialog of the tab."
    )
    Args = DialogArgs
    FACTS = ToolFacts(max_duration_ms=30_000, tags=TAGS)

    async def run(self, args: DialogArgs) -> str:
        tab = await self.manager.tab()
        dialog = tab.dialog
        if dialog is None:
            tab.dialog_plan = (args.action, args.prompt_text)
            return await self.manager.report(
                tab, f"No dialog is open; the next dialog in tab {tab.id} will be {args.action}ed.", snapshot="none"
            )
        kind, message = dialog.type, dialog.message
        tab.dialog = None
        tab.dialog_opened.clear()
        if args.action == "accept":
            await dialog.accept(args.prompt_text) if args.prompt_text is not None else await dialog.accept()
        else:
            await dialog.dismiss()
        await asyncio.sleep(0)  # let the page's handler run on before the snapshot
        what = f"{args.action.capitalize()}ed the {kind} dialog {message[:200]!r}."
        return await self.manager.report(tab, what, snapshot=args.snapshot)


class WaitForArgs(SnapshotChoice):
    text: str | None = Field(default=None, min_length=1, max_length=1000)
    """Wait until this text is visible."""
    text_gone: str | None = Field(default=None, min_length=1, max_length=1000)
    """Wait until this text is no longer visible."""
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Wait for this element (ref or selector) to reach `state`."""
    state: Literal["visible", "hidden", "attached", "detached"] = "visible"
    """State awaited for `target`."""
    url: str | None = Field(default=None, min_length=1, max_length=4096)
    """Wait until the tab's URL matches this glob (e.g. **/done)."""
    load_state: Literal["load", "domcontentloaded", "networkidle"] | None = None
    """Wait for this page load state."""
    seconds: float | None = Field(default=None, gt=0, le=30)
    """Just wait this long (at most 30 s)."""
    timeout_ms: int = Field(default=10_000, ge=100, le=120_000)
    """Give up after this long."""

    @model_validator(mode="after")
    def _one_condition(self) -> WaitForArgs:
        given = [self.text, self.text_gone, self.target, self.url, self.load_state, self.seconds]
        if all(v is None for v in given):
            raise ValueError("give one of text, text_gone, target, url, load_state or seconds")
        return self


class BrowserWaitFor(BrowserTool[WaitForArgs]):
    NAME = "browser_wait_for"
    DESCRIPTION = (
        "Wait until text appears or disappears, an element reaches a state, the URL matches, a load state is "
        "reached, or a number of seconds passes; then return the page."
    )
    Args = WaitForArgs
    FACTS = ToolFacts(untrusted_output="web page", idempotent=True, max_duration_ms=150_000, tags=TAGS)

    async def run(self, args: WaitForArgs) -> str:
        tab = await self.manager.tab()
        page, timeout = tab.page, args.timeout_ms
        self.manager.no_dialog(tab)
        done: list[str] = []
        if args.seconds is not None:
            await asyncio.sleep(args.seconds)
            done.append(f"waited {args.seconds}s")
        if args.text is not None:
            await page.get_by_text(args.text).first.wait_for(state="visible", timeout=timeout)
            done.append(f"text {args.text!r} is visible")
        if args.text_gone is not None:
            await page.get_by_text(args.text_gone).first.wait_for(state="hidden", timeout=timeout)
            done.append(f"text {args.text_gone!r} is gone")
        if args.target is not None:
            selector = f"aria-ref={args.target}" if _is_ref(args.target) else args.target
            await page.locator(selector).first.wait_for(state=args.state, timeout=timeout)
            done.append(f"{args.target} is {args.state}")
        if args.url is not None:
            await page.wait_for_url(args.url, timeout=timeout)
            done.append(f"URL matches {args.url!r}")
        if args.load_state is not None:
            await page.wait_for_load_state(args.load_state, timeout=timeout)
            done.append(f"load state {args.load_state}")
        return await self.manager.report(tab, "Done: " + "; ".join(done) + ".", snapshot=args.snapshot)


def _is_ref(target: str) -> bool:
    return REF_TARGET.match(target) is not None
