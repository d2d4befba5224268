"""Fixtures for the console's tests: a real Chromium page, and waiting on a condition without fixed sleeps."""

from __future__ import annotations

import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None)
T = TypeVar("T")


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    """A page in Debian's Chromium driven by Playwright (never a downloaded browser)."""
    if CHROMIUM is None:
        pytest.skip("chromium not installed (Debian's chromium): run scripts/setup-system")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        try:
            yield await browser.new_page()
        finally:
            await browser.close()


async def until(condition: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Wait until ``condition()`` is truthy (another process's row appears) and return it; fail after ``timeout``.

    The inbox of another process has no event this process could wait on, so the condition is looked at
    again every 10 ms: the wait ends as soon as it holds, never after a fixed time.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await anyio.sleep(0.01)
