"""AT-SPI over D-Bus (dbus-fast): the accessibility tree of every application on the display.

Pure Python in any virtualenv: the session bus names the accessibility bus (``org.a11y.Bus``), the
registry on it lists the applications, and each application answers for its own objects. Requests
are pipelined (many in flight at once), and searches use the toolkit's own ``Collection.GetMatches``
so a snapshot costs one request per window plus a few per matching element instead of a full walk.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from aleph_desktop._element import AccessibilityUnavailable, Element, Ref
from aleph_desktop._roles import INTERACTABLE_ROLES, ROLE_NAMES, STATE_NAMES, bitset, role_id, state_bits

__all__ = ["AtspiClient"]

ACC = "org.a11y.atspi.Accessible"
PROPS = "org.freedesktop.DBus.Properties"
REGISTRY = "org.a11y.atspi.Registry"
ROOT = "/org/a11y/atspi/accessible/root"
_RULE_SIG = "(aiia{ss}iaiiasib)uib"
_MATCH_ALL, _MATCH_ANY = 1, 2
_SORT_CANONICAL = 1
_LABELLED_BY = 2
_SCREEN_COORDS = 0
_ACTION_WORDS = ("click", "press", "activate", "toggle", "jump", "open", "expand or contract")
_SHOWING = [STATE_NAMES.index("showing"), STATE_NAMES.index("visible")]
_INTERACTABLE_IDS = sorted(role_id(r) for r in INTERACTABLE_ROLES)
_LABELLED_ROLES = frozenset({"combo box", "spin button", "slider", "text", "password text", "entry", "dial"})
_CACHE_MAX = 20_000
_WINDOWS_TTL_S = 0.5
_BOUNDS_TTL_S = 2.0
"""Cached bounds are asked for again after this long, whatever the events said (toolkits that stay silent)."""
_LEAF_LOOKUPS = 32
"""Objects whose child count is being learnt at once (from bounds-changed events of unknown objects)."""
_MAX_IN_FLIGHT = 48


def _rule(roles: Iterable[int] = (), states: Sequence[int] = (), role_match: int = _MATCH_ANY) -> list[Any]:
    return [
        bitset(list(states), 2),
        _MATCH_ALL,
        {},
        _MATCH_ALL,
        bitset(list(roles), 4),
        role_match,
        [],
        _MATCH_ALL,
        False,
    ]


class AtspiClient:
    """A connection to the accessibility bus, bound to the event loop it was first used on."""

    def __init__(self, session_bus_address: str | None = None, *, timeout: float = 3.0) -> None:
        self._session_address = session_bus_address
        self.timeout = timeout
        self._bus: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._app_names: dict[str, str] = {}
        self._pids: dict[str, int | None] = {}
        self._cache: dict[Ref, tuple[str, str, str, frozenset[str]]] = {}
        self._bounds: dict[Ref, tuple[tuple[int, int, int, int] | None, Any, int, float]] = {}
        """Screen bounds by object: (bounds, the windows' token then, the app's layout generation then, when)."""
        self._layout: dict[str, int] = {}
        """Per application (bus name): bumped by every event that can move objects other than its sender."""
        self._leaves: set[Ref] = set()
        """Objects known to have no children: their bounds-changed moves nothing but themselves."""
        self._learning: set[Ref] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._boxes_watched = False
        self._windows: tuple[float, list[tuple[Ref, str]]] | None = None
        self._inflight: asyncio.Semaphore | None = None
        self._inflight_loop: asyncio.AbstractEventLoop | None = None
        self.events = 0
        """Accessibility events seen since the connection opened (settling watches it move)."""
        self.last_event = 0.0

    # -- connection --------------------------------------------------------------------------

    async def _connect(self) -> Any:
        try:
            from dbus_fast import BusType, Message, MessageType
            from dbus_fast.aio import MessageBus
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise AccessibilityUnavailable(f"dbus-fast not available: pip install dbus-fast ({exc})") from None
        address = self._session_address or os.environ.get("DBUS_SESSION_BUS_ADDRESS")
        if address and address.startswith("unix:path="):
            path = address[len("unix:path=") :].split(",")[0]
            if not os.path.exists(path):
                raise AccessibilityUnavailable(
                    f"accessibility bus not available: no D-Bus session bus at {path}; start one (dbus-run-session)"
                )
        try:
            session = MessageBus(bus_address=address) if address else MessageBus(bus_type=BusType.SESSION)
            session = await asyncio.wait_for(session.connect(), self.timeout)
        except Exception as exc:
            raise AccessibilityUnavailable(
                f"accessibility bus not available: no D-Bus session bus ({exc}); start one (dbus-run-session)"
            ) from None
        try:
            reply = await asyncio.wait_for(
                session.call(
                    Message(
                        destination="org.a11y.Bus", path="/org/a11y/bus", interface="org.a11y.Bus", member="GetAddress"
                    )
                ),
                self.timeout,
            )
        finally:
            session.disconnect()
        if reply.message_type == MessageType.ERROR or not reply.body:
            raise AccessibilityUnavailable(
                "accessibility bus not available: org.a11y.Bus does not answer; install at-spi2-core and start "
                f"at-spi-bus-launcher ({reply.error_name})"
            )
        try:
            bus = await asyncio.wait_for(MessageBus(bus_address=reply.body[0]).connect(), self.timeout)
        except Exception as exc:
            raise AccessibilityUnavailable(f"accessibility bus not available: {exc}") from None
        bus.add_message_handler(self._on_message)
        for interface in ("Object", "Window"):
            await self._raw(
                bus,
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "AddMatch",
                "s",
                [f"type='signal',interface='org.a11y.atspi.Event.{interface}'"],
            )
        # Toolkits only emit the events someone registered for.
        registered = []
        for event in (
            "object:state-changed",
            "object:children-changed",
            "object:property-change",
            "object:text-changed",
            "object:bounds-changed",
            "window:",
        ):
            try:
                await self._register(bus, event)
                registered.append(event)
            except AccessibilityUnavailable:
                if event in ("object:bounds-changed", "window:"):
                    continue  # what the box cache listens for: without it, boxes are simply always asked
                raise
        # Fail closed: a cached box is only as good as the events that would have voided it.
        self._boxes_watched = "object:bounds-changed" in registered and "window:" in registered
        return bus

    async def _register(self, bus: Any, event: str) -> None:
        try:
            await self._raw(
                bus, REGISTRY, "/org/a11y/atspi/registry", REGISTRY, "RegisterEvent", "sass", [event, [], ""]
            )
        except AccessibilityUnavailable:
            await self._raw(bus, REGISTRY, "/org/a11y/atspi/registry", REGISTRY, "RegisterEvent", "s", [event])

    def _on_message(self, message: Any) -> None:
        interface = message.interface or ""
        if not interface.startswith("org.a11y.atspi.Event."):
            return
        ref = (message.sender or "", message.path or "")
        member = message.member
        self._bounds.pop(ref, None)
        if member == "BoundsChanged":
            # Not counted as activity for settling: spinners and progress bars move their boxes 60 times a
            # second. An object without children moved only itself; any other may have carried its
            # descendants (their own events are not guaranteed), so the app's cached bounds all go.
            if ref not in self._leaves:
                self._moved(ref[0])
                self._learn(ref)
            return
        self.events += 1
        self.last_event = time.monotonic()
        self._cache.pop(ref, None)
        if interface.endswith(".Window"):
            self._moved(ref[0])  # moved, resized, minimised, restored, created, closed ...
        elif member == "ChildrenChanged":
            self._leaves.discard(ref)
            self._moved(ref[0])
            self._windows = None
            self._cache.clear()  # a relabelled or replaced subtree: cheaper to start over than to chase it
        elif member == "PropertyChange" and message.body and message.body[0] == "accessible-value":
            self._moved(ref[0])  # a scroll bar that moved scrolls what it scrolls

    def _moved(self, bus_name: str) -> None:
        self._layout[bus_name] = self._layout.get(bus_name, 0) + 1

    def _learn(self, ref: Ref) -> None:
        """Find out in the background whether ``ref`` has children (a spinner's bounds events then stop costing)."""
        if ref in self._learning or len(self._learning) >= _LEAF_LOOKUPS or self._loop is None:
            return
        if len(self._leaves) >= _CACHE_MAX:
            self._leaves.clear()
        self._learning.add(ref)

        async def ask() -> None:
            try:
                if int(await self.prop(ref, ACC, "ChildCount")) == 0:
                    self._leaves.add(ref)
            except Exception:  # gone, or not answering: it stays unknown (and keeps invalidating)
                pass
            finally:
                self._learning.discard(ref)

        task = self._loop.create_task(ask())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def bus(self) -> Any:
        """The accessibility bus connection, (re)opened on the running loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock = asyncio.Lock()
            self._loop = loop
            self._bus = None
            self._forget()
            self._windows = None
        async with self._lock:
            if self._bus is None or not self._bus.connected:
                self._forget()  # events may have been missed while there was no connection
                self._bus = await self._connect()
            return self._bus

    def close(self) -> None:
        """Disconnect (safe to call more than once)."""
        if self._bus is not None:
            try:
                self._bus.disconnect()
            except Exception:
                pass
            self._bus = None

    async def _raw(
        self, bus: Any, dest: str, path: str, iface: str, member: str, sig: str = "", body: Sequence[Any] = ()
    ) -> list[Any]:
        from dbus_fast import Message, MessageType

        msg = Message(destination=dest, path=path, interface=iface, member=member, signature=sig, body=list(body))
        # Requests are pipelined, but only so many at once: dbus-fast gives up the whole connection when
        # the socket's send buffer fills (EAGAIN), which a busy bus and a few hundred queued calls can do.
        if self._inflight is None or self._inflight_loop is not asyncio.get_running_loop():
            self._inflight = asyncio.Semaphore(_MAX_IN_FLIGHT)
            self._inflight_loop = asyncio.get_running_loop()
        try:
            async with self._inflight:
                reply = await asyncio.wait_for(bus.call(msg), self.timeout)
        except TimeoutError:
            raise AccessibilityUnavailable(f"{dest} did not answer {member} within {self.timeout:g} s") from None
        except OSError as exc:  # the connection broke; the next call opens a new one
            raise AccessibilityUnavailable(f"the accessibility bus connection failed during {member}: {exc}") from None
        if reply.message_type == MessageType.ERROR:
            raise AccessibilityUnavailable(f"{member} failed on {dest}{path}: {reply.error_name} {reply.body[:1]}")
        return list(reply.body)

    async def call(self, ref: Ref, iface: str, member: str, sig: str = "", body: Sequence[Any] = ()) -> list[Any]:
        """Call ``member`` of ``iface`` on the object ``ref``; an error reply raises AccessibilityUnavailable."""
        return await self._raw(await self.bus(), ref[0], ref[1], iface, member, sig, body)

    async def prop(self, ref: Ref, iface: str, name: str) -> Any:
        """One property of ``ref``."""
        (variant,) = await self.call(ref, PROPS, "Get", "ss", [iface, name])
        return variant.value

    # -- applications ------------------------------------------------------------------------

    async def apps(self) -> list[tuple[Ref, str]]:
        """(root ref, application name) of every application on the accessibility bus."""
        (children,) = await self.call(("org.a11y.atspi.Registry", ROOT), ACC, "GetChildren")
        refs = [tuple(c) for c in children]
        missing = [r for r in refs if r[0] not in self._app_names]
        names = await asyncio.gather(*(self.prop(r, ACC, "Name") for r in missing), return_exceptions=True)
        for r, name in zip(missing, names, strict=True):
            if isinstance(name, str):
                self._app_names[r[0]] = name
        return [((r[0], r[1]), self._app_names.get(r[0], "")) for r in refs]

    def app_name(self, bus_name: str) -> str:
        """The application name last seen for ``bus_name`` ('' when unknown)."""
        return self._app_names.get(bus_name, "")

    async def pid(self, bus_name: str) -> int | None:
        """The process id of the application owning ``bus_name``."""
        if bus_name not in self._pids:
            try:
                (pid,) = await self._raw(
                    await self.bus(),
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus",
                    "GetConnectionUnixProcessID",
                    "s",
                    [bus_name],
                )
                self._pids[bus_name] = int(pid)
            except AccessibilityUnavailable:
                self._pids[bus_name] = None
        return self._pids[bus_name]

    async def toolkit(self, app_root: Ref) -> str:
        """The application's toolkit name and version ("GTK 3.24.38")."""
        name, version = await asyncio.gather(
            self.prop(app_root, "org.a11y.atspi.Application", "ToolkitName"),
            self.prop(app_root, "org.a11y.atspi.Application", "Version"),
        )
        return f"{name} {version}".strip()

    async def windows(self, app: str | None = None) -> list[tuple[Ref, str]]:
        """(window ref, application name) of the top-level windows, optionally of apps whose name matches ``app``.

        The list is reused for at most half a second, and not at all after a window or application
        came or went (children-changed).
        """
        now = time.monotonic()
        if self._windows is None or now - self._windows[0] > _WINDOWS_TTL_S:
            self._windows = (now, await self._all_windows())
        return [(r, n) for r, n in self._windows[1] if app is None or _name_matches(n, app)]

    async def _all_windows(self) -> list[tuple[Ref, str]]:
        apps = await self.apps()
        lists = await asyncio.gather(*(self.call(r, ACC, "GetChildren") for r, _ in apps), return_exceptions=True)
        out: list[tuple[Ref, str]] = []
        for (_, name), result in zip(apps, lists, strict=True):
            if isinstance(result, BaseException):
                continue  # an application that quit or hangs is left out, not fatal
            out.extend(((c[0], c[1]), name) for c in result[0])
        return out

    # -- objects -----------------------------------------------------------------------------

    async def describe(self, ref: Ref, *, bounds: bool = True, role: str | None = None, frame: Any = None) -> Element:
        """Role, name, label and states (and screen bounds) of ``ref``.

        Role, name, label and states are cached per object and dropped when the object reports a
        change (a state, a property, its text) or when :meth:`invalidate` is called (after every
        action). Bounds are asked for every time, unless ``frame`` is given — a token that changes
        whenever a window moves, appears or goes (:meth:`X11Display.moves`): then bounds read under
        the same token are reused, as long as no event since could have moved the object (its own
        bounds-changed, a bounds-changed of anything with children, children added or removed, a
        scroll, a window event of its application) and for at most 2 s.
        """
        cached = self._cache.get(ref)
        if cached is None:
            cached = await self._fetch(ref, role)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[ref] = cached
        c_role, name, label, states = cached
        box = None
        if bounds:
            box = await self._extents_of(ref, frame)
        return Element(ref, c_role, name, states, box, self.app_name(ref[0]), label=label)

    async def _extents_of(self, ref: Ref, frame: Any) -> tuple[int, int, int, int] | None:
        if not self._boxes_watched:
            frame = None
        layout = self._layout.get(ref[0], 0)
        now = time.monotonic()
        if frame is not None:
            hit = self._bounds.get(ref)
            if hit is not None and hit[1] == frame and hit[2] == layout and now - hit[3] < _BOUNDS_TTL_S:
                return hit[0]
        box = await self.extents(ref)
        if frame is not None:
            # Stored with the generation read before asking: an event that arrived meanwhile voids it.
            if len(self._bounds) >= _CACHE_MAX:
                self._bounds.clear()
            self._bounds[ref] = (box, frame, layout, now)
        return box

    async def extents(self, ref: Ref) -> tuple[int, int, int, int] | None:
        """The screen bounds of ``ref`` (x, y, width, height), asked afresh; None without a usable box."""
        try:
            (extents,) = await self.call(ref, "org.a11y.atspi.Component", "GetExtents", "u", [_SCREEN_COORDS])
        except AccessibilityUnavailable:
            return None  # no Component interface: an element without a place on screen
        x, y, w, h = extents
        return (int(x), int(y), int(w), int(h)) if w > 0 and h > 0 else None

    async def _fetch(self, ref: Ref, role: str | None) -> tuple[str, str, str, frozenset[str]]:
        requests = [self.prop(ref, ACC, "Name"), self.call(ref, ACC, "GetState")]
        if role is None:
            requests.append(self.call(ref, ACC, "GetRole"))
        gathered = await asyncio.gather(*requests, return_exceptions=True)
        results: list[Any] = []
        for r in gathered:
            if isinstance(r, BaseException):
                raise r if isinstance(r, AccessibilityUnavailable) else AccessibilityUnavailable(str(r))
            results.append(r)
        name, (states,) = str(results[0]), results[1]
        if role is None:
            number = results[2][0]
            role = ROLE_NAMES[number] if number < len(ROLE_NAMES) else "unknown"
        label = ""
        if role in _LABELLED_ROLES or (not name and role in INTERACTABLE_ROLES):
            label = await self._label(ref)
        return role, name or label, label, state_bits(states)

    def invalidate(self) -> None:
        """Forget every cached description and box (the tools call it after each action).

        The window list stays: a window that an action opens or closes announces itself
        (children-changed), and settling waits for such events before the next call can look.
        """
        self._cache.clear()
        self._bounds.clear()

    def _forget(self) -> None:
        self._cache.clear()
        self._bounds.clear()
        self._leaves.clear()

    async def _label(self, ref: Ref) -> str:
        # A field without a name of its own is named by the label that points at it.
        try:
            (relations,) = await self.call(ref, ACC, "GetRelationSet")
        except AccessibilityUnavailable:
            return ""
        for kind, targets in relations:
            if kind == _LABELLED_BY and targets:
                try:
                    return str(await self.prop((targets[0][0], targets[0][1]), ACC, "Name"))
                except AccessibilityUnavailable:
                    return ""
        return ""

    async def children(self, ref: Ref) -> list[Ref]:
        """The direct children of ``ref``."""
        (kids,) = await self.call(ref, ACC, "GetChildren")
        return [(k[0], k[1]) for k in kids]

    async def matches(
        self, scope: Ref, *, roles: Iterable[str] = (), states: Iterable[str] = (), showing: bool = True, count: int = 0
    ) -> list[Ref]:
        """Descendants of ``scope`` (in document order) with one of ``roles`` and all of ``states``."""
        state_ids = [STATE_NAMES.index(s) for s in states] + (_SHOWING if showing else [])
        role_ids = [role_id(r) for r in roles]
        rule = _rule(role_ids, state_ids, _MATCH_ANY if role_ids else _MATCH_ALL)
        (refs,) = await self.call(
            scope, "org.a11y.atspi.Collection", "GetMatches", _RULE_SIG, [rule, _SORT_CANONICAL, count, True]
        )
        return [(r[0], r[1]) for r in refs]

    async def interactable(self, scope: Ref, count: int = 0) -> list[Ref]:
        """Showing descendants of ``scope`` whose role a person acts on."""
        rule = _rule(_INTERACTABLE_IDS, _SHOWING, _MATCH_ANY)
        (refs,) = await self.call(
            scope, "org.a11y.atspi.Collection", "GetMatches", _RULE_SIG, [rule, _SORT_CANONICAL, count, True]
        )
        return [(r[0], r[1]) for r in refs]

    async def value(self, element: Element) -> str | None:
        """The element's current text or value (None when it has neither)."""
        try:
            if element.role in ("spin button", "slider", "scroll bar", "progress bar", "dial"):
                return str(await self.prop(element.ref, "org.a11y.atspi.Value", "CurrentValue"))
            (text,) = await self.call(element.ref, "org.a11y.atspi.Text", "GetText", "ii", [0, -1])
            return str(text)
        except AccessibilityUnavailable:
            return None

    # -- actions -----------------------------------------------------------------------------

    async def actions(self, ref: Ref) -> list[str]:
        """The names of the element's actions ("click", "press", "activate", ...)."""
        try:
            (actions,) = await self.call(ref, "org.a11y.atspi.Action", "GetActions")
        except AccessibilityUnavailable:
            return []
        return [str(a[0]) for a in actions]

    async def do_action(self, ref: Ref, preferred: Sequence[str] = _ACTION_WORDS) -> str | None:
        """Run the element's first action named in ``preferred`` (else its first); its name, or None if none ran."""
        names = await self.actions(ref)
        if not names:
            return None
        lowered = [n.lower() for n in names]
        index = next((lowered.index(p) for p in preferred if p in lowered), 0)
        (ok,) = await self.call(ref, "org.a11y.atspi.Action", "DoAction", "i", [index])
        return names[index] if ok else None

    async def set_text(self, ref: Ref, text: str) -> bool:
        """Replace the element's text through EditableText; False when it has no such interface."""
        try:
            (ok,) = await self.call(ref, "org.a11y.atspi.EditableText", "SetTextContents", "s", [text])
        except AccessibilityUnavailable:
            return False
        return bool(ok)

    async def set_number(self, ref: Ref, number: float) -> bool:
        """Set the element's numeric value (a spin button, a slider); False when it has none."""
        from dbus_fast import Variant

        try:
            await self.call(ref, PROPS, "Set", "ssv", ["org.a11y.atspi.Value", "CurrentValue", Variant("d", number)])
        except AccessibilityUnavailable:
            return False
        return True

    async def select(self, ref: Ref) -> bool:
        """Select the element within its parent's selection (a list row, a tab, a combo option)."""
        try:
            parent = await self.prop(ref, ACC, "Parent")
            (index,) = await self.call(ref, ACC, "GetIndexInParent")
            (ok,) = await self.call((parent[0], parent[1]), "org.a11y.atspi.Selection", "SelectChild", "i", [index])
        except AccessibilityUnavailable:
            return False
        return bool(ok)

    async def grab_focus(self, ref: Ref) -> bool:
        """Give the element keyboard focus."""
        try:
            (ok,) = await self.call(ref, "org.a11y.atspi.Component", "GrabFocus")
        except AccessibilityUnavailable:
            return False
        return bool(ok)


def _name_matches(name: str, pattern: str) -> bool:
    return pattern.lower() in name.lower()
