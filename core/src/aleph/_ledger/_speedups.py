"""The ledger's native accelerator, when it was built, and the pure-Python twins of what it provides.

``aleph._ledger._rowfast`` (``_rowfast.c``, compiled by ``core/hatch_build.py`` when a C compiler and
OpenSSL's headers are present) builds a row's hash, mark and JSON line in one call. Without it, or with
``ALEPH_NO_SPEEDUPS=1`` in the environment, the same bytes are built in Python: nothing is stored
differently, only more slowly. :data:`native` is the loaded module, or None.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
from types import ModuleType
from typing import Any

__all__ = ["MarkKey", "PyMarkKey", "native", "speedups_disabled"]

logger = logging.getLogger("aleph.ledger")


def speedups_disabled() -> bool:
    """True when ``ALEPH_NO_SPEEDUPS`` asks for the pure-Python path (any value but empty or ``0``)."""
    return os.environ.get("ALEPH_NO_SPEEDUPS", "") not in ("", "0")


def _load() -> ModuleType | None:
    if speedups_disabled():
        logger.debug("ledger: ALEPH_NO_SPEEDUPS is set: rows are built in Python")
        return None
    try:
        # By name: the compiled module imports nothing of aleph, so loading it closes no import circle (an
        # import statement would read to tests/meta/test_structure.py as one of the whole package).
        rowfast = importlib.import_module("aleph._ledger._rowfast")
    except ImportError as exc:  # not built (no compiler or no OpenSSL headers at install), or libcrypto missing
        logger.debug("ledger: native row builder not available (%s): rows are built in Python", exc)
        return None
    return rowfast


native: ModuleType | None = _load()

_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


class PyMarkKey:
    """HMAC-SHA256 key blocks of a writer's mark key, hashed once (the Python twin of ``_rowfast.MarkKey``)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        block = (key if len(key) <= 64 else hashlib.sha256(key).digest()).ljust(64, b"\0")
        self._inner = hashlib.sha256(block.translate(_IPAD))
        self._outer = hashlib.sha256(block.translate(_OPAD))

    def mark(self, digest: bytes) -> str:
        """The first 16 bytes, in hex, of HMAC-SHA256(key, ``digest``) (RFC 2104, the key's blocks precomputed)."""
        inner = self._inner.copy()
        inner.update(digest)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:16].hex()


MarkKey: Any = native.MarkKey if native is not None else PyMarkKey
"""The class a :class:`~aleph._ledger._keystore.Signer` keeps its mark key in: native when built."""
