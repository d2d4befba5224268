"""The signed audit ledger: per-agent, append-only, SHA-256 hash chains signed with Ed25519.

Every refusal, approval decision and mutating call the chokepoint sees becomes a :class:`LedgerRecord`;
:meth:`Ledger.append` queues it and returns at once. One writer thread drains the queue, chains and
signs each row, and commits a batch with one ``write`` and one ``fsync`` per agent (group commit).

Files under the ledger directory::

    chains/<agent>.jsonl        one JSON row per line, append-only (mode 0600)
    chains/<agent>.ckpt.jsonl   signed (seq, head hash) checkpoints, every ``checkpoint_every`` rows and on close
    keys/                       the :class:`~aleph._ledger._keystore.Keystore` (mode 0700; keys 0600)

The row format, the hash layout and verification live in :mod:`aleph._ledger._format`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from aleph._atomic import write_atomic
from aleph._ledger._chainwriter import ChainWriter, _Chain, _Durable, _Flush, _Item, _Later, _Stop, _Sync
from aleph._ledger._durability import Ack, Reserve, describe_os_error
from aleph._ledger._format import (
    CHECKPOINT_DOMAIN,
    HASH_DOMAIN,
    LedgerAction,
    LedgerError,
    LedgerOutcome,
    LedgerRecord,
    LedgerRow,
    VerifyReport,
    checkpoint_digest,
    read_lines,
    row_hash,
    signed_checkpoint,
    verify_chain,
)
from aleph._ledger._keystore import Keystore, check_agent_id

if TYPE_CHECKING:
    from aleph._config import AlephConfig

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

logger = logging.getLogger("aleph.ledger")

QUEUE_SIZE = 1024
"""Records waiting for the writer; a full queue makes :meth:`Ledger.append` wait (backpressure)."""


def ledger_directory(config: AlephConfig) -> Path:
    """The ledger directory a configuration names: ``[ledger] directory`` or ``<data_dir>/ledger``.

    A relative ``directory`` is resolved like ``[workspace] data_dir``: against the project file's directory.
    """
    if config.ledger.directory:
        return (config._base_dir / config.ledger.directory).expanduser().resolve()
    return config.data_dir / "ledger"


_OPEN_LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()


@atexit.register
def _close_open_ledgers() -> None:
    # Rows appended by a program that never closed its ledger still reach the disk at exit.
    for ledger in list(_OPEN_LEDGERS):
        with contextlib.suppress(Exception):
            ledger.close()


class Ledger(ChainWriter):
    """Per-agent signed hash chains under ``directory``; see the module docstring for the format.

    :meth:`append` and :meth:`append_nowait` never raise: a record that cannot be stored is logged
    and counted in :attr:`lost_appends`. ``append(record, durable=True)`` returns only once the row
    is fsync'd (or says why it could not be stored); :meth:`flush` is a durability barrier for
    everything queued before it; :meth:`aclose` (or :meth:`close`) drains the queue and writes a
    final checkpoint per agent. :attr:`failure` says why the ledger cannot record now (full disk,
    permissions); :meth:`ready` checks again. ``on_failure`` is what the chokepoint does meanwhile.
    """

    def __init__(
        self,
        directory: Path,
        *,
        checkpoint_every: int = 100,
        keystore: Keystore | None = None,
        on_failure: Literal["refuse", "continue"] = "refuse",
    ) -> None:
        if not 1 <= checkpoint_every <= 1_000_000:
            raise ValueError(f"checkpoint_every must be between 1 and 1000000, got {checkpoint_every}")
        if on_failure not in ("refuse", "continue"):
            raise ValueError(f"on_failure must be 'refuse' or 'continue', got {on_failure!r}")
        self.on_failure = on_failure
        """While the ledger cannot record: ``refuse`` mutating calls (fail closed) or ``continue`` with a warning."""
        self.failure: str | None = None
        """Why the ledger cannot record now (None when it can); set by the writer, cleared by :meth:`ready`."""
        self.directory = Path(directory)
        self.chains_dir = self.directory / "chains"
        self.keystore = keystore if keystore is not None else Keystore(self.directory / "keys")
        self.checkpoint_every = checkpoint_every
        self.lost_appends = 0
        self.faults: dict[str, str] = {}
        """Agents whose chain stopped taking rows, and why (a swapped or unreadable key): shown in results."""
        # SimpleQueue (C) rather than Queue: a put is on every mutating call's path; _offer bounds it.
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._chains: dict[str, _Chain] = {}
        self._room_lock = anyio.Lock()
        self._last_loss = ""
        self.reserve = Reserve(self.directory / "reserve")
        self._reserve_ok = False

    # ---- caller side -------------------------------------------------------------------------

    def _start(self) -> bool:
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="aleph-ledger-writer", daemon=True)
                self._thread.start()
                _OPEN_LEDGERS.add(self)
            return True

    def _accepting(self) -> bool:
        """Whether appends are taken (the writer is started if need be); a refused one is counted lost."""
        if (self._thread is None or self._closed) and not self._start():
            self._lose(1, "the ledger is closed")
            return False
        return True

    async def append(
        self, record: LedgerRecord, *, durable: bool = False, on_row: Callable[[int], None] | None = None
    ) -> str | None:
        """Queue ``record``; waits only while the queue is full. Never raises.

        With ``durable``, returns once the row is written and fsync'd: None then, or why the record
        could not be stored (the chokepoint answers a mutating call only after this); ``on_row`` is
        then called with the row's seq in its chain.
        """
        if not self._accepting():
            return "the ledger is closed"
        if durable:
            return await self._durable(record, on_row)
        if not self._offer(record):
            await self._append_when_room(record)
        return None

    async def _durable(self, item: LedgerRecord | _Later, on_row: Callable[[int], None] | None = None) -> str | None:
        ack = Ack()
        wrapped = _Durable(item, ack)
        if not self._offer(wrapped) and not await self._append_when_room(wrapped):
            return self._last_loss
        error = await ack.wait()
        if error is None and on_row is not None and ack.seq is not None:
            on_row(ack.seq)
        return error

    async def ready(self, agent_id: str | None = None) -> str | None:
        """None when the ledger can record (for ``agent_id``) now, else why not; checks again if it could not."""
        fault = self.faults.get(agent_id) if agent_id is not None else None
        if fault is not None:
            return fault
        if self.failure is None and self._reserve_ok:
            return None
        return await anyio.to_thread.run_sync(self.probe, agent_id)

    def probe(self, agent_id: str | None = None) -> str | None:
        """Check that the ledger can write; updates :attr:`failure` and returns it (None: it can).

        The reserve must be in place (or the filesystem unable to preallocate), the directory writable,
        and ``agent_id``'s chain file (when given) open for appending.
        """
        problem = self.reserve.make()
        if problem is None:
            target = self.chains_dir if self.chains_dir.is_dir() else self.directory
            if not os.access(target, os.W_OK):
                problem = describe_os_error(PermissionError(errno.EACCES, "Permission denied"), target)
        if problem is None and agent_id is not None and self.chains_dir.is_dir():
            path = self._chain_paths(check_agent_id(agent_id))[0]
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600))
            except OSError as exc:
                problem = describe_os_error(exc, path)
        self.failure = problem
        self._reserve_ok = problem is None
        return problem

    def _offer(self, item: _Item) -> bool:
        """Queue ``item`` unless QUEUE_SIZE items wait (threads may overshoot that by a few)."""
        if self._queue.qsize() >= QUEUE_SIZE:
            return False
        self._queue.put(item)
        return True

    async def _append_when_room(self, record: LedgerRecord | _Durable) -> bool:
        # Backpressure. One task at a time waits, in a worker thread, until the writer has drained
        # half the queue; the others wait on the lock and then find room without a thread hop each.
        async with self._room_lock:
            while not self._offer(record):
                if not await anyio.to_thread.run_sync(self._wait_for_room):
                    self._lose(1, "the writer made no progress for 60 s")
                    return False
        return True

    async def append_later(
        self,
        agent_id: str,
        build: Callable[[], LedgerRecord],
        *,
        durable: bool = False,
        on_row: Callable[[int], None] | None = None,
    ) -> str | None:
        """Queue a record for ``agent_id`` that the writer thread makes with ``build()``. Never raises.

        The summary and fingerprint are then computed off the caller's path. ``build`` must read only
        values nobody can change after this call; a record it cannot build is counted lost.
        ``durable`` waits for the row's fsync (and calls ``on_row`` with its seq), as for :meth:`append`.
        """
        if not self._accepting():
            return "the ledger is closed"
        later = _Later(agent_id, build)
        if durable:
            return await self._durable(later, on_row)
        if self._offer(later):
            return None
        record = self._build(later)  # the queue is full: build it here and wait for room like append()
        if record is not None:
            await self._append_when_room(record)
        return None

    def _wait_for_room(self) -> bool:
        # Polling (1 ms) from the one waiting thread is simpler than a condition shared with the queue's own lock.
        deadline = time.monotonic() + 60
        while self._queue.qsize() > QUEUE_SIZE // 2:
            if time.monotonic() > deadline or self._thread is None or not self._thread.is_alive():
                return False
            time.sleep(0.001)
        return True

    def append_nowait(self, record: LedgerRecord) -> None:
        """Queue ``record`` from synchronous code (any thread); blocks only while the queue is full. Never raises."""
        if not self._accepting():
            return
        if not self._offer(record):
            self._put_blocking(record)

    def _put_blocking(self, item: _Item) -> None:
        if not isinstance(item, LedgerRecord):
            self._queue.put(item)  # flush, sync and stop markers are never held back by the bound
        elif not (self._offer(item) or (self._wait_for_room() and self._offer(item))):
            self._lose(1, "the writer made no progress for 60 s")

    async def flush(self) -> None:
        """Return once everything appended before this call is written and fsync'd (or counted lost)."""
        if self._thread is None or self._closed:
            return  # a closed ledger flushed everything when it closed
        await anyio.to_thread.run_sync(self.flush_sync, abandon_on_cancel=True)

    def flush_sync(self, timeout: float | None = None) -> bool:
        """Blocking :meth:`flush` for synchronous code; False if ``timeout`` passed first."""
        thread = self._thread
        if thread is None or self._closed:
            return True
        marker = _Flush()
        self._put_blocking(marker)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not marker.event.wait(0.5):
            if not thread.is_alive():
                return True  # closed meanwhile: close() drained the queue
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    async def rotate_key(self, agent_id: str) -> str:
        """Rotate the key and record ``identity_rotated``, signed by the old key; returns the new fingerprint."""
        fp = self.keystore.rotate(agent_id)
        if self._start():
            await anyio.to_thread.run_sync(self._put_blocking, _Sync(agent_id))
        return fp

    async def revoke_key(self, agent_id: str) -> None:
        """Revoke the agent's identity and record ``identity_revoked``; the agent keeps signing."""
        self.keystore.revoke(agent_id)
        if self._start():
            await anyio.to_thread.run_sync(self._put_blocking, _Sync(agent_id))

    def close(self) -> None:
        """Drain the queue, write a final checkpoint per agent written to, and stop the writer."""
        with self._lock:
            already = self._closed
            self._closed = True
            thread = self._thread
        if thread is None or already:
            if thread is not None:
                thread.join()
            return
        self._put_blocking(_Stop())
        thread.join()
        _OPEN_LEDGERS.discard(self)
        # A record that raced past the closed check landed behind the stop marker: count it, never drop it silently.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, LedgerRecord | _Later | _Durable):
                self._lose(1, "appended while the ledger was closing")
                if isinstance(item, _Durable):
                    item.ack.settle("appended while the ledger was closing")
            elif isinstance(item, _Flush):
                item.event.set()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        await anyio.to_thread.run_sync(self.close)

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- readers -----------------------------------------------------------------------------

    def agents(self) -> list[str]:
        """Agents that have a chain here, sorted."""
        out = []
        for path in sorted(self.chains_dir.glob("*.jsonl")):
            if path.name.endswith(".ckpt.jsonl"):
                continue
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError), path.open("rb") as fh:
                agent = json.loads(fh.readline())["agent_id"]
                if isinstance(agent, str) and self._chain_paths(agent)[0] == path:
                    out.append(agent)
        return sorted(out)

    def rows(self, agent_id: str, *, limit: int | None = None) -> list[LedgerRow]:
        """The agent's stored rows, oldest first; with ``limit``, only the newest ``limit``.

        Reads the file as it is (no verification); rows still queued are not included — :meth:`flush` first.
        Raises :class:`LedgerError` if a row cannot be parsed (run :meth:`verify` to locate it).
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        lines, _ = read_lines(self._chain_paths(check_agent_id(agent_id))[0])
        if limit is not None:
            lines = lines[len(lines) - limit :] if limit else []
        out = []
        for raw in lines:
            try:
                out.append(LedgerRow.from_json(json.loads(raw)))
            except ValueError as exc:
                raise LedgerError(f"ledger of agent {agent_id!r} has an unreadable row: {exc}") from None
        return out

    def verify(self, agent_id: str, *, checkpoint: Path | None = None) -> VerifyReport:
        """Check the agent's chain row by row, then against its newest stored checkpoint and ``checkpoint``.

        Detects an edited field, a reordered, deleted or inserted row, a bad signature, an unknown or
        undeclared signer, a wrong genesis, an unreadable row, and (against a checkpoint) a deleted tail.
        """
        path, ckpt_path = self._chain_paths(check_agent_id(agent_id))
        report = verify_chain(agent_id, path, ckpt_path, self.keystore.public_keys(agent_id), checkpoint)
        head = self.keystore.active_fingerprint(agent_id) if report.ok and report.rows else None
        problem = self.keystore.key_problem(agent_id, head) if head is not None else None
        if problem is not None:
            # The rows are intact, but nothing after them can be vouched for: broken from the next row on.
            report.ok = False
            report.first_bad_seq = report.rows + 1
            report.reason = f"the chain's signing key no longer matches its recorded public key: {problem}"
        return report

    def stored_checkpoint(self, agent_id: str) -> dict[str, Any] | None:
        """The newest checkpoint stored beside the agent's chain as written (``seq``, ``head_hash``, ``at_ms``...).

        Not verified here: :meth:`verify` checks it against the chain (``checkpoint_seq`` of its report).
        None when there is none or its last line cannot be read.
        """
        lines, _ = read_lines(self._chain_paths(check_agent_id(agent_id))[1])
        if not lines:
            return None
        try:
            data = json.loads(lines[-1])
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def export_checkpoint(self, agent_id: str, path: Path) -> None:
        """Write a signed checkpoint of the agent's current head to ``path`` (keep it off this machine).

        The chain is verified first: a checkpoint never vouches for a tampered chain. Rows still
        queued are not covered — await :meth:`flush` first.
        """
        report = self.verify(agent_id)
        if not report.ok or report.head_hash is None:
            raise LedgerError(f"not exporting a checkpoint for agent {agent_id!r}: {report.reason}")
        head = self.rows(agent_id, limit=1)[-1]
        signer = self.keystore.signer_for(agent_id, head.signer_fp)
        data = json.dumps(signed_checkpoint(signer, head.seq, bytes.fromhex(head.hash)), indent=1) + "\n"
        write_atomic(path, data, mode=0o644)
