"""The shared profile manager: one lazily launched Chromium per runtime, a browser context per agent session.

- Each agent session (``aleph.current_turn().session_key``, else ``"default"``) gets its own browser
  context: an isolated ephemeral one, or a named persistent profile (a user data dir under
  ``<data_dir>/browser/profiles/<name>``). One session never sees another's tabs.
- Every context routes ``**/*`` through the origin policy and sends its traffic through its own
  :class:`~aleph_browser._proxy.PolicyProxy`, which also sees redirect hops.
- The browser starts on first use and closes after ``idle_timeout_seconds`` without a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Locator, Playwright, Route, async_playwright
from playwright.async_api import Error as PlaywrightError

import aleph
from aleph_browser._config import BrowserConfig
from aleph_browser._paths import confine
from aleph_browser._policy import OriginPolicy
from aleph_browser._proxy import PolicyProxy
from aleph_browser._session import Session, Tab, caller_owner, clip, ignore_result, session_key
from aleph_browser._snapshot import REF_TARGET, budget, delta

__all__ = ["BrowserManager", "BrowserProblem", "BrowserUnavailable", "PolicyRefusal", "Session", "Tab"]

LAUNCH_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Flags for a headless Debian Chromium in a container (see ENV.md)."""
HARDENING_ARGS = ("--webrtc-ip-handling-policy=disable_non_proxied_udp",)
"""WebRTC UDP would bypass the policy proxy; only proxied traffic is allowed."""
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
NOT_FOUND = (
    "browser not available: no Chromium found (install Debian's chromium: apt-get install chromium, "
    "or set [browser] executable)"
)
PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class BrowserUnavailable(Exception):
    """No Chromium to drive; the message says what to install."""


class BrowserProblem(Exception):
    """An action could not be done; the message tells the model what to do next."""


class PolicyRefusal(Exception):
    """The origin policy refused a URL; the message names the rule."""


class BrowserManager:
    """Launches Chromium on demand, hands each agent session its context and tabs, closes when idle."""

    def __init__(
        self, config: BrowserConfig, workspace: Path, data_dir: Path, protected: tuple[Path, ...] | list[Path] = ()
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.protected = tuple(protected)
        """Aleph's own files (configuration, data directory) that uploads, downloads and captures never touch."""
        self.profiles_dir = data_dir / "browser" / "profiles"
        self.policy = OriginPolicy(
            config.allowed_origins, config.blocked_origins, block_private=config.block_private_addresses
        )
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        self._sessions: dict[str, Session] = {}
        self._session_profiles: dict[str, str] = {}
        self._lock: asyncio.Lock | None = None
        self._last_used = time.monotonic()
        self._busy = 0
        self._idle_task: asyncio.Task[None] | None = None
        self._idle_closed: set[str] = set()
        self.launches = 0
        """How many times Chromium was started (the idle close makes the next call start it again)."""

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether Playwright (and so a browser or a profile) is up."""
        return self._pw is not None

    def executable(self) -> str:
        """The Chromium binary to drive, or :class:`BrowserUnavailable`."""
        configured = self.config.executable
        if configured:
            found = shutil.which(configured)
            if found is None:
                raise BrowserUnavailable(
                    f"browser not available: [browser] executable {configured!r} does not exist or is not executable "
                    "(install Debian's chromium: apt-get install chromium, or fix [browser] executable)"
                )
            return found
        for candidate in CANDIDATES:
            found = shutil.which(candidate)
            if found:
                return found
        raise BrowserUnavailable(NOT_FOUND)

    def _launch_options(self) -> dict[str, Any]:
        return {
            "executable_path": self.executable(),
            "headless": self.config.headless,
            "args": [*LAUNCH_ARGS, *HARDENING_ARGS, *self.config.extra_args],
        }

    @contextlib.asynccontextmanager
    async def activity(self) -> AsyncIterator[None]:
        """Mark a tool call in progress: the idle timer never closes the browser under it."""
        self._busy += 1
        self._last_used = time.monotonic()
        try:
            yield
        finally:
            self._busy -= 1
            self._last_used = time.monotonic()

    async def _start(self) -> Playwright:
        if self._pw is None:
            self.executable()
            self._pw = await async_playwright().start()
            self._idle_task = asyncio.ensure_future(self._idle_watch())
        return self._pw

    async def _idle_watch(self) -> None:
        idle = self.config.idle_timeout_seconds
        while True:
            await asyncio.sleep(max(0.1, min(idle / 4, 5.0)))
            if self._busy or time.monotonic() - self._last_used < idle:
                continue
            async with self._get_lock():
                # A call may have started while we waited for the lock.
                if self._busy or time.monotonic() - self._last_used < idle:
                    continue
                self._idle_task = None
                self._idle_closed = {k for k, s in self._sessions.items() if s.tabs}
                await self._shutdown()
                return

    async def _shutdown(self) -> None:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            await session.close()
        browser, self._browser = self._browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        pw, self._pw = self._pw, None
        if pw is not None:
            with contextlib.suppress(Exception):
                await pw.stop()

    async def aclose(self) -> None:
        """Close every context, the browser and Playwright (the runtime's cleanup)."""
        task, self._idle_task = self._idle_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        async with self._get_lock():
            await self._shutdown()

    # -- sessions and tabs -------------------------------------------------------------------

    def _get_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def existing_session(self) -> Session | None:
        """The calling session if it has a live context, without launching anything."""
        session = self._sessions.get(session_key())
        return session if session is not None and session.context is not None else None

    async def session(self) -> Session:
        """The calling agent session, launching the browser and its context on first use."""
        key = session_key()
        async with self._get_lock():
            session = self._sessions.get(key)
            if session is not None and session.context is not None:
                return session
            session = Session(key, self._session_profiles.get(key), self)
            if key in self._idle_closed:
                self._idle_closed.discard(key)
                session.notice = (
                    f"The browser had closed after {self.config.idle_timeout_seconds:g} s without use "
                    "([browser] idle_timeout_seconds); tabs opened before are gone."
                )
            await self._open_context(session)
            self._sessions[key] = session
            return session

    def _context_options(self, proxy: PolicyProxy) -> dict[str, Any]:
        return {
            "viewport": {"width": self.config.viewport_width, "height": self.config.viewport_height},
            "accept_downloads": True,
            # Service workers could fetch outside the route handler; block them.
            "service_workers": "block",
            "proxy": {"server": proxy.url, "bypass": "<-loopback>"},
        }

    async def _open_context(self, session: Session) -> None:
        pw = await self._start()
        proxy = PolicyProxy(self.policy)
        await proxy.start()
        try:
            if session.profile is None:
                if self._browser is None or not self._browser.is_connected():
                    _progress("starting Chromium (the first browser call of this session takes a few seconds)")
                    self._browser = await pw.chromium.launch(**self._launch_options())
                    self.launches += 1
                context = await self._browser.new_context(**self._context_options(proxy))
            else:
                if any(s.profile == session.profile and s.context is not None for s in self._sessions.values()):
                    raise BrowserProblem(
                        f"profile {session.profile!r} is in use by another session; a profile can be open in one "
                        "session at a time"
                    )
                user_dir = self.profiles_dir / session.profile
                user_dir.mkdir(parents=True, exist_ok=True)
                _progress(f"starting Chromium with the profile {session.profile!r}")
                context = await pw.chromium.launch_persistent_context(
                    str(user_dir), **self._launch_options(), **self._context_options(proxy)
                )
                self.launches += 1
        except BaseException:
            await proxy.close()
            raise
        session.context, session.proxy = context, proxy
        context.set_default_timeout(self.config.action_timeout_ms)
        context.on("page", session.adopt)
        await context.route("**/*", self._route_handler(session))
        for page in context.pages:
            session.adopt(page)

    def _route_handler(self, session: Session) -> Callable[[Route], Awaitable[None]]:
        policy = self.policy

        async def handle(route: Route) -> None:
            url = route.request.url
            reason = policy.check_url(url)
            try:
                if reason is None:
                    await route.continue_()
                    return
                session.note_block(url, reason)
                await route.abort("blockedbyclient")
            except Exception:  # the page or context closed under the request
                return

        return handle

    async def close_session(self, key: str | None = None) -> bool:
        """Close the calling (or named) session's context; True if one was open."""
        key = key or session_key()
        session = self._sessions.pop(key, None)
        if session is None:
            return False
        await session.close()
        return True

    # Profiles (cookies and storage on disk) belong to the agent that made them: each agent names its
    # own under its own folder, so no agent can open, list or delete another's logged-in profile.
    # ``session.profile`` holds the profile's folder relative to ``profiles_dir``.

    @staticmethod
    def _owner_prefix() -> str:
        owner = caller_owner()
        if owner in ("default", "main"):  # the host's own agent keeps the folder profiles always had
            return ""
        return f".agents/{hashlib.sha256(owner.encode()).hexdigest()[:24]}/"

    def profiles_root(self) -> Path:
        """The folder holding the calling agent's profiles."""
        prefix = self._owner_prefix()
        return self.profiles_dir / prefix if prefix else self.profiles_dir

    async def use_profile(self, name: str | None) -> None:
        """Switch the calling session to its agent's persistent profile ``name`` (None: back to ephemeral)."""
        key = session_key()
        if name is not None:
            ref = self._owner_prefix() + check_profile_name(name)
            if any(s.profile == ref and s.context is not None and k != key for k, s in self._sessions.items()):
                raise BrowserProblem(
                    f"profile {name!r} is in use by another session; a profile can be open in one session at a time"
                )
            self._session_profiles[key] = ref
        else:
            self._session_profiles.pop(key, None)
        await self.close_session(key)

    def session_profile(self) -> str | None:
        """The name of the profile the calling session uses (None: ephemeral)."""
        ref = self._session_profiles.get(session_key())
        return ref.rsplit("/", 1)[-1] if ref else None

    def profiles_in_use(self) -> dict[str, str]:
        """The calling agent's open profiles: name → session key."""
        prefix = self._owner_prefix()
        return {
            s.profile[len(prefix) :]: k
            for k, s in self._sessions.items()
            if s.profile
            and s.context is not None
            and s.profile.startswith(prefix)
            and "/" not in s.profile[len(prefix) :]
        }

    async def tab(self, *, create: bool = True) -> Tab:
        """The calling session's current tab (a blank one is opened when there is none)."""
        session = await self.session()
        if session.current is not None and session.current in session.tabs:
            return session.tabs[session.current]
        if not create:
            raise BrowserProblem("no tab is open; call browser_open with a URL")
        return await self.new_tab(session)

    async def new_tab(self, session: Session) -> Tab:
        """Open a blank tab in ``session`` and make it current."""
        if len(session.tabs) >= self.config.max_tabs:
            raise BrowserProblem(
                f"this session already has {len(session.tabs)} tabs open ([browser] max_tabs); "
                "close one with browser_tabs"
            )
        assert session.context is not None
        page = await session.context.new_page()
        tab = session.adopt(page)
        with contextlib.suppress(ValueError):
            session.opened.remove(tab.id)
        session.current = tab.id
        return tab

    # -- page helpers used by the tools ------------------------------------------------------

    def path(self, given: str, *, must_exist: bool) -> Path:
        """A workspace file for reading (``must_exist``) or writing (parents created), never a protected one."""
        return confine(
            self.workspace, given, must_exist=must_exist, create_parents=not must_exist, protected=self.protected
        )

    def check_url(self, url: str) -> None:
        """Refuse a URL the origin policy forbids, before the browser tries it."""
        reason = self.policy.check_url(url)
        if reason is not None:
            raise PolicyRefusal(f"{clip(url, 300)} was not opened: {reason}")

    async def locate(self, tab: Tab, target: str) -> Locator:
        """The one element ``target`` names: a snapshot ref (``e4``) or a selector."""
        locator, ref = await self.resolve(tab, target)
        if ref is not None and await _count(locator) == 0:
            raise BrowserProblem(stale_ref(ref))
        return locator

    async def resolve(self, tab: Tab, target: str) -> tuple[Locator, str | None]:
        """Like :meth:`locate`, but a ref is returned unchecked (with the ref) for :meth:`act` to verify.

        Checking a ref while the action already runs saves a round trip to the browser per action.
        """
        self.no_dialog(tab)
        if REF_TARGET.match(target):
            return tab.page.locator(f"aria-ref={target}"), target
        locator = tab.page.locator(target)
        count = await locator.count()
        if count == 0:
            raise BrowserProblem(f"no element matches selector {target!r}; call browser_snapshot and use a ref")
        if count > 1:
            raise BrowserProblem(
                f"selector {target!r} matches {count} elements; "
                "use a ref from browser_snapshot or a more specific selector"
            )
        return locator, None

    @staticmethod
    def no_dialog(tab: Tab) -> None:
        """Refuse to act while a dialog blocks the page."""
        if tab.dialog is not None:
            raise BrowserProblem(
                f"a {tab.dialog.type} dialog is open ({clip(tab.dialog.message, 200)!r}); "
                "call browser_dialog with action accept or dismiss first"
            )

    async def act(
        self, tab: Tab, action: Callable[[], Awaitable[Any]], *, verify: tuple[Locator, str | None] | None = None
    ) -> bool:
        """Run ``action``; returns False if a dialog opened and is now waiting (the action finishes after it).

        :param verify: ``(locator, ref)`` from :meth:`resolve`; when ``ref`` is set, the ref is checked while the
            action runs, and a ref that is not on the page stops the action with the stale-ref message.
        """
        self.no_dialog(tab)
        tab.dialog_opened.clear()
        task = asyncio.ensure_future(action())
        waiter = asyncio.ensure_future(tab.dialog_opened.wait())
        locator, ref = verify if verify is not None else (None, None)
        check = asyncio.ensure_future(_count(locator)) if locator is not None and ref is not None else None
        pending: set[asyncio.Future[Any]] = {task, waiter}
        if check is not None:
            pending.add(check)
        try:
            while True:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if check is not None and check in done and check.result() == 0:
                    raise BrowserProblem(stale_ref(ref or ""))
                if task in done or waiter in done:
                    break
        except BaseException:
            task.cancel()
            raise
        finally:
            waiter.cancel()
            if check is not None:
                check.cancel()
        if task.done():
            failure = task.exception()
            if isinstance(failure, PlaywrightError) and locator is not None and ref is not None:
                # The action can fail before the check answers (a ref into a frame that is gone).
                if await _count(locator) == 0:
                    raise BrowserProblem(stale_ref(ref))
            task.result()
            return True
        task.add_done_callback(ignore_result)
        return False

    async def snapshot(self, tab: Tab, *, target: str | None = None, depth: int | None = None) -> str:
        """The ARIA snapshot (``ai`` mode, with refs) of the page or of the ``target`` subtree."""
        self.no_dialog(tab)
        if target is not None:
            locator = await self.locate(tab, target)
            return await locator.aria_snapshot(mode="ai", depth=depth)
        text = await tab.page.aria_snapshot(mode="ai", depth=depth)
        if depth is None:
            tab.last_snapshot = text
        return text

    async def snapshot_section(self, tab: Tab, mode: str, max_chars: int) -> str:
        """The snapshot part of a result: ``full``, or ``delta`` against this tab's previous snapshot."""
        if mode == "none":
            return ""
        if tab.dialog is not None:
            return "Snapshot: not available while the dialog is open."
        previous = tab.last_snapshot
        full = await self.snapshot(tab)
        if mode == "delta" and previous is not None:
            change = delta(previous, full)
            if len(change.text) < len(full):
                return "Snapshot (delta):\n" + budget(
                    change.text, max_chars, hint="call browser_snapshot with mode full"
                )
        return "Snapshot:\n" + budget(full, max_chars)

    async def report(self, tab: Tab, what: str, *, snapshot: str = "delta", max_chars: int | None = None) -> str:
        """The compact result of an action: what happened, page, new errors, modal state, and a snapshot."""
        session = tab.session
        lines = [what]
        if session.notice:
            lines.append(session.notice)
            session.notice = ""
        budget_chars = max_chars or self.config.max_snapshot_chars
        if tab.dialog is None:
            # One round trip instead of two: the title and the snapshot are fetched together.
            title, section = await asyncio.gather(tab.page.title(), self.snapshot_section(tab, snapshot, budget_chars))
            lines.append(f"Page: {clip(title, 200)!r} {clip(tab.page.url, 500)} (tab {tab.id})")
        else:
            section = await self.snapshot_section(tab, snapshot, budget_chars)
            lines.append(f"Page: {clip(tab.page.url, 500)} (tab {tab.id})")
        if session.opened:
            lines.append("New tabs: " + ", ".join(session.opened) + " (switch with browser_tabs action select)")
            session.opened.clear()
        errors = tab.new_errors()
        if errors:
            lines.append("New console errors:\n" + "\n".join(f"- {clip(e, 300)}" for e in errors))
        blocked = session.blocks_since(session.blocks_reported)
        session.blocks_reported = session.block_seq
        if blocked:
            lines.append("Blocked requests:\n" + "\n".join(f"- {url}: {reason}" for url, reason in blocked[:10]))
        if tab.downloads:
            lines.append("Downloaded into the workspace: " + ", ".join(tab.downloads))
            tab.downloads = []
        if tab.dialog is not None:
            lines.append(
                f"Dialog open: {tab.dialog.type} {clip(tab.dialog.message, 300)!r} — "
                "call browser_dialog to accept or dismiss it."
            )
        if section:
            lines.append(section)
        return "\n".join(lines)


def stale_ref(ref: str) -> str:
    """The error for a ref that is not on the page any more."""
    return (
        f"ref {ref} is not on the current page (it changed since the last snapshot); "
        "call browser_snapshot and use a fresh ref"
    )


def _progress(message: str) -> None:
    """Tell whoever watches the running call (MCP progress, the CLI's indicator) what takes the time."""
    call = aleph.current_call()
    if call is not None:
        aleph.notify_tool_streaming_chunk(call.tool, message)


async def _count(locator: Locator) -> int:
    try:
        return await locator.count()
    except PlaywrightError:  # the ref names a frame that is gone
        return 0


def check_profile_name(name: str) -> str:
    """``name`` if it is a valid profile name, else :class:`BrowserProblem`."""
    if not PROFILE_NAME.match(name):
        raise BrowserProblem(
            f"bad profile name {name[:80]!r}: use 1-64 lowercase letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return name
