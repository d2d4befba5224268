"""What every desktop tool shares: the runtime's :class:`Desktop`, error translation, the call context."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

import aleph
from aleph import AlephTool, ExecutionFailed, PermissionDenied, ValidationFailed
from aleph_desktop._desktop import Desktop
from aleph_desktop._element import AccessibilityUnavailable
from aleph_desktop._ocr import OcrUnavailable
from aleph_desktop._shots import StaleScreenshot
from aleph_desktop._x11 import DisplayUnavailable

__all__ = ["DesktopTool", "InputProblem", "Refused", "annotate", "current_call", "unsafe_text_reason"]

ArgsT = TypeVar("ArgsT", bound=BaseModel)
TAGS = ("desktop",)


class InputProblem(ValueError):
    """The arguments cannot be acted on (a missing coordinate, an unknown element); the message says why."""


class Refused(PermissionError):
    """A desktop safety rule refused the action; no approval lifts it."""


def current_call() -> aleph.CallContext | None:
    """The running call's context, or None outside the chokepoint (a direct call in a test)."""
    return aleph.current_call()


def annotate(**refs: str) -> None:
    """Add string references (window, screenshot hashes) to this call's ledger row, when one is being written."""
    ctx = current_call()
    if ctx is None:
        return
    clean = {k: v[:256] for k, v in refs.items() if v}
    if clean:
        ctx.annotate(**clean)


_SHELLS = r"(?:ba|z|fi|da|k)?sh"
_FETCH_RUN = re.compile(rf"(?:curl|wget)[^|]*\|(?:sudo)?(?:{_SHELLS})(?![a-z0-9])")
_WIPE_ROOT = re.compile(r"rm-(?:rf|fr|r-f|f-r)(?:/|/\*|~|\$home)(?:$|[;&|])")
_SUDO_RM = re.compile(r"sudorm-(?:rf|fr|r-f|f-r)")


def unsafe_text_reason(text: str) -> str | None:
    """Why typing ``text`` into a desktop is refused outright, or None when it is not.

    The same classes the original hard-blocks: fetching code into a shell, wiping the root or home
    directory, and fork bombs. Matched on lowercased text without whitespace so spacing cannot hide them.
    """
    squashed = re.sub(r"\s+", "", text.lower())
    if _FETCH_RUN.search(squashed):
        return (
            "blocked: typing a 'curl/wget … | <shell>' command is not permitted (remote code execution risk) — "
            "use the sandboxed bash tool instead"
        )
    if _WIPE_ROOT.search(squashed) or _SUDO_RM.search(squashed):
        return "blocked: typing a recursive delete of / or of the home directory is not permitted"
    if ":(){" in squashed and ":|:&" in squashed:
        return "blocked: typing a fork bomb is not permitted"
    return None


class DesktopTool(AlephTool[ArgsT]):
    """Base of the desktop tools: holds the runtime's :class:`Desktop`; failures become tool errors."""

    def __init__(self, desktop: Desktop) -> None:
        self.desktop = desktop

    async def call(self, args: ArgsT) -> Any:
        """Run :meth:`run`; a missing display, bus or engine, a stale screenshot or bad input is a clear error."""
        try:
            return await self.run(args)
        except (DisplayUnavailable, AccessibilityUnavailable, OcrUnavailable) as exc:
            raise ExecutionFailed(self.NAME, str(exc)) from None
        except StaleScreenshot as exc:
            raise ExecutionFailed(self.NAME, str(exc)) from None
        except Refused as exc:
            raise PermissionDenied(self.NAME, str(exc)) from None
        except InputProblem as exc:
            raise ValidationFailed(self.NAME, str(exc)) from None

    async def run(self, args: ArgsT) -> Any:
        """The tool's work; subclasses implement it."""
        raise NotImplementedError
