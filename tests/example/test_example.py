from __future__ import annotations

import json
from datetime import datetime

import aleph_example.plugin
import pytest

import aleph
from aleph.testing import ToolContractTests


class TestExampleContract(ToolContractTests):
    plugin = aleph_example.plugin
    families = ("text", "clock")

    def examples(self) -> list[tuple[str, dict[str, object]]]:
        return [
            ("text_stats", {"text": "One two. Two three three!"}),
            ("clock_now", {}),
            ("clock_now", {"timezone": "Asia/Tokyo"}),
        ]


@pytest.fixture
def service() -> aleph.ToolService:
    reg = aleph.ToolRegistry()
    reg.register(aleph_example.plugin.TextStatsTool())
    reg.register(aleph_example.plugin.ClockTool())
    return aleph.UnscopedToolService(reg)


@pytest.mark.anyio
async def test_text_stats_counts_and_ranks_words(service: aleph.ToolService) -> None:
    out = await service.execute("text_stats", {"text": "One two. Two three three!\nthree", "top": 2})
    assert out.value == {
        "characters": 31,
        "words": 6,
        "lines": 2,
        "sentences": 2,
        "top_words": [{"word": "three", "count": 3}, {"word": "two", "count": 2}],
    }


@pytest.mark.anyio
async def test_text_stats_bounds_top(service: aleph.ToolService) -> None:
    with pytest.raises(aleph.ValidationFailed, match="top"):
        await service.execute("text_stats", {"text": "x", "top": 500})


@pytest.mark.anyio
async def test_clock_reads_the_requested_zone(service: aleph.ToolService) -> None:
    out = await service.execute("clock_now", {"timezone": "Asia/Kolkata"})
    reading = json.loads(out.text)
    assert reading["utc_offset"] == "+05:30"
    assert abs(datetime.fromisoformat(reading["iso"]).timestamp() - reading["unix"]) < 1


@pytest.mark.anyio
async def test_clock_unknown_zone_suggests_real_ones(service: aleph.ToolService) -> None:
    with pytest.raises(aleph.ValidationFailed, match="Europe/Paris"):
        await service.execute("clock_now", {"timezone": "Europe/Pari"})
