"""The X11 display: windows, pointer and keyboard input through XTEST, and screen capture.

Input goes through the XTEST extension (python-xlib) and capture through ``XGetImage`` (mss); nothing
shells out. One :class:`X11Display` holds one connection; python-xlib connections are not thread-safe,
so every request is made under one lock.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DisplayUnavailable", "Window", "X11Display", "key_names_to_keysyms"]


class DisplayUnavailable(RuntimeError):
    """The X display (or an extension it needs) cannot be used; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Window:
    """A top-level window as X knows it: id, application (WM_CLASS), title, pid and frame on the screen."""

    id: int
    app: str
    title: str
    pid: int | None
    x: int
    y: int
    width: int
    height: int

    def contains(self, x: float, y: float) -> bool:
        """Whether the screen point (x, y) lies inside the window's frame."""
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height

    def to_json(self) -> dict[str, Any]:
        """The form tools return."""
        return {
            "id": self.id,
            "app": self.app,
            "title": self.title,
            "pid": self.pid,
            "bounds": {"x": self.x, "y": self.y, "width": self.width, "height": self.height},
        }


_KEY_ALIASES = {
    "ctrl": "Control_L",
    "control": "Control_L",
    "shift": "Shift_L",
    "alt": "Alt_L",
    "option": "Alt_L",
    "super": "Super_L",
    "meta": "Super_L",
    "cmd": "Super_L",
    "command": "Super_L",
    "win": "Super_L",
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "del": "Delete",
    "delete": "Delete",
    "backspace": "BackSpace",
    "tab": "Tab",
    "space": "space",
    "pgup": "Prior",
    "pageup": "Prior",
    "pgdn": "Next",
    "pagedown": "Next",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "insert": "Insert",
    "menu": "Menu",
}
_CHAR_KEYSYMS = {"\n": "Return", "\t": "Tab", " ": "space"}
MAX_KEYS = 8
"""Keys one combination may hold down at once."""


def key_names_to_keysyms(keys: Sequence[str]) -> list[int]:
    """X keysyms for key names ("ctrl", "shift", "a", "F5", "Return"); an unknown name raises ValueError."""
    from Xlib import XK

    if not keys:
        raise ValueError("keys must name at least one key, e.g. ['ctrl', 's']")
    if len(keys) > MAX_KEYS:
        raise ValueError(f"keys may hold at most {MAX_KEYS} keys at once, got {len(keys)}")
    out = []
    for key in keys:
        name = _KEY_ALIASES.get(key.strip().lower(), key.strip())
        sym = XK.string_to_keysym(name)
        if sym == 0 and len(name) == 1:
            sym = _char_keysym(name)
        if sym == 0 and len(name) > 1:
            sym = XK.string_to_keysym(name.capitalize()) or XK.string_to_keysym(name.upper())
        if sym == 0:
            raise ValueError(
                f"unknown key {key!r}: use names like 'ctrl', 'shift', 'alt', 'Return', 'F5' or one character"
            )
        out.append(sym)
    return out


def _char_keysym(char: str) -> int:
    from Xlib import XK

    if char in _CHAR_KEYSYMS:
        return int(XK.string_to_keysym(_CHAR_KEYSYMS[char]))
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code  # Latin-1 keysyms equal their code points
    return 0x01000000 | code  # the Unicode keysym range


class X11Display:
    """One connection to an X display with XTEST input, window queries and capture."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or os.environ.get("DISPLAY", "")
        if not self.name:
            raise DisplayUnavailable("X display not available: DISPLAY is not set (start Xvfb or run inside a desktop)")
        try:
            from Xlib import X, Xatom, display, error
            from Xlib.ext import xtest
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise DisplayUnavailable(f"python-xlib not available: pip install python-xlib ({exc})") from None
        self._X, self._Xatom, self._xtest, self._error = X, Xatom, xtest, error
        local = self.name.split(".")[0]
        if local.startswith(":") and local[1:].isdigit() and not os.path.exists(f"/tmp/.X11-unix/X{local[1:]}"):
            # Checked first: python-xlib would fall back to TCP and leave the failed sockets open.
            raise DisplayUnavailable(
                f"X display {self.name} not reachable: no X server listens on it (start one, e.g. Xvfb, or set "
                "[desktop] display)"
            )
        try:
            self._d = display.Display(self.name)
        except Exception as exc:
            raise DisplayUnavailable(
                f"X display {self.name} not reachable: {exc} (check DISPLAY / [desktop] display and X authority)"
            ) from None
        self._lock = threading.RLock()
        self._root = self._d.screen().root
        self._atoms: dict[str, int] = {}
        self._mss: Any = None
        self._spare_keycode: int | None = None
        self._moves = 0
        self._watching = False
        self.xtest = bool(self._d.query_extension("XTEST"))

    # -- basics ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (and the capture handle)."""
        with self._lock:
            if self._mss is not None:
                self._mss.close()
                self._mss = None
            self._d.close()

    @property
    def size(self) -> tuple[int, int]:
        """The screen size in pixels."""
        screen = self._d.screen()
        return int(screen.width_in_pixels), int(screen.height_in_pixels)

    def _atom(self, name: str) -> int:
        if name not in self._atoms:
            self._atoms[name] = self._d.intern_atom(name)
        return self._atoms[name]

    def has_window_manager(self) -> bool:
        """Whether an EWMH window manager runs (it then decides focus and stacking)."""
        with self._lock:
            prop = self._root.get_full_property(self._atom("_NET_SUPPORTING_WM_CHECK"), self._Xatom.WINDOW)
            return bool(prop and prop.value)

    # -- windows -----------------------------------------------------------------------------

    def _text_property(self, win: Any, name: str) -> str:
        utf8 = self._atom("UTF8_STRING")
        prop = win.get_full_property(self._atom(name), utf8)
        if prop and prop.value:
            value = prop.value
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        return ""

    def _describe(self, frame: Any, client: Any) -> Window | None:
        attrs = frame.get_attributes()
        if attrs.map_state != self._X.IsViewable:
            return None
        geo = frame.get_geometry()
        if geo.width <= 1 or geo.height <= 1:
            return None
        pos = frame.translate_coords(self._root, 0, 0)
        wm_class = client.get_wm_class()
        app = wm_class[1] if wm_class else ""
        title = self._text_property(client, "_NET_WM_NAME")
        if not title:
            name = client.get_wm_name()
            title = name.decode("latin-1") if isinstance(name, bytes) else (name or "")
        pid_prop = client.get_full_property(self._atom("_NET_WM_PID"), self._Xatom.CARDINAL)
        pid = int(pid_prop.value[0]) if pid_prop and len(pid_prop.value) else None
        if not app and not title:
            return None
        return Window(int(client.id), app, title, pid, -pos.x, -pos.y, int(geo.width), int(geo.height))

    def _client_of(self, frame: Any, depth: int = 2) -> Any:
        # Under a reparenting window manager the client (with WM_CLASS) sits inside a frame window.
        if frame.get_wm_class() is not None:
            return frame
        if depth == 0:
            return None
        for child in frame.query_tree().children:
            found = self._client_of(child, depth - 1)
            if found is not None:
                return found
        return None

    def windows(self) -> list[Window]:
        """Viewable top-level windows, topmost first."""
        with self._lock:
            out = []
            for frame in reversed(self._root.query_tree().children):
                try:
                    client = self._client_of(frame)
                    if client is None:
                        continue
                    win = self._describe(frame, client)
                except self._error.XError:
                    continue  # the window went away while we looked at it
                if win is not None:
                    out.append(win)
            return out

    def moves(self) -> int:
        """A count that changes whenever a top-level window is mapped, unmapped, moved, resized or restacked.

        It counts the X server's events about the root window's children (SubstructureNotify), which
        the server writes to this connection while it carries out the change; reading them needs no
        round trip, so a caller learns of every change that had happened when it asked, cheaply.
        """
        with self._lock:
            try:
                if not self._watching:
                    self._root.change_attributes(event_mask=self._X.SubstructureNotifyMask)
                    self._d.sync()
                    self._watching = True
                    self._moves += 1
                for _ in range(self._d.pending_events()):
                    self._d.next_event()
                    self._moves += 1
            except (self._error.XError, self._error.ConnectionClosedError, OSError) as exc:
                raise DisplayUnavailable(f"X display {self.name}: cannot watch its windows ({exc})") from None
            return self._moves

    def window(self, window_id: int) -> Window | None:
        """The top-level window with id ``window_id``, or None when it is not open and viewable."""
        return next((w for w in self.windows() if w.id == window_id), None)

    def window_at(self, x: float, y: float) -> Window | None:
        """The topmost window containing the screen point (x, y)."""
        return next((w for w in self.windows() if w.contains(x, y)), None)

    def focused_window(self) -> Window | None:
        """The top-level window that has keyboard focus (under the pointer when focus follows it)."""
        with self._lock:
            focus = self._d.get_input_focus().focus
            pointer_root = focus in (self._X.PointerRoot, self._X.NONE) or not hasattr(focus, "id")
        if pointer_root:
            px, py = self.pointer()
            return self.window_at(px, py)
        windows = self.windows()
        with self._lock:
            ids = set()
            node = focus
            for _ in range(16):  # climb to the top-level ancestor
                ids.add(int(node.id))
                tree = node.query_tree()
                if tree.parent == 0 or int(tree.parent.id) == int(self._root.id):
                    break
                node = tree.parent
        return next((w for w in windows if w.id in ids), None)

    def focus(self, window: Window) -> None:
        """Give ``window`` the keyboard focus and raise it (through the window manager when one runs)."""
        with self._lock:
            win = self._d.create_resource_object("window", window.id)
            if self.has_window_manager():
                from Xlib.protocol import event

                ev = event.ClientMessage(
                    window=win,
                    client_type=self._atom("_NET_ACTIVE_WINDOW"),
                    data=(32, [2, self._X.CurrentTime, 0, 0, 0]),
                )
                mask = self._X.SubstructureRedirectMask | self._X.SubstructureNotifyMask
                self._root.send_event(ev, event_mask=mask)
            else:
                win.configure(stack_mode=self._X.Above)
                win.set_input_focus(self._X.RevertToParent, self._X.CurrentTime)
            self._d.sync()

    # -- pointer -----------------------------------------------------------------------------

    def _need_xtest(self) -> None:
        if not self.xtest:
            raise DisplayUnavailable(f"XTEST not available on display {self.name}: input cannot be synthesised")

    def pointer(self) -> tuple[int, int]:
        """The pointer's screen position."""
        with self._lock:
            reply = self._root.query_pointer()
            return int(reply.root_x), int(reply.root_y)

    def move(self, x: int, y: int) -> None:
        """Move the pointer to the screen point (x, y)."""
        self._need_xtest()
        with self._lock:
            self._xtest.fake_input(self._d, self._X.MotionNotify, x=int(x), y=int(y))
            self._d.sync()

    def click(self, x: int, y: int, button: int = 1, count: int = 1) -> None:
        """Move to (x, y) and click ``button`` ``count`` times."""
        self._need_xtest()
        with self._lock:
            self._xtest.fake_input(self._d, self._X.MotionNotify, x=int(x), y=int(y))
            for _ in range(count):
                self._xtest.fake_input(self._d, self._X.ButtonPress, button)
                self._xtest.fake_input(self._d, self._X.ButtonRelease, button)
            self._d.sync()

    def drag(self, start: tuple[int, int], end: tuple[int, int], button: int = 1, steps: int = 12) -> None:
        """Press at ``start``, move in ``steps`` to ``end`` and release (toolkits need intermediate motion)."""
        self._need_xtest()
        with self._lock:
            self._xtest.fake_input(self._d, self._X.MotionNotify, x=start[0], y=start[1])
            self._xtest.fake_input(self._d, self._X.ButtonPress, button)
            self._d.sync()
        for i in range(1, steps + 1):
            x = round(start[0] + (end[0] - start[0]) * i / steps)
            y = round(start[1] + (end[1] - start[1]) * i / steps)
            with self._lock:
                self._xtest.fake_input(self._d, self._X.MotionNotify, x=x, y=y)
                self._d.sync()
            time.sleep(0.005)  # let the toolkit see a drag, not a jump
        with self._lock:
            self._xtest.fake_input(self._d, self._X.ButtonRelease, button)
            self._d.sync()

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        """Scroll at (x, y) by wheel clicks: ``dy`` > 0 down, ``dx`` > 0 right."""
        self._need_xtest()
        with self._lock:
            self._xtest.fake_input(self._d, self._X.MotionNotify, x=x, y=y)
            for button, n in ((5 if dy > 0 else 4, abs(dy)), (7 if dx > 0 else 6, abs(dx))):
                for _ in range(n):
                    self._xtest.fake_input(self._d, self._X.ButtonPress, button)
                    self._xtest.fake_input(self._d, self._X.ButtonRelease, button)
            self._d.sync()

    # -- keyboard ----------------------------------------------------------------------------

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs shift) for ``keysym``, mapping it onto a spare keycode when the keymap lacks it."""
        for code, index in self._d.keysym_to_keycodes(keysym):
            if index in (0, 1):
                return code, index == 1
        spare = self._spare()
        self._d.change_keyboard_mapping(spare, [(keysym, keysym)])
        self._d.sync()
        return spare, False

    def _spare(self) -> int:
        if self._spare_keycode is None:
            first = self._d.display.info.min_keycode
            count = self._d.display.info.max_keycode - first + 1
            mapping = self._d.get_keyboard_mapping(first, count)
            for offset in range(count - 1, -1, -1):
                if not any(mapping[offset]):
                    self._spare_keycode = first + offset
                    break
            else:
                raise DisplayUnavailable("no spare keycode to type characters missing from the keyboard map")
        return self._spare_keycode

    def key_combo(self, keysyms: Sequence[int]) -> None:
        """Press the keys in order, then release them in reverse (e.g. ctrl+shift+t)."""
        self._need_xtest()
        with self._lock:
            codes = [self._keycode(sym)[0] for sym in keysyms]
            try:
                for code in codes:
                    self._xtest.fake_input(self._d, self._X.KeyPress, code)
            finally:
                for code in reversed(codes):
                    self._xtest.fake_input(self._d, self._X.KeyRelease, code)
                self._d.sync()

    def type_text(self, text: str) -> None:
        """Type ``text`` character by character (shift where the keymap needs it)."""
        self._need_xtest()
        shift = self._d.keysym_to_keycode(key_names_to_keysyms(["shift"])[0])
        for chunk in _chunks(text, 32):
            with self._lock:
                for char in chunk:
                    code, shifted = self._keycode(_char_keysym(char))
                    if shifted:
                        self._xtest.fake_input(self._d, self._X.KeyPress, shift)
                    self._xtest.fake_input(self._d, self._X.KeyPress, code)
                    self._xtest.fake_input(self._d, self._X.KeyRelease, code)
                    if shifted:
                        self._xtest.fake_input(self._d, self._X.KeyRelease, shift)
                    if code == self._spare_keycode:
                        self._d.sync()  # the next remap must not overtake this key press
                self._d.sync()

    # -- capture -----------------------------------------------------------------------------

    def capture(self, x: int, y: int, width: int, height: int) -> tuple[bytes, int, int]:
        """BGRX bytes (4 per pixel, as X returns them) of the screen rectangle, with its width and height.

        The rectangle is clipped to the screen. Converting to RGB is left to whoever needs it (Pillow
        does it in C), so the hash and the settle comparison work on the raw frame.
        """
        sw, sh = self.size
        x0, y0 = max(0, x), max(0, y)
        x1, y1 = min(sw, x + width), min(sh, y + height)
        if x1 <= x0 or y1 <= y0:
            raise ValueError(f"region {width}x{height}+{x}+{y} lies outside the {sw}x{sh} screen")
        with self._lock:
            if self._mss is None:
                try:
                    import mss
                except ImportError as exc:  # pragma: no cover - a declared dependency
                    raise DisplayUnavailable(f"mss not available: pip install mss ({exc})") from None
                self._mss = mss.MSS(display=self.name)
            shot = self._mss.grab({"left": x0, "top": y0, "width": x1 - x0, "height": y1 - y0})
            return bytes(shot.raw), int(shot.size.width), int(shot.size.height)


def _chunks(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]
