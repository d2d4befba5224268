"""One agent session's browser context and its tabs, with their bounded logs and snapshot baselines."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from playwright.async_api import BrowserContext, ConsoleMessage, Dialog, Download, Page, Request, Response

import aleph
from aleph_browser._config import BrowserConfig
from aleph_browser._paths import PathRefused
from aleph_browser._proxy import BLOCK_HEADER, PolicyProxy

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "DEFAULT_SESSION",
    "ConsoleEntry",
    "NetworkEntry",
    "Session",
    "SessionHost",
    "Tab",
    "caller_owner",
    "clip",
    "ignore_result",
    "session_key",
]

DEFAULT_SESSION = "default"


class SessionHost(Protocol):
    """What a session needs of the browser manager that owns it (``BrowserManager`` has this shape)."""

    config: BrowserConfig
    workspace: Path

    def path(self, given: str, *, must_exist: bool) -> Path:
        """``given`` resolved inside the workspace (a refused path raises ``PathRefused``)."""
        ...


def caller_owner() -> str:
    """The owner key of the calling principal (``default`` when the host named no agent, or outside a call)."""
    principal = aleph.current_principal()
    return principal.owner if principal is not None else DEFAULT_SESSION


def session_key() -> str:
    """The agent session the running tool call belongs to.

    The turn's session key (core binds each key to one agent); without one, the calling agent's own
    default session (``default:<agent>``), so two agents without sessions never share a browser context;
    ``default`` when no agent is named either.
    """
    turn = aleph.current_turn()
    key = getattr(turn, "session_key", "") if turn is not None else ""
    if key:
        return str(key)
    owner = caller_owner()
    return DEFAULT_SESSION if owner == DEFAULT_SESSION else f"{DEFAULT_SESSION}:{owner}"


@dataclass(slots=True)
class ConsoleEntry:
    """One console message or uncaught page error."""

    seq: int
    level: str
    text: str
    location: str


@dataclass(slots=True)
class NetworkEntry:
    """One request the tab made, with its outcome."""

    method: str
    url: str
    resource_type: str
    status: int | None = None
    failure: str | None = None
    blocked: str | None = None


def clip(text: str, limit: int = 500) -> str:
    """``text`` cut to ``limit`` characters with a note of how much was cut."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more chars)"


class Tab:
    """One page of a session, with its bounded console and network logs and its snapshot baseline."""

    def __init__(self, tab_id: str, page: Page, session: Session, config: BrowserConfig) -> None:
        self.id = tab_id
        self.page = page
        self.session = session
        self.console: deque[ConsoleEntry] = deque(maxlen=config.console_buffer)
        self.network: deque[NetworkEntry] = deque(maxlen=config.network_buffer)
        self.seq = 0
        self.errors_reported = 0
        self.last_snapshot: str | None = None
        self.dialog: Dialog | None = None
        self.dialog_opened = asyncio.Event()
        self.dialog_plan: tuple[str, str | None] | None = None
        self.dialog_log: deque[str] = deque(maxlen=20)
        self.downloads: list[str] = []

    def add_console(self, level: str, text: str, location: str = "") -> None:
        """Record a console message (bounded)."""
        self.seq += 1
        self.console.append(ConsoleEntry(self.seq, level, clip(text, 2000), location))

    def new_errors(self) -> list[str]:
        """Console errors and page errors since the last time they were reported."""
        fresh = [e for e in self.console if e.seq > self.errors_reported and e.level in ("error", "pageerror")]
        self.errors_reported = self.seq
        return [f"{e.text}" + (f" ({e.location})" if e.location else "") for e in fresh[-10:]]


class Session:
    """One agent session's browser context, its tabs and its proxy."""

    def __init__(self, key: str, profile: str | None, manager: SessionHost) -> None:
        self.key = key
        self.profile = profile
        self.manager = manager
        self.context: BrowserContext | None = None
        self.proxy: PolicyProxy | None = None
        self.tabs: dict[str, Tab] = {}
        self.by_page: dict[Page, Tab] = {}
        self.current: str | None = None
        self.next_id = 1
        self.blocks: deque[tuple[int, str, str]] = deque(maxlen=200)
        self.block_seq = 0
        self.blocks_reported = 0
        self.opened: list[str] = []
        self.notice = ""
        """A one-time message for the next result (e.g. the browser was closed while idle)."""

    def note_block(self, url: str, reason: str) -> None:
        """Record a refused request (from the route handler or the proxy)."""
        self.block_seq += 1
        self.blocks.append((self.block_seq, clip(url, 300), reason))

    def blocks_since(self, seq: int) -> list[tuple[str, str]]:
        """Refusals recorded after ``seq``, without duplicates."""
        seen: dict[str, str] = {}
        for s, url, reason in self.blocks:
            if s > seq:
                seen.setdefault(url, reason)
        return list(seen.items())

    def adopt(self, page: Page) -> Tab:
        """The tab for ``page``, creating it (and its listeners) the first time."""
        tab = self.by_page.get(page)
        if tab is not None:
            return tab
        config = self.manager.config
        tab = Tab(f"t{self.next_id}", page, self, config)
        self.next_id += 1
        self.tabs[tab.id] = tab
        self.by_page[page] = tab
        if self.current is None:
            self.current = tab.id
        else:
            self.opened.append(tab.id)
        page.set_default_timeout(config.action_timeout_ms)
        page.set_default_navigation_timeout(config.navigation_timeout_ms)
        page.on("console", lambda m: self._console(tab, m))
        page.on("pageerror", lambda e: tab.add_console("pageerror", str(e)))
        page.on("response", lambda r: self._response(tab, r))
        page.on("requestfailed", lambda r: self._failed(tab, r))
        page.on("dialog", lambda d: self._dialog(tab, d))
        page.on("download", lambda d: self._download(tab, d))
        page.on("close", lambda _p: self._closed(tab))
        return tab

    @staticmethod
    def _console(tab: Tab, message: ConsoleMessage) -> None:
        loc = message.location or {}
        where = f"{loc.get('url', '')}:{loc.get('lineNumber', '')}" if loc.get("url") else ""
        tab.add_console(message.type, message.text, where)

    def _proxy_block(self, url: str, *, certain: bool) -> str | None:
        reason = self.proxy.reason_for(url) if self.proxy is not None else None
        if reason is None and certain:
            reason = "blocked by the origin policy"
        if reason is not None:
            self.note_block(url, reason)
        return reason

    def _response(self, tab: Tab, response: Response) -> None:
        req = response.request
        # Only refusals the page itself ran into are reported: Chromium's own background
        # requests also pass the proxy, and are refused there silently.
        blocked = self._proxy_block(response.url, certain=True) if BLOCK_HEADER.lower() in response.headers else None
        tab.network.append(
            NetworkEntry(req.method, clip(req.url, 1000), req.resource_type, response.status, None, blocked)
        )

    def _failed(self, tab: Tab, request: Request) -> None:
        failure = request.failure or "failed"
        blocked = next((r for s, u, r in reversed(self.blocks) if u == clip(request.url, 300)), None)
        if blocked is None:
            # A hop the proxy refused: a tunnel failure, or a 403 the browser then rejected (ORB for scripts).
            blocked = self._proxy_block(request.url, certain=False)
        tab.network.append(
            NetworkEntry(request.method, clip(request.url, 1000), request.resource_type, None, failure, blocked)
        )

    @staticmethod
    def _dialog(tab: Tab, dialog: Dialog) -> None:
        tab.dialog_log.append(f"{dialog.type}: {clip(dialog.message, 300)}")
        if tab.dialog_plan is not None:
            action, text = tab.dialog_plan
            tab.dialog_plan = None
            coro = dialog.accept(text) if action == "accept" and text is not None else getattr(dialog, action)()
            asyncio.ensure_future(coro).add_done_callback(ignore_result)
            return
        tab.dialog = dialog
        tab.dialog_opened.set()

    def _download(self, tab: Tab, download: Download) -> None:
        asyncio.ensure_future(self._save_download(tab, download)).add_done_callback(ignore_result)

    async def _save_download(self, tab: Tab, download: Download) -> None:
        manager = self.manager
        name = re.sub(r"[^A-Za-z0-9._-]", "_", download.suggested_filename or "download").lstrip(".") or "download"
        base = f"{manager.config.downloads_dir.rstrip('/')}/{name}"
        stem, dot, ext = name.rpartition(".")
        for n in range(1, 1000):
            rel = (
                base
                if n == 1
                else f"{manager.config.downloads_dir.rstrip('/')}/{stem or name}-{n}{dot}{ext if stem else ''}"
            )
            try:
                target = manager.path(rel, must_exist=False)
            except PathRefused as exc:
                tab.downloads.append(f"download {name!r} refused: {exc}")
                await download.cancel()
                return
            if not target.exists():
                break
        await download.save_as(target)
        tab.downloads.append(str(target.relative_to(manager.workspace.resolve())))

    def _closed(self, tab: Tab) -> None:
        self.tabs.pop(tab.id, None)
        self.by_page.pop(tab.page, None)
        if self.current == tab.id:
            self.current = next(reversed(self.tabs), None) if self.tabs else None

    async def close(self) -> None:
        """Close the context (all its tabs) and the proxy."""
        context, self.context = self.context, None
        if context is not None:
            with contextlib.suppress(Exception):
                await context.close()
        if self.proxy is not None:
            await self.proxy.close()
            self.proxy = None
        self.tabs.clear()
        self.by_page.clear()
        self.current = None


def ignore_result(task: asyncio.Future[Any]) -> None:
    """Done-callback for background tasks: retrieve the exception so asyncio does not log it."""
    if not task.cancelled():
        task.exception()
