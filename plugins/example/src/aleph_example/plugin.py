"""The ``example`` plugin: ``text_stats`` and ``clock_now``."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import BaseModel, Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts, ValidationFailed

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?…]+(?=\s|$)")


class TextStatsArgs(ToolArgs):
    text: str = Field(max_length=1_000_000)
    """The text to analyse (at most 1,000,000 characters)."""
    top: int = Field(default=5, ge=0, le=50)
    """How many of the most frequent words to return (0-50)."""


class WordCount(BaseModel):
    word: str
    count: int


class TextStats(BaseModel):
    characters: int
    words: int
    lines: int
    sentences: int
    top_words: list[WordCount]


class TextStatsTool(AlephTool[TextStatsArgs]):
    NAME = "text_stats"
    DESCRIPTION = (
        "Count the characters, words, lines and sentences of a text and list its most frequent words "
        "(case-insensitive). Use it to measure a text before summarising or trimming it."
    )
    Args = TextStatsArgs
    Output = TextStats
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, inline=True, tags=("text",))

    async def call(self, args: TextStatsArgs) -> TextStats:
        words = _WORD.findall(args.text)
        counts = Counter(word.lower() for word in words)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: args.top]
        return TextStats(
            characters=len(args.text),
            words=len(words),
            lines=len(args.text.splitlines()) if args.text else 0,
            sentences=len(_SENTENCE_END.findall(args.text)) or (1 if words else 0),
            top_words=[WordCount(word=w, count=c) for w, c in ranked],
        )


class ClockArgs(ToolArgs):
    timezone: str = Field(default="UTC", max_length=64)
    """IANA time-zone name such as "UTC", "Europe/Paris" or "America/New_York"."""


class ClockReading(BaseModel):
    timezone: str
    iso: str
    date: str
    time: str
    weekday: str
    utc_offset: str
    unix: float


class ClockTool(AlephTool[ClockArgs]):
    NAME = "clock_now"
    DESCRIPTION = (
        "Return the current date and time in an IANA time zone (default UTC) as ISO 8601, with the weekday "
        "and UTC offset. Use it whenever the answer depends on today's date or the time somewhere."
    )
    Args = ClockArgs
    Output = ClockReading
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, inline=True, tags=("time",))

    async def call(self, args: ClockArgs) -> ClockReading:
        try:
            zone = ZoneInfo(args.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            close = aleph.suggest_candidates(args.timezone, sorted(available_timezones()), 3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise ValidationFailed(self.NAME, f"timezone: unknown IANA time zone {args.timezone!r}.{hint}") from None
        now = datetime.now(zone)
        offset = now.strftime("%z")
        return ClockReading(
            timezone=args.timezone,
            iso=now.isoformat(timespec="seconds"),
            date=now.date().isoformat(),
            time=now.strftime("%H:%M:%S"),
            weekday=now.strftime("%A"),
            utc_offset=f"{offset[:3]}:{offset[3:]}",
            unix=round(now.timestamp(), 3),
        )


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar) -> None:
    """Register ``text_stats`` and ``clock_now``."""
    register(TextStatsTool(), ClockTool())
