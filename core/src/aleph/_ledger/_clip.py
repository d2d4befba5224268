"""How long each field of a ledger row may be, and clipping a value to it (never losing the row)."""

from __future__ import annotations

import time
from collections.abc import Mapping

__all__ = ["MAX_DETAIL", "MAX_REFS", "MAX_REF_KEY", "MAX_SHORT", "MAX_TARGET", "needs_no_clip"]

MAX_TARGET = 256
MAX_DETAIL = 4096
MAX_SHORT = 256
MAX_REFS = 16
MAX_REF_KEY = 32
_TRUNCATED = "… [truncated]"


def needs_no_clip(
    target: object, detail: object, args_fp: object, principal: object, result_fp: object, rule: object
) -> bool:
    """One check for the common row's clipped fields: exact short ASCII strings, no result or rule fingerprint.

    True means every ``_clip`` of them would hand them back unchanged (the row writers skip clipping); False
    means nothing, only that they are looked at field by field.
    """
    return (
        type(target) is str
        and type(detail) is str
        and len(target) <= MAX_TARGET
        and len(detail) <= MAX_DETAIL
        and (args_fp is None or (type(args_fp) is str and len(args_fp) <= MAX_SHORT))
        and (principal is None or (type(principal) is str and len(principal) <= MAX_SHORT))
        and result_fp is None
        and rule is None
        and (target + detail + (args_fp or "") + (principal or "")).isascii()
    )


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
