"""The signed audit ledger: per-agent, append-only, SHA-256 hash chains signed with Ed25519.

Every refusal, approval decision and mutating call the chokepoint sees becomes a :class:`LedgerRecord`.
:meth:`Ledger.append` writes its row to the agent's chain file with one ``write(2)`` on the caller's
thread before it returns, so an answered call's row is in the operating system's page cache, which
survives ``kill -9`` of the process. The committer thread then makes rows durable on disk (``fsync``)
and seals them with one signature per group (see :mod:`aleph._ledger._committer`); ``sync = "fsync"``
makes a durable append wait for that fsync too, so its row also survives a power cut.

Files under the ledger directory::

    chains/<agent>.jsonl        one JSON row per line, append-only (mode 0600)
    chains/<agent>.ckpt.jsonl   signed (seq, head hash) checkpoints: the committer's seals, newest last
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
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from aleph._atomic import write_atomic
from aleph._ledger._chainwriter import Fields, _Chain, fields_of
from aleph._ledger._committer import Committer
from aleph._ledger._durability import Ack, Reserve, describe_os_error
from aleph._ledger._format import (
    ACTIONS,
    CHECKPOINT_DOMAIN,
    HASH_DOMAIN,
    OUTCOMES,
    LedgerAction,
    LedgerError,
    LedgerOutcome,
    LedgerRecord,
    LedgerRow,
    VerifyReport,
    checkpoint_digest,
    last_line,
    read_lines,
    row_hash,
    signed_checkpoint,
    verify_chain,
)
from aleph._ledger._keystore import Keystore, check_agent_id
from aleph._ledger._lease import close_lease

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

LedgerSync = Literal["write", "fsync"]
"""When a durable append returns: once its row is written (survives ``kill -9``) or fsync'd (survives power loss)."""


def ledger_directory(config: AlephConfig) -> Path:
    """The ledger directory a configuration names: ``[ledger] directory`` or ``<data_dir>/ledger``.

    A relative ``directory`` is resolved like ``[workspace] data_dir``: against the project file's directory.
    """
    if config.ledger.directory:
        return (config._base_dir / config.ledger.directory).expanduser().resolve()
    return config.data_dir / "ledger"


_OPEN_LEDGERS: weakref.WeakSet[Ledger] = weakref.WeakSet()


class _Seq:
    """Where :meth:`Ledger._write` leaves the seq of a row whose caller wants it but waits for no fsync."""

    __slots__ = ("seq",)

    def __init__(self) -> None:
        self.seq: int | None = None


@atexit.register
def _close_open_ledgers() -> None:
    # A program that never closed its ledger still gets its rows fsync'd and sealed at exit.
    for ledger in list(_OPEN_LEDGERS):
        with contextlib.suppress(Exception):
            ledger.close()


class Ledger(Committer):
    """Per-agent signed hash chains under ``directory``; see the module docstring for the format.

    :meth:`append` and :meth:`append_nowait` never raise: a record that cannot be stored is logged
    and counted in :attr:`lost_appends`. ``append(record, durable=True)`` returns None once the row is
    stored as ``sync`` says (written, or fsync'd), or says why it could not be; :meth:`flush` is a
    barrier that fsyncs and seals everything appended before it; :meth:`aclose` (or :meth:`close`)
    does the same and stops the committer. :attr:`failure` says why the ledger cannot record now
    (full disk, permissions); :meth:`ready` checks again. ``on_failure`` is what the chokepoint does
    meanwhile. ``checkpoint_every`` bounds how many rows may wait for their seal.
    """

    def __init__(
        self,
        directory: Path,
        *,
        checkpoint_every: int = 1000,
        keystore: Keystore | None = None,
        on_failure: Literal["refuse", "continue"] = "refuse",
        sync: LedgerSync = "write",
    ) -> None:
        if not 1 <= checkpoint_every <= 1_000_000:
            raise ValueError(f"checkpoint_every must be between 1 and 1000000, got {checkpoint_every}")
        if on_failure not in ("refuse", "continue"):
            raise ValueError(f"on_failure must be 'refuse' or 'continue', got {on_failure!r}")
        if sync not in ("write", "fsync"):
            raise ValueError(f"sync must be 'write' or 'fsync', got {sync!r}")
        self.on_failure = on_failure
        """While the ledger cannot record: ``refuse`` mutating calls (fail closed) or ``continue`` with a warning."""
        self.sync = sync
        """``write``: a durable append returns once its row is written; ``fsync``: once it is on disk."""
        self.failure: str | None = None
        """Why the ledger cannot record now (None when it can); set by the writer, cleared by :meth:`ready`."""
        self.directory = Path(directory)
        self.chains_dir = self.directory / "chains"
        self.keystore = keystore if keystore is not None else Keystore(self.directory / "keys")
        self.checkpoint_every = checkpoint_every
        self.lost_appends = 0
        self.faults: dict[str, str] = {}
        """Agents whose chain stopped taking rows, and why (a swapped or unreadable key): shown in results."""
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._wake = threading.Event()
        self._urgent = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stopping = False
        self._chains: dict[str, _Chain] = {}
        self._dirty: set[_Chain] = set()
        self._last_loss = ""
        self.reserve = Reserve(self.directory / "reserve")
        self._reserve_ok = False

    # ---- caller side -------------------------------------------------------------------------

    def _write(self, agent_id: str, record: LedgerRecord | None, ack: Ack | _Seq | None = None) -> str | None:
        """Write a row (and the identity rows due) on this thread; None once written, else why not.

        ``ack`` gets the row's seq; an :class:`Ack` also waits in the chain for the committer's fsync.
        """
        try:
            row = None if record is None else fields_of(record)
        except AttributeError:
            with self._lock:
                return self._lose(1, f"not a LedgerRecord: {type(record).__name__}")
        return self._write_fields(agent_id, row, ack)

    def write_row(
        self,
        agent_id: str,
        action: LedgerAction,
        target: str,
        outcome: LedgerOutcome,
        detail: str,
        args_fp: str | None = None,
        principal: str | None = None,
    ) -> str | None:
        """Write one row from its fields on this thread, before returning; None once written, else why not.

        The chokepoint's fast entry for a call's row (no :class:`LedgerRecord`, no ``await``): it returns
        once the row is written (in the page cache, so it survives ``kill -9``), which is what a durable
        :meth:`append` waits for under ``sync = "write"``; under ``"fsync"`` use :meth:`append`. Never raises.
        """
        if outcome not in OUTCOMES:
            return self._write_fields(agent_id, (action, target, outcome, detail, args_fp, principal, None, None, None))
        with self._lock:
            chain = self._chains.get(agent_id)
            # The common row of a chain open and current: one native call writes it (see _lease).
            if chain is not None and not chain.refresh and chain.broken is None and action in ACTIONS:
                try:
                    seq = chain.lease.append(action, target, outcome, detail, args_fp, principal, None, None)
                except Exception:  # never raise into the call being recorded: the full path says why
                    seq = 0
                if seq > 0:
                    self._wrote(chain, seq)
                    return None
        # Anything else (a chain to open or read again, identity rows due, a row to clip, another process
        # holding the chain, a failed write) takes the full path, which also says why a row was not stored.
        return self._write_fields(agent_id, (action, target, outcome, detail, args_fp, principal, None, None, None))

    def write_call(
        self, agent_id: str, tool: str, arguments: object, principal: str | None, printer: tuple[Any, ...]
    ) -> bool:
        """The ``tool_call`` row of a call that ran (``ok``, its summary as the detail), built from its arguments.

        The chokepoint's shortest entry: the native lease makes the summary and the arguments' fingerprint
        (``printer``: the rest of ``call_print``'s arguments) and writes the row in one call. True once the row
        is written (as :meth:`write_row` returns None); False when this entry wrote nothing (no native module,
        arguments that are not a flat object, a chain to open or read again, another process at the chain):
        the caller then builds the summary and calls :meth:`write_row`, which says why a row was not stored.
        """
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is None or chain.refresh or chain.broken is not None:
                return False
            try:
                seq = chain.lease.append_call(tool, arguments, principal, *printer)
            except Exception:  # no native lease, or a failure before the write: write_row takes it (and says why)
                return False
            if seq <= 0:
                return False
            self._wrote(chain, seq)
            return True

    def _wrote(self, chain: _Chain, seq: int) -> None:
        """Mark ``chain`` as written by the fast entries (self._lock held): the committer fsyncs and seals it."""
        if not self._dirty:
            self._wake.set()
        self._dirty.add(chain)
        if seq - chain.sealed_seq >= self.checkpoint_every and not self._urgent.is_set():
            self._urgent.set()

    def _write_fields(self, agent_id: str, row: Fields | None, ack: Ack | _Seq | None = None) -> str | None:
        with self._lock:
            if self._closed:
                return self._lose(0 if row is None else 1, "the ledger is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run_committer, name="aleph-ledger-committer", daemon=True)
                self._thread.start()
                _OPEN_LEDGERS.add(self)
            try:
                error = self._write_locked(agent_id, row, ack if isinstance(ack, Ack) else None)
                if error is None and ack is not None:
                    ack.seq = self._chains[agent_id].seq
                return error
            except Exception as exc:  # never raise into the call being recorded
                logger.exception("ledger: unexpected failure writing the chain of agent %r", agent_id)
                return self._lose(0 if row is None else 1, f"unexpected {type(exc).__name__}: {exc}")

    async def append(
        self, record: LedgerRecord, *, durable: bool = False, on_row: Callable[[int], None] | None = None
    ) -> str | None:
        """Write ``record``'s row before returning. Never raises.

        With ``durable``, returns None once the row is stored as :attr:`sync` says, or why it could not
        be stored (the chokepoint answers a mutating call only after this); ``on_row`` is then called
        with the row's seq in its chain. Without, a row that cannot be stored is only counted lost.
        """
        # An ack carries the row's seq back; it waits for the fsync only under sync = "fsync".
        ack: Ack | _Seq | None = _Seq() if durable and on_row is not None else None
        if durable and self.sync == "fsync":
            ack = Ack()
        agent_id = getattr(record, "agent_id", "")  # a wrongly typed record is counted lost by _write
        error = self._write(agent_id, record, ack)
        if not durable:
            return None
        if error is None and isinstance(ack, Ack):
            error = await ack.wait()
        if error is None and on_row is not None and ack is not None and ack.seq is not None:
            on_row(ack.seq)
        return error

    async def append_later(
        self,
        agent_id: str,
        build: Callable[[], LedgerRecord],
        *,
        durable: bool = False,
        on_row: Callable[[int], None] | None = None,
    ) -> str | None:
        """Build a record for ``agent_id`` with ``build()`` and append it, as :meth:`append`. Never raises.

        A record ``build`` cannot make (or makes for another agent) is counted lost.
        """
        try:
            record = build()
            if record.agent_id != agent_id:
                raise ValueError(f"built for agent {record.agent_id!r}, appended for {agent_id!r}")
        except Exception:
            logger.exception("ledger: a record could not be built")
            with self._lock:
                why = self._lose(1, "the ledger could not build the row: it could not be built")
            return why if durable else None
        return await self.append(record, durable=durable, on_row=on_row)

    async def ready(self, agent_id: str | None = None) -> str | None:
        """None when the ledger can record (for ``agent_id``) now, else why not; checks again if it could not."""
        fault = self.faults.get(agent_id) if agent_id is not None else None
        if fault is not None:
            return fault
        if self.failure is None and self._reserve_ok:
            return None
        return await anyio.to_thread.run_sync(self.probe, agent_id)

    def can_record(self, agent_id: str) -> bool:
        """True when the ledger is known able to record for ``agent_id`` now (no I/O; :meth:`ready` says why not)."""
        return self.failure is None and self._reserve_ok and agent_id not in self.faults

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

    def append_nowait(self, record: LedgerRecord) -> None:
        """Write ``record``'s row from synchronous code (any thread). Never raises."""
        self._write(getattr(record, "agent_id", ""), record)

    async def flush(self) -> None:
        """Return once everything appended before this call is fsync'd and sealed."""
        if self._thread is None or self._closed:
            return  # a closed ledger flushed everything when it closed
        await anyio.to_thread.run_sync(self.flush_sync, abandon_on_cancel=True)

    def flush_sync(self, timeout: float | None = None) -> bool:
        """Blocking :meth:`flush` for synchronous code (``timeout`` is accepted for compatibility; always True)."""
        del timeout
        self.commit()
        return True

    def recover(self) -> list[str]:
        """Open every chain here, cutting rows this ledger never acknowledged and sealing those it did.

        The recovery at start: rows a crashed writer wrote but had not sealed are signed now. Returns the
        agents whose chain was examined.
        """
        agents = self.agents()
        for agent_id in agents:
            self._write(agent_id, None)
        self.commit()
        return agents

    async def rotate_key(self, agent_id: str) -> str:
        """Rotate the key and record ``identity_rotated``, signed by the old key; returns the new fingerprint."""
        fp = self.keystore.rotate(agent_id)
        self._refresh(agent_id)
        return fp

    async def revoke_key(self, agent_id: str) -> None:
        """Revoke the agent's identity and record ``identity_revoked``; the agent keeps signing."""
        self.keystore.revoke(agent_id)
        self._refresh(agent_id)

    def _refresh(self, agent_id: str) -> None:
        with self._lock:
            chain = self._chains.get(agent_id)
            if chain is not None:
                chain.refresh = True
        self._write(agent_id, None)  # the identity row goes in now, not with the next record

    def close(self) -> None:
        """Fsync and seal everything appended, and stop the committer."""
        with self._lock:
            already = self._closed
            self._closed = True
            thread = self._thread
            self._stopping = True
            self._wake.set()
            self._urgent.set()
        if thread is not None:
            thread.join()
        if already:
            return
        self.commit()
        with self._lock:
            for chain in self._chains.values():
                close_lease(chain.lease, chain.lease_map)
                with contextlib.suppress(OSError):
                    os.close(chain.fd)
            self._chains.clear()
        _OPEN_LEDGERS.discard(self)

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

        Reads the file as it is (no verification): rows written but not sealed yet are included.
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
        raw = last_line(self._chain_paths(check_agent_id(agent_id))[1])
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def export_checkpoint(self, agent_id: str, path: Path) -> None:
        """Write a signed checkpoint of the agent's current head to ``path`` (keep it off this machine).

        The chain is verified first: a checkpoint never vouches for a tampered chain, nor for rows no
        signature vouches for yet (:meth:`flush` first to seal them).
        """
        report = self.verify(agent_id)
        if not report.ok or report.head_hash is None:
            raise LedgerError(f"not exporting a checkpoint for agent {agent_id!r}: {report.reason}")
        head = self.rows(agent_id)[report.rows - 1]
        signer = self.keystore.signer_for(agent_id, head.signer_fp)
        data = json.dumps(signed_checkpoint(signer, head.seq, bytes.fromhex(head.hash)), indent=1) + "\n"
        write_atomic(path, data, mode=0o644)
