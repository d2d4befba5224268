"""The scripted task suite: every accessibility-path task must pass; the pixel path must reach 95%."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aleph_desktop import HeadlessSession
from harness import Harness
from tasks import ACCESSIBILITY, PIXELS

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def harness(
    session: HeadlessSession, call: Any, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    h = Harness(session, call, Path(tmp_path_factory.mktemp("state")))
    try:
        yield h
    finally:
        h.close()


def test_the_suite_has_at_least_forty_tasks() -> None:
    assert len(ACCESSIBILITY) + len(PIXELS) >= 40
    assert len({t.name for t in ACCESSIBILITY + PIXELS}) == len(ACCESSIBILITY) + len(PIXELS)


@pytest.mark.parametrize("task", ACCESSIBILITY, ids=[t.name for t in ACCESSIBILITY])
async def test_accessibility_task(harness: Harness, task: Any) -> None:
    outcome = await harness.run(task)
    assert outcome.ok, outcome.detail


async def test_pixel_path_reaches_ninety_five_percent(harness: Harness) -> None:
    harness.restart("gtk")  # the pixel tasks start from fresh apps
    outcomes = [await harness.run(task) for task in PIXELS]
    failed = [f"{o.task.name}: {o.detail}" for o in outcomes if not o.ok]
    rate = 1 - len(failed) / len(outcomes)
    assert rate >= 0.95, failed
