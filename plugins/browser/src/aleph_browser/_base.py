"""What every browser tool shares: the manager handle, error translation and common arguments."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from pydantic import BaseModel, Field

from aleph import AlephTool, ExecutionFailed, PermissionDenied, ToolArgs
from aleph_browser._manager import BrowserManager, BrowserProblem, BrowserUnavailable, PolicyRefusal
from aleph_browser._paths import PathRefused

__all__ = ["BrowserTool", "SnapshotChoice", "SnapshotMode", "TargetArgs", "playwright_message"]

ArgsT = TypeVar("ArgsT", bound=BaseModel)
SnapshotMode = Literal["none", "delta", "full"]


def playwright_message(exc: BaseException) -> str:
    """A Playwright error without its call log, short enough for a model."""
    text = str(exc).split("\nCall log:", 1)[0].strip()
    return text if len(text) <= 600 else text[:600] + "..."


class BrowserTool(AlephTool[ArgsT]):
    """Base of the browser tools: holds the shared :class:`BrowserManager` and turns failures into tool errors."""

    def __init__(self, manager: BrowserManager) -> None:
        self.manager = manager

    async def call(self, args: ArgsT) -> Any:
        """Run :meth:`run` while marking the browser busy; failures become :class:`aleph.ToolError`."""
        async with self.manager.activity():
            try:
                return await self.run(args)
            except BrowserUnavailable as exc:
                raise ExecutionFailed(self.NAME, str(exc)) from None
            except PolicyRefusal as exc:
                raise PermissionDenied(self.NAME, str(exc)) from None
            except (BrowserProblem, PathRefused) as exc:
                raise ExecutionFailed(self.NAME, str(exc)) from None
            except PlaywrightTimeoutError as exc:
                raise ExecutionFailed(
                    self.NAME,
                    f"{playwright_message(exc)} — the element may be hidden, disabled or covered; "
                    "call browser_snapshot to check the page",
                ) from None
            except PlaywrightError as exc:
                raise ExecutionFailed(self.NAME, playwright_message(exc)) from None

    async def run(self, args: ArgsT) -> Any:
        """The tool's work; subclasses implement it."""
        raise NotImplementedError


class SnapshotChoice(ToolArgs):
    """Arguments of tools that end with a page snapshot."""

    snapshot: SnapshotMode = "delta"
    """Snapshot to return after the action: "delta" (what changed since the tab's last snapshot), "full" or "none"."""


class TargetArgs(SnapshotChoice):
    """Arguments of tools that act on one element."""

    target: str = Field(min_length=1, max_length=1000)
    """Exact element ref from the page snapshot (like e4), or a unique CSS/Playwright selector."""
    element: str | None = Field(default=None, max_length=500)
    """Human-readable description of the element (shown in approvals and results)."""
