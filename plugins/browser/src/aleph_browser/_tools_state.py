"""Tools that read or change browser state: script, logs, tabs, captures, viewport, cookies, sessions, profiles."""

from __future__ import annotations

import base64
import json
import shutil
import stat
from typing import Any, Literal

from pydantic import Field, model_validator

from aleph import ToolArgs, ToolFacts
from aleph_browser._base import BrowserTool, SnapshotChoice
from aleph_browser._config import BrowserConfig
from aleph_browser._manager import BrowserManager, BrowserProblem, check_profile_name
from aleph_browser._session import session_key
from aleph_browser._snapshot import budget
from aleph_browser._tools_page import goto

__all__ = [
    "BrowserConsole",
    "BrowserCookies",
    "BrowserEmulate",
    "BrowserEvaluate",
    "BrowserNetwork",
    "BrowserPdf",
    "BrowserProfile",
    "BrowserResize",
    "BrowserScreenshot",
    "BrowserSession",
    "BrowserTabs",
    "evaluate_facts",
]

TAGS = ("browser",)
_MAX_INLINE_IMAGE = 5 * 1024 * 1024


class EvaluateArgs(ToolArgs):
    function: str = Field(min_length=1, max_length=50_000)
    """JavaScript: an expression, or a function like `() => document.title` (`(element) => ...` with target)."""
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Run the function on this element (ref or selector)."""
    element: str | None = Field(default=None, max_length=500)
    """Human-readable description of the element."""
    max_chars: int = Field(default=20_000, ge=100, le=1_000_000)
    """Cut the JSON result to this many characters."""


def evaluate_facts(config: BrowserConfig) -> ToolFacts:
    """The facts browser_evaluate declares under ``config``."""
    return ToolFacts(requires_approval=config.evaluate_requires_approval, max_duration_ms=60_000, tags=(*TAGS, "code"))


class BrowserEvaluate(BrowserTool[EvaluateArgs]):
    NAME = "browser_evaluate"
    DESCRIPTION = (
        "Run JavaScript in the current page (or on one element) and return its JSON result. Page script can do "
        "anything the page can, so each call asks a human for approval unless [browser] evaluate_requires_approval "
        "is false."
    )
    Args = EvaluateArgs
    FACTS = ToolFacts(requires_approval=True, max_duration_ms=60_000, tags=(*TAGS, "code"))

    def __init__(self, manager: BrowserManager) -> None:
        super().__init__(manager)
        # The approval floor is configurable; an instance attribute shadows the class default.
        self.FACTS = evaluate_facts(manager.config)  # type: ignore[misc]

    async def run(self, args: EvaluateArgs) -> str:
        tab = await self.manager.tab()
        if args.target is not None:
            locator = await self.manager.locate(tab, args.target)
            value = await locator.evaluate(args.function)
        else:
            self.manager.no_dialog(tab)
            value = await tab.page.evaluate(args.function)
        text = json.dumps(value, ensure_ascii=False, default=str, indent=None)
        shown = budget(text, args.max_chars, hint="return a smaller value from the function")
        return f"Result:\n{shown}\nPage: {tab.page.url} (tab {tab.id})"


class ConsoleArgs(ToolArgs):
    level: Literal["all", "error", "warning", "info", "debug"] = "all"
    """Only messages of this level (error includes uncaught page errors)."""
    limit: int = Field(default=100, ge=1, le=1000)
    """Return at most this many of the most recent messages."""


class BrowserConsole(BrowserTool[ConsoleArgs]):
    NAME = "browser_console"
    DESCRIPTION = (
        "List the current tab's recent console messages and uncaught page errors (a bounded log of the newest "
        "[browser] console_buffer entries), optionally only errors or warnings."
    )
    Args = ConsoleArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=TAGS)

    async def run(self, args: ConsoleArgs) -> dict[str, Any]:
        tab = await self.manager.tab()
        wanted = {
            "error": ("error", "pageerror"),
            "warning": ("warning",),
            "info": ("info", "log"),
            "debug": ("debug",),
        }
        entries = [e for e in tab.console if args.level == "all" or e.level in wanted[args.level]]
        return {
            "tab": tab.id,
            "messages": [{"level": e.level, "text": e.text, "location": e.location} for e in entries[-args.limit :]],
            "matching": len(entries),
            "dropped_before_buffer": max(0, tab.seq - len(tab.console)),
        }


class NetworkArgs(ToolArgs):
    contains: str | None = Field(default=None, min_length=1, max_length=500)
    """Only requests whose URL contains this text."""
    failed_only: bool = False
    """Only failed or blocked requests and HTTP errors (status >= 400)."""
    limit: int = Field(default=100, ge=1, le=1000)
    """Return at most this many of the most recent requests."""


class BrowserNetwork(BrowserTool[NetworkArgs]):
    NAME = "browser_network"
    DESCRIPTION = (
        "List the current tab's recent requests (method, URL, resource type, status, failure, and the origin-policy "
        "rule for blocked ones) from a bounded log."
    )
    Args = NetworkArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=TAGS)

    async def run(self, args: NetworkArgs) -> dict[str, Any]:
        tab = await self.manager.tab()
        entries = [
            e
            for e in tab.network
            if (args.contains is None or args.contains in e.url)
            and (not args.failed_only or e.failure or e.blocked or (e.status or 0) >= 400)
        ]
        return {
            "tab": tab.id,
            "requests": [{k: v for k, v in vars_of(e).items() if v is not None} for e in entries[-args.limit :]],
            "matching": len(entries),
        }


def vars_of(entry: Any) -> dict[str, Any]:
    """A slotted dataclass as a dict."""
    return {name: getattr(entry, name) for name in entry.__slots__}


class TabsArgs(ToolArgs):
    action: Literal["list", "new", "select", "close"] = "list"
    """list the session's tabs, open a new one, make one current, or close one."""
    tab: str | None = Field(default=None, pattern=r"^t\d{1,6}$")
    """Tab id (t1, t2 ...) for select and close; close defaults to the current tab."""
    url: str | None = Field(default=None, min_length=1, max_length=4096)
    """URL to open in the new tab."""


class BrowserTabs(BrowserTool[TabsArgs]):
    NAME = "browser_tabs"
    DESCRIPTION = (
        "List, open, select or close the tabs of your browser session (other agent sessions' tabs are never "
        "visible). It both reads and acts, so it is declared as mutating."
    )
    Args = TabsArgs
    FACTS = ToolFacts(max_duration_ms=120_000, tags=TAGS)

    async def run(self, args: TabsArgs) -> Any:
        manager = self.manager
        session = await manager.session()
        if args.action == "new":
            if args.url is not None:
                manager.check_url(args.url)
            tab = await manager.new_tab(session)
            if args.url is not None:
                await goto(manager, tab, args.url)
        elif args.action in ("select", "close"):
            tab_id = args.tab or session.current
            if tab_id is None or tab_id not in session.tabs:
                raise BrowserProblem(
                    f"no tab {tab_id!r} in this session; open tabs: {', '.join(session.tabs) or 'none'}"
                )
            if args.action == "select":
                session.current = tab_id
                await session.tabs[tab_id].page.bring_to_front()
            else:
                await session.tabs[tab_id].page.close()
        tabs = []
        for tab_id, tab in session.tabs.items():
            tabs.append(
                {
                    "id": tab_id,
                    "url": tab.page.url,
                    "title": await tab.page.title() if tab.dialog is None else "",
                    "current": tab_id == session.current,
                }
            )
        session.opened.clear()
        return {"action": args.action, "tabs": tabs}


class ScreenshotArgs(ToolArgs):
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Capture only this element (ref or selector)."""
    full_page: bool = False
    """Capture the whole scrollable page, not just the viewport."""
    format: Literal["png", "jpeg"] = "png"
    """Image format."""
    path: str | None = Field(default=None, min_length=1, max_length=1024)
    """Save to this workspace-relative file instead of returning base64."""


class BrowserScreenshot(BrowserTool[ScreenshotArgs]):
    NAME = "browser_screenshot"
    DESCRIPTION = (
        "Take a PNG or JPEG screenshot of the viewport, the full page or one element; save it to a workspace file "
        "or get it back as base64 (up to 5 MB). Use browser_snapshot to find refs to act on, not screenshots. "
        "Declared mutating because it can write a file."
    )
    Args = ScreenshotArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=(*TAGS, "filesystem"))

    async def run(self, args: ScreenshotArgs) -> dict[str, Any]:
        tab = await self.manager.tab()
        self.manager.no_dialog(tab)
        dest = self.manager.path(args.path, must_exist=False) if args.path else None
        if args.target is not None:
            locator = await self.manager.locate(tab, args.target)
            data = await locator.screenshot(type=args.format)
        else:
            data = await tab.page.screenshot(type=args.format, full_page=args.full_page)
        if dest is not None:
            dest.write_bytes(data)
            return {"path": args.path, "bytes": len(data), "format": args.format, "url": tab.page.url}
        if len(data) > _MAX_INLINE_IMAGE:
            raise BrowserProblem(f"the screenshot is {len(data):,} bytes; give a path to save it in the workspace")
        return {
            "format": args.format,
            "bytes": len(data),
            "base64": base64.b64encode(data).decode(),
            "url": tab.page.url,
        }


class PdfArgs(ToolArgs):
    path: str = Field(min_length=1, max_length=1024)
    """Workspace-relative file to write (e.g. out/page.pdf)."""
    paper: Literal["A4", "Letter", "Legal", "A3"] = "A4"
    """Paper size."""
    landscape: bool = False
    """Landscape orientation."""
    print_background: bool = True
    """Include background colours and images."""


class BrowserPdf(BrowserTool[PdfArgs]):
    NAME = "browser_pdf"
    DESCRIPTION = "Print the current page to a PDF file in the workspace (headless Chromium's print to PDF)."
    Args = PdfArgs
    FACTS = ToolFacts(max_duration_ms=120_000, tags=(*TAGS, "filesystem"))

    async def run(self, args: PdfArgs) -> dict[str, Any]:
        dest = self.manager.path(args.path, must_exist=False)
        tab = await self.manager.tab()
        self.manager.no_dialog(tab)
        data = await tab.page.pdf(format=args.paper, landscape=args.landscape, print_background=args.print_background)
        dest.write_bytes(data)
        return {"path": args.path, "bytes": len(data), "url": tab.page.url}


class ResizeArgs(SnapshotChoice):
    width: int = Field(ge=100, le=7680)
    """Viewport width in CSS pixels."""
    height: int = Field(ge=100, le=4320)
    """Viewport height in CSS pixels."""
    snapshot: Literal["none", "delta", "full"] = "none"
    """Snapshot to return after resizing."""


class BrowserResize(BrowserTool[ResizeArgs]):
    NAME = "browser_resize"
    DESCRIPTION = "Resize the current tab's viewport (e.g. 390x844 for a phone layout, 1920x1080 for desktop)."
    Args = ResizeArgs
    FACTS = ToolFacts(max_duration_ms=30_000, tags=TAGS)

    async def run(self, args: ResizeArgs) -> str:
        tab = await self.manager.tab()
        await tab.page.set_viewport_size({"width": args.width, "height": args.height})
        return await self.manager.report(tab, f"Viewport is now {args.width}x{args.height}.", snapshot=args.snapshot)


class Geolocation(ToolArgs):
    latitude: float = Field(ge=-90, le=90)
    """Degrees north."""
    longitude: float = Field(ge=-180, le=180)
    """Degrees east."""


class EmulateArgs(ToolArgs):
    color_scheme: Literal["light", "dark", "no-preference"] | None = None
    """prefers-color-scheme to report."""
    reduced_motion: Literal["reduce", "no-preference"] | None = None
    """prefers-reduced-motion to report."""
    media: Literal["screen", "print"] | None = None
    """CSS media type."""
    offline: bool | None = None
    """Cut (true) or restore (false) the session's network."""
    geolocation: Geolocation | None = None
    """Position to report to the Geolocation API (the permission is granted)."""

    @model_validator(mode="after")
    def _something(self) -> EmulateArgs:
        if all(v is None for v in (self.color_scheme, self.reduced_motion, self.media, self.offline, self.geolocation)):
            raise ValueError("give at least one of color_scheme, reduced_motion, media, offline or geolocation")
        return self


class BrowserEmulate(BrowserTool[EmulateArgs]):
    NAME = "browser_emulate"
    DESCRIPTION = (
        "Emulate device conditions in your session: dark/light colour scheme, reduced motion, print media, offline "
        "mode, or a geolocation."
    )
    Args = EmulateArgs
    FACTS = ToolFacts(max_duration_ms=30_000, tags=TAGS)

    async def run(self, args: EmulateArgs) -> dict[str, Any]:
        tab = await self.manager.tab()
        context = tab.page.context
        media: dict[str, Any] = {}
        if args.color_scheme is not None:
            media["color_scheme"] = args.color_scheme
        if args.reduced_motion is not None:
            media["reduced_motion"] = args.reduced_motion
        if args.media is not None:
            media["media"] = args.media
        if media:
            await tab.page.emulate_media(**media)
        if args.offline is not None:
            await context.set_offline(args.offline)
        if args.geolocation is not None:
            await context.grant_permissions(["geolocation"])
            await context.set_geolocation(args.geolocation.model_dump())
        applied = args.model_dump(exclude_none=True)
        return {"tab": tab.id, "applied": applied}


class CookieSpec(ToolArgs):
    name: str = Field(min_length=1, max_length=256)
    """Cookie name."""
    value: str = Field(max_length=4096)
    """Cookie value."""
    url: str | None = Field(default=None, min_length=1, max_length=4096)
    """URL the cookie belongs to (or give domain and path)."""
    domain: str | None = Field(default=None, min_length=1, max_length=256)
    """Cookie domain (with path), instead of url."""
    path: str | None = Field(default=None, min_length=1, max_length=1024)
    """Cookie path (with domain)."""
    expires: float | None = None
    """Unix time in seconds; omit for a session cookie."""
    http_only: bool = False
    """Hidden from page JavaScript."""
    secure: bool = False
    """Only sent over https."""
    same_site: Literal["Strict", "Lax", "None"] | None = None
    """SameSite attribute."""

    @model_validator(mode="after")
    def _where(self) -> CookieSpec:
        if self.url is None and (self.domain is None or self.path is None):
            raise ValueError("give url, or domain and path")
        return self


class CookiesArgs(ToolArgs):
    action: Literal["get", "set", "clear"] = "get"
    """get cookies, set some, or clear (all, or those matching name/domain)."""
    urls: list[str] = Field(default_factory=list, max_length=20)
    """For get: only cookies that would be sent to these URLs."""
    cookies: list[CookieSpec] = Field(default_factory=list, max_length=50)
    """For set: the cookies to add."""
    name: str | None = Field(default=None, min_length=1, max_length=256)
    """For clear: only cookies with this name."""
    domain: str | None = Field(default=None, min_length=1, max_length=256)
    """For clear: only cookies of this domain."""


class BrowserCookies(BrowserTool[CookiesArgs]):
    NAME = "browser_cookies"
    DESCRIPTION = (
        "Get, set or clear the cookies of your browser session. It both reads and writes, so it is declared as "
        "mutating (not idempotent)."
    )
    Args = CookiesArgs
    FACTS = ToolFacts(max_duration_ms=30_000, tags=TAGS)

    async def run(self, args: CookiesArgs) -> dict[str, Any]:
        session = await self.manager.session()
        context = session.context
        assert context is not None
        if args.action == "set":
            if not args.cookies:
                raise BrowserProblem("action set needs at least one entry in cookies")
            cookies: list[Any] = []
            for c in args.cookies:
                item: dict[str, Any] = {"name": c.name, "value": c.value, "httpOnly": c.http_only, "secure": c.secure}
                for key, value in (("url", c.url), ("domain", c.domain), ("path", c.path), ("expires", c.expires)):
                    if value is not None:
                        item[key] = value
                if c.same_site is not None:
                    item["sameSite"] = c.same_site
                cookies.append(item)
            await context.add_cookies(cookies)
        elif args.action == "clear":
            options = {k: v for k, v in (("name", args.name), ("domain", args.domain)) if v is not None}
            await context.clear_cookies(**options)
        found = await context.cookies(args.urls or None) if args.action == "get" else await context.cookies()
        return {"action": args.action, "cookies": [dict(c) for c in found[:500]], "count": len(found)}


class SessionArgs(ToolArgs):
    action: Literal["info", "reset"] = "info"
    """info: your session's key, profile and tabs; reset: close all your tabs and start a fresh context."""


class BrowserSession(BrowserTool[SessionArgs]):
    NAME = "browser_session"
    DESCRIPTION = (
        "Show your browser session (its key, ephemeral or named profile, open tabs) or reset it: close every tab "
        "and forget cookies and storage of an ephemeral session. Sessions of other agents are never visible."
    )
    Args = SessionArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=TAGS)

    async def run(self, args: SessionArgs) -> dict[str, Any]:
        manager = self.manager
        if args.action == "reset":
            closed = await manager.close_session()
            return {"action": "reset", "session": session_key(), "closed": closed}
        session = manager.existing_session()
        tabs = []
        if session is not None:
            tabs = [{"id": t.id, "url": t.page.url, "current": t.id == session.current} for t in session.tabs.values()]
        return {
            "action": "info",
            "session": session_key(),
            "profile": manager.session_profile() or "ephemeral",
            "browser_running": manager.running,
            "tabs": tabs,
        }


class ProfileArgs(ToolArgs):
    action: Literal["list", "create", "delete", "use", "ephemeral"] = "list"
    """list profiles; create or delete one; use one for your session; or go back to an ephemeral session."""
    name: str | None = Field(default=None, min_length=1, max_length=64)
    """Profile name: lowercase letters, digits, '_' and '-'."""


class BrowserProfile(BrowserTool[ProfileArgs]):
    NAME = "browser_profile"
    DESCRIPTION = (
        "Manage named persistent browser profiles (cookies and storage kept on disk between runs): list, create, "
        "delete, `use` one for your session (closes your current tabs), or `ephemeral` to go back to a throwaway one."
    )
    Args = ProfileArgs
    FACTS = ToolFacts(max_duration_ms=60_000, tags=(*TAGS, "filesystem"))

    async def run(self, args: ProfileArgs) -> dict[str, Any]:
        manager = self.manager
        root = manager.profiles_root()  # the calling agent's own profiles, never another's
        if args.action in ("create", "delete", "use"):
            if args.name is None:
                raise BrowserProblem(f"action {args.action} needs a profile name")
            name = check_profile_name(args.name)
            folder = root / name
            if args.action == "create":
                folder.mkdir(parents=True, exist_ok=True)
            elif args.action == "delete":
                if name in manager.profiles_in_use():
                    raise BrowserProblem(f"profile {name!r} is open in a session; switch that session away first")
                if folder.exists():
                    if stat.S_ISLNK(folder.lstat().st_mode):
                        raise BrowserProblem(f"profile folder {folder} is a symlink; refusing to delete through it")
                    shutil.rmtree(folder)
                else:
                    raise BrowserProblem(f"no profile named {name!r}")
            else:
                await manager.use_profile(name)
        elif args.action == "ephemeral":
            await manager.use_profile(None)
        names = (
            sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
        )
        return {
            "action": args.action,
            "profiles": names,
            "in_use": manager.profiles_in_use(),
            "session_profile": manager.session_profile() or "ephemeral",
        }
