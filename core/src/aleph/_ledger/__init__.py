"""The record of what happened: the signed, hash-chained ledger and the session event log.

``_format`` is the row format, the row hash and chain verification; ``_keystore`` the per-agent Ed25519
keys; ``_writer`` the :class:`Ledger` (queueing, durable acknowledgement, readers) and ``_chainwriter`` its
writer thread (group commits, crash repair, checkpoints); ``_durability`` durable acknowledgements and
the full-disk reserve; ``_events`` the session event log (SQLite). Everything the rest of core needs is
re-exported here.
"""

from __future__ import annotations

from aleph._ledger._writer import (
    CHECKPOINT_DOMAIN,
    HASH_DOMAIN,
    Ledger,
    LedgerAction,
    LedgerError,
    LedgerOutcome,
    LedgerRecord,
    LedgerRow,
    VerifyReport,
    checkpoint_digest,
    ledger_directory,
    row_hash,
)

__all__ = [
    "CHECKPOINT_DOMAIN",
    "HASH_DOMAIN",
    "Ledger",
    "LedgerAction",
    "LedgerError",
    "LedgerOutcome",
    "LedgerRecord",
    "LedgerRow",
    "VerifyReport",
    "checkpoint_digest",
    "ledger_directory",
    "row_hash",
]
