"""How long each field of a ledger row may be, and clipping a value to it (never losing the row)."""

from __future__ import annotations

import time
from collections.abc import Mapping

__all__ = ["MAX_DETAIL", "MAX_REFS", "MAX_REF_KEY", "MAX_SHORT", "MAX_TARGET"]

MAX_TARGET = 256
MAX_DETAIL = 4096
MAX_SHORT = 256
MAX_REFS = 16
MAX_REF_KEY = 32
_TRUNCATED = "… [truncated]"


def _clip(value: str, limit: int) -> str:
    if type(value) is str and len(value) <= limit and value.isascii():
        return value  # the common case, kept cheap: it runs for several fields of every row
    text = value if isinstance(value, str) else str(value)
    # Lone surrogates cannot be stored as UTF-8; replace rather than lose the row.
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - len(_TRUNCATED)] + _TRUNCATED


def _clip_opt(value: str | None, limit: int) -> str | None:
    return None if value is None else _clip(value, limit)


def _clip_refs(refs: Mapping[str, str] | None) -> dict[str, str] | None:
    if not refs:
        return None
    return {_clip(str(k), MAX_REF_KEY): _clip(str(v), MAX_SHORT) for k, v in list(refs.items())[:MAX_REFS]}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
