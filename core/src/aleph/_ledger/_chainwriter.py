"""Writing rows to a chain file on the caller's thread, and reading a chain's head back after a crash.

:class:`ChainWriter` is the append half of :class:`~aleph._ledger._writer.Ledger`. A row is chained,
hashed, marked and written with one ``write(2)`` by the thread that appends it, under the ledger's lock
and the chain file's ``flock`` (several processes may share a chain). Once ``write`` returns the row is
in the operating system's page cache, which outlives the process (``kill -9``, a crash of Python): the
caller may answer. What costs more is left to the committer (:mod:`aleph._ledger._committer`): the
``fsync`` and the Ed25519 signature, one per group of rows, over the chain's head.

Rows between two signatures carry the writer's ``mark`` (see :meth:`~aleph._ledger._keystore.Signer.mark`).
When a chain is opened, the rows after its last signature (a row's, or the newest checkpoint's) are
checked: those that chain correctly and carry the mark were written by a writer that held the key, and
were acknowledged; they are kept and sealed. The rest (a torn line, a row someone appended without the
key) were never acknowledged by this ledger and are cut.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import mmap
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aleph._errors import AlephError
from aleph._ledger._clip import MAX_DETAIL, MAX_SHORT, MAX_TARGET, _clip, _clip_opt, _clip_refs, _now_ms, needs_no_clip
from aleph._ledger._durability import Ack, Reserve, describe_os_error, is_full
from aleph._ledger._format import (
    ACTIONS,
    OUTCOMES,
    LedgerRecord,
    LedgerRow,
    canonical_refs,
    hash_of_row,
    last_line,
    row_hash,
)
from aleph._ledger._keystore import Keystore, KeystoreError, Signer, agent_file_stem, check_agent_id
from aleph._ledger._lease import ask_for, close_lease, open_lease
from aleph._ledger._rowline import encode_line, row_line

__all__ = ["ChainWriter", "Fields", "fields_of"]

logger = logging.getLogger("aleph.ledger")

_MAX_OPEN_CHAINS = 256
# Read this much of a chain's end first when opening it; more only when its last signature lies further back.
_TAIL_WINDOW = 1 << 20


Fields = tuple[str, str, str, str, "str | None", "str | None", "str | None", "str | None", "Mapping[str, str] | None"]
"""A record's fields as the writer takes them: action, target, outcome, detail, args_fp, principal, result_fp,
rule, refs (a fast entry passes them without building a :class:`LedgerRecord`)."""


def fields_of(record: LedgerRecord) -> Fields:
    """``record``'s fields in :data:`Fields` order."""
    return (record.action, record.target, record.outcome, record.detail, record.args_fp, record.principal,
            record.result_fp, record.rule, record.refs)  # fmt: skip


@dataclass(slots=True, eq=False)
class _Chain:
    """The ledger's view of one agent's chain file (guarded by the ledger's lock)."""

    agent_id: str
    path: Path
    ckpt_path: Path
    fd: int
    signer_fp: str | None = None
    revoked: bool = False
    sealed_seq: int = 0
    """The newest seq a signature (a row's or a checkpoint's) vouches for, as far as this process knows."""
    sealed_at: float = 0.0
    """When this process last sealed the chain (``time.monotonic()``)."""
    broken: str | None = None
    signer: Signer | None = None
    """The agent's active signer, cached: the key state is read again only when :attr:`refresh` is set."""
    refresh: bool = True
    waiting: list[Ack] = field(default_factory=list)
    """Callers waiting for the fsync of their row (``sync = "fsync"``)."""
    retired: bool = False
    """Evicted from the open chains: the committer seals it and closes its file."""
    lease: Any = None
    """The chain file's lock kept across rows (:mod:`aleph._ledger._lease`); set when the chain is opened."""
    lease_map: mmap.mmap | None = None
    """The shared request counter of the lease (None when it could not be mapped: then the lock is never kept)."""
    contended_at: float = 0.0
    """When another writer was last seen asking for this chain (``time.monotonic()``; 0: not lately)."""

    # The head (seq, hash, file size) lives in the lease, which the native row writer advances.
    @property
    def seq(self) -> int:
        """The seq of the chain's head (0 before row 1)."""
        seq: int = self.lease.seq
        return seq

    @seq.setter
    def seq(self, value: int) -> None:
        self.lease.seq = value

    @property
    def head(self) -> bytes | None:
        """The head row's hash."""
        head: bytes | None = self.lease.head
        return head

    @head.setter
    def head(self, value: bytes | None) -> None:
        self.lease.head = value

    @property
    def size(self) -> int:
        """The chain file's size after the head row (every row this process has read or written)."""
        size: int = self.lease.size
        return size

    @size.setter
    def size(self, value: int) -> None:
        self.lease.size = value


_ROW_ENCODER = json.JSONEncoder(ensure_ascii=False)  # json.dumps(row, ensure_ascii=False) without a new encoder per row


class ChainWriter:
    """The append half of :class:`~aleph._ledger._writer.Ledger` (a mixin: it reads the ledger's fields)."""

    directory: Path
    chains_dir: Path
    keystore: Keystore
    checkpoint_every: int
    sync: str
    lost_appends: int
    faults: dict[str, str]
    failure: str | None
    reserve: Reserve
    _lock: threading.Lock
    _chains: dict[str, _Chain]
    _dirty: set[_Chain]
    _wake: threading.Event
    _urgent: threading.Event
    _last_loss: str

    def _lose(self, count: int, why: str) -> str:
        """Count ``count`` records as not stored (logged); returns ``why``."""
        self.lost_appends += count  # callers hold self._lock, or are the only thread (close)
        self._last_loss = why
        if count:
            logger.error("ledger: %d record(s) not stored: %s", count, why)
        return why

    def _fail(self, count: int, why: str) -> str:
        """The ledger cannot write: ``count`` records are lost and it reports itself unavailable."""
        if self.failure != why:
            logger.error("ledger: cannot record: %s", why)
        self.failure = why
        return self._lose(count, why)

    def _chain_paths(self, agent_id: str) -> tuple[Path, Path]:
        stem = agent_file_stem(agent_id)
        return self.chains_dir / f"{stem}.jsonl", self.chains_dir / f"{stem}.ckpt.jsonl"

    # ---- the append path (caller's thread, self._lock held) -------------------------------------

    def _write_locked(self, agent_id: str, row: Fields | None, ack: Ack | None) -> str | None:
        """Write the identity rows due and ``row``'s; None once written, else why not (counted lost).

        ``row`` is a record's fields in :data:`Fields` order. With ``ack``, its ``seq`` is set and it
        waits in the chain for the committer's fsync.
        """
        count = 0 if row is None else 1
        if row is not None and (row[0] not in ACTIONS or row[2] not in OUTCOMES):
            return self._lose(count, f"unknown action {row[0]!r} or outcome {row[2]!r}")
        # An open chain is looked up without reordering the open chains while they are fewer than the bound:
        # the order (least recently used first) only matters for choosing one to close, once they are that many.
        chain = self._chains.get(agent_id)
        try:
            if chain is None or len(self._chains) >= _MAX_OPEN_CHAINS:
                chain = self._open_chain(agent_id)
        except OSError as exc:
            return self._fail(count, describe_os_error(exc, exc.filename or self.chains_dir))
        except (ValueError, AlephError) as exc:
            return self._lose(count, f"cannot open the chain of agent {agent_id!r}: {exc}")
        if chain.broken:
            return self._lose(count, chain.broken)
        self._lock_chain(chain)
        try:
            # The file's end, to see whether another process appended since our last row: lseek answers it
            # with one int where fstat builds a whole stat result (the fd is O_APPEND and every read is a
            # pread at an explicit offset, so moving its offset changes nothing else).
            if os.lseek(chain.fd, 0, os.SEEK_END) != chain.size:
                broken = self._load_state(chain)  # another process appended since our last row
                if broken:
                    return self._lose(count, broken)
            # seq, head hash, signer fingerprint, revocation recorded
            state: list[Any] = [chain.seq, chain.head, chain.signer_fp, chain.revoked]
            lines: list[bytes] = []
            signer = chain.signer
            try:
                if chain.refresh or signer is None or signer.fingerprint != chain.signer_fp:
                    signer = self._identity_rows(chain, state, lines)
            except KeystoreError as exc:
                # A key that no longer matches the chain cannot vouch for anything: stop this chain, loudly.
                why = f"the ledger of agent {agent_id!r} stopped taking rows: {exc}"
                chain.broken = why
                if agent_id not in self.faults:
                    logger.error("%s; run `aleph doctor`", why)
                self.faults[agent_id] = why
                return self._lose(count, why)
            if row is not None:
                lines.append(self._row(state, signer, row))
            if not lines:
                return None
            data = lines[0] if len(lines) == 1 else b"".join(lines)
            try:  # the common case inline: one write(2) that takes the whole row
                written, failed = os.write(chain.fd, data), None
            except OSError as exc:
                written, failed = 0, exc
            if written != len(data):  # failed or short: the full path (finish, or cut back; the reserve)
                problem = self._write_rows(chain, data, count, written, failed)
                if problem is not None:
                    return problem
            chain.size += len(data)
            chain.seq, chain.head, chain.signer_fp, chain.revoked = state
            chain.signer, chain.refresh = signer, False
            chain.lease.bind(chain.agent_id, signer.fingerprint, signer.marker)
        finally:
            self._unlock_chain(chain)
        if not self._dirty:
            self._wake.set()
        self._dirty.add(chain)
        if ack is not None:
            chain.waiting.append(ack)
            self._urgent.set()
        elif chain.seq - chain.sealed_seq >= self.checkpoint_every and not self._urgent.is_set():
            self._urgent.set()
        return None

    def _lock_chain(self, chain: _Chain) -> None:
        """Lock the chain file for this thread's rows (at once when this process holds its lease).

        A writer that finds it locked by another process asks the holder for it (the lease's request counter),
        and keeps from holding it across rows itself for a while, so the two take turns row by row. Before it
        waits it gives up every lease this ledger holds: a process waiting for a chain while holding another
        that the first one's holder waits for would otherwise wait forever (its committer, which gives leases
        up, needs the lock this thread holds).
        """
        if chain.lease.held:
            return
        try:
            fcntl.flock(chain.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            for other in self._chains.values():
                if other.lease is not None:
                    other.lease.release()
            chain.lease.allowed = 0
            chain.contended_at = time.monotonic()
            ask_for(chain.path, chain.lease_map)
            fcntl.flock(chain.fd, fcntl.LOCK_EX)

    @staticmethod
    def _unlock_chain(chain: _Chain) -> None:
        chain.lease.held = 0
        fcntl.flock(chain.fd, fcntl.LOCK_UN)

    def _write_rows(
        self, chain: _Chain, data: bytes, count: int, done: int = 0, failed: OSError | None = None
    ) -> str | None:
        """Append ``data``; None, or why not (a full disk falls back on the reserve).

        ``done`` bytes of it are already written, or the first ``write`` failed with ``failed``.
        """
        try:
            if failed is not None:  # as _write_all does on a failure: cut back to the last complete row
                with contextlib.suppress(OSError):
                    os.ftruncate(chain.fd, chain.size)
                raise failed
            self._write_all(chain, data, done)
        except OSError as exc:
            why = describe_os_error(exc, chain.path)
            if not (is_full(exc) and self.reserve.release()):
                return self._fail(count, why)
            # The disk is full: the reserve's space takes this row (its call already ran), and the ledger
            # reports itself unavailable until the reserve can be made again.
            logger.error("ledger: %s; wrote the pending row into the reserve", why)
            self.failure = why
            try:
                self._write_all(chain, data)
            except OSError as again:
                return self._fail(count, describe_os_error(again, chain.path))
        return None

    @staticmethod
    def _write_all(chain: _Chain, data: bytes, done: int = 0) -> None:
        """Append ``data`` (``done`` bytes already written); on failure cut back to the last complete row, re-raise."""
        try:
            written = done or os.write(chain.fd, data)
            while written < len(data):
                written += os.write(chain.fd, data[written:])
        except OSError:
            # Leave no partial row behind: the chain must stay verifiable after a failed write.
            with contextlib.suppress(OSError):
                os.ftruncate(chain.fd, chain.size)
            raise

    @staticmethod
    def _row(state: list[Any], signer: Signer, row: Fields) -> bytes:
        action, target, outcome, detail, args_fp, principal, result_fp, rule, refs = row
        if refs is None:  # the common row: hash, mark and line in one call (native when built)
            seq, fp = state[0] + 1, signer.fingerprint
            built = row_line(signer.agent_id, seq, state[1], fp, signer.marker, _now_ms(), action, target, outcome,
                             detail, args_fp, principal, result_fp, rule)  # fmt: skip
            if built is not None:
                state[0], state[1], state[2] = seq, built[1], fp
                return built[0]
        if not needs_no_clip(target, detail, args_fp, principal, result_fp, rule):  # else field by field
            target, detail = _clip(target, MAX_TARGET), _clip(detail, MAX_DETAIL)
            args_fp, principal = _clip_opt(args_fp, MAX_SHORT), _clip_opt(principal, MAX_SHORT)
            result_fp, rule = _clip_opt(result_fp, MAX_SHORT), _clip_opt(rule, MAX_SHORT)
        return ChainWriter._line(
            state,
            signer,
            action=action,
            target=target,
            outcome=outcome,
            detail=detail,
            args_fp=args_fp,
            principal=principal,
            result_fp=result_fp,
            rule=rule,
            refs=_clip_refs(refs),
        )

    @staticmethod
    def _line(
        state: list[Any],
        signer: Signer,
        *,
        action: str,
        target: str,
        outcome: str,
        detail: str,
        args_fp: str | None = None,
        principal: str | None = None,
        result_fp: str | None = None,
        rule: str | None = None,
        refs: dict[str, str] | None = None,
        signed: bool = False,
    ) -> bytes:
        """One row as the line stored (chained on ``state``, which it advances); signed, or marked."""
        seq, prev = state[0] + 1, state[1]
        at_ms = _now_ms()
        fp = signer.fingerprint
        digest = row_hash(
            agent_id=signer.agent_id,
            seq=seq,
            at_ms=at_ms,
            action=action,
            outcome=outcome,
            target=target,
            args_fp=args_fp,
            detail=detail,
            signer_fp=fp,
            principal=principal,
            result_fp=result_fp,
            rule=rule,
            prev_hash=prev,
            refs=canonical_refs(refs),
        )
        state[0], state[1], state[2] = seq, digest, fp
        signature = signer.sign(digest).hex() if signed else ""
        mark = None if signed else signer.mark(digest)
        if refs is None:
            return encode_line(signer.agent_id, seq, prev, digest, signature, fp, action, target, outcome, args_fp,
                                detail, at_ms, principal, result_fp, rule, mark)  # fmt: skip
        # The same keys, in the same order, as LedgerRow.
        row: dict[str, Any] = {
            "agent_id": signer.agent_id,
            "seq": seq,
            "prev_hash": None if prev is None else prev.hex(),
            "hash": digest.hex(),
            "signature": signature,
            "signer_fp": fp,
            "action": action,
            "target": target,
            "outcome": outcome,
            "args_fp": args_fp,
            "detail": detail,
            "at_ms": at_ms,
            "principal": principal,
            "result_fp": result_fp,
            "rule": rule,
            "refs": refs,
        }
        if mark is not None:
            row["mark"] = mark
        return (_ROW_ENCODER.encode(row) + "\n").encode("utf-8")

    def _identity_rows(self, chain: _Chain, state: list[Any], out: list[bytes]) -> Signer:
        """Append the genesis, rotation and revocation rows the keystore calls for; return the active signer."""
        agent_id = chain.agent_id
        active = self.keystore.signer(agent_id)
        if state[0] == 0:
            detail = f"chain opened under key {active.fingerprint}"
            out.append(
                self._line(state, active, action="identity_created", target=active.fingerprint, outcome="ok",
                           detail=detail, signed=True)
            )  # fmt: skip
        elif state[2] != active.fingerprint:
            # The old key vouches for the new one, so a key swapped in behind the ledger's back fails verify.
            old = self.keystore.signer_for(agent_id, state[2])
            detail = f"key rotated from {old.fingerprint} to {active.fingerprint}"
            out.append(
                self._line(state, old, action="identity_rotated", target=active.fingerprint, outcome="ok",
                           detail=detail, signed=True)
            )  # fmt: skip
            state[2] = active.fingerprint  # rows after the rotation row are signed by the new key
        if not state[3] and self.keystore.is_revoked(agent_id):
            detail = f"identity revoked; the agent keeps signing under key {active.fingerprint}"
            out.append(
                self._line(state, active, action="identity_revoked", target=active.fingerprint, outcome="ok",
                           detail=detail, signed=True)
            )  # fmt: skip
            state[3] = True
        return active

    # ---- opening a chain, and reading its head back --------------------------------------------

    def _open_chain(self, agent_id: str) -> _Chain:
        chain = self._chains.pop(agent_id, None)
        if chain is not None:
            self._chains[agent_id] = chain  # most recently used last
            return chain
        if len(self._chains) >= _MAX_OPEN_CHAINS:
            # Bound open file descriptors; the committer seals the evicted chain and closes its file.
            oldest = self._chains.pop(next(iter(self._chains)))
            oldest.retired = True
            close_lease(oldest.lease, oldest.lease_map)  # now: reopening it here must not wait for ourselves
            if not self._dirty:
                self._wake.set()
            self._dirty.add(oldest)
        check_agent_id(agent_id)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.chains_dir.mkdir(exist_ok=True, mode=0o700)
        path, ckpt_path = self._chain_paths(agent_id)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        chain = _Chain(agent_id, path, ckpt_path, fd)
        chain.lease, chain.lease_map = open_lease(path, fd)
        self._lock_chain(chain)
        try:
            self._load_state(chain)
        finally:
            self._unlock_chain(chain)
        self._chains[agent_id] = chain
        if chain.seq > chain.sealed_seq:  # rows a crashed writer left unsealed: seal them now
            if not self._dirty:
                self._wake.set()
            self._dirty.add(chain)
            self._urgent.set()
        return chain

    def _load_state(self, chain: _Chain) -> str | None:
        """Read the chain's head (chain file ``flock``-ed), checking and keeping or cutting the rows after it.

        On a chain already read, only the rows appended since (by another process) are read. Returns
        (and stores in ``chain.broken``) why the chain cannot be appended to, or None.
        """
        size = os.fstat(chain.fd).st_size
        base: tuple[int, bytes | None, str | None] | None = None
        if 0 < chain.size <= size:
            # Rows other processes appended since our last one. Anything short of a clean continuation of our
            # head (a cut below it, a row that does not chain on it) is read again from the last signature.
            start, base = chain.size, (chain.seq, chain.head, chain.signer_fp)
            lines = self._complete_lines(chain, start, size)
            kept, head, why = self._check_tail(chain, lines, base)
            if kept < len(lines):
                base = None
        if base is None:
            start, lines, base = self._from_last_signature(chain, size)
            if base is None:
                if lines:
                    chain.broken = f"{chain.path}: no signed row and no checkpoint vouches for its rows"
                    return chain.broken
                base = (0, None, None)
            chain.sealed_seq = base[0]
            kept, head, why = self._check_tail(chain, lines, base)
        end = start + sum(len(line) + 1 for line in lines[:kept])
        if end != size:
            os.ftruncate(chain.fd, end)
            os.fsync(chain.fd)
            logger.warning(
                "ledger: %s: cut %d byte(s) after seq %d that this ledger never acknowledged (%s); earlier rows kept",
                chain.path,
                size - end,
                head[0],
                why or "a row torn by a crash",
            )
        chain.size = end
        chain.seq, chain.head, chain.signer_fp = head
        if chain.seq and self.keystore.is_revoked(chain.agent_id):
            with chain.path.open("rb") as fh:
                chain.revoked = b'"action": "identity_revoked"' in fh.read()
        else:
            chain.revoked = False
        chain.refresh = True
        return None

    def _from_last_signature(
        self, chain: _Chain, size: int
    ) -> tuple[int, list[bytes], tuple[int, bytes | None, str | None] | None]:
        """Where the rows after the last one a signature vouches for start, those rows, and that row's head."""
        sealed = _checkpoint_seq(chain.ckpt_path)
        window = _TAIL_WINDOW
        while True:
            start = max(0, size - window)
            lines = self._complete_lines(chain, start, size)
            if start > 0 and lines:
                start += len(lines[0]) + 1  # the window may begin inside a row
                lines = lines[1:]
            tail_at, base = _signed_boundary(lines, sealed)
            if base is not None or start == 0:
                return start + sum(len(line) + 1 for line in lines[:tail_at]), lines[tail_at:], base
            window *= 8  # the last signature lies further back: read more

    @staticmethod
    def _complete_lines(chain: _Chain, start: int, size: int) -> list[bytes]:
        """The complete lines of the chain file between ``start`` and ``size`` (a torn last line left out)."""
        data = os.pread(chain.fd, size - start, start)
        return data.split(b"\n")[:-1]

    def _check_tail(
        self, chain: _Chain, lines: list[bytes], base: tuple[int, bytes | None, str | None]
    ) -> tuple[int, tuple[int, bytes | None, str | None], str | None]:
        """How many of ``lines`` chain on ``base`` and were written by a key holder; the new head; why it stopped."""
        seq, head, fp = base
        signers: dict[str, Signer] = {}
        for count, raw in enumerate(lines):
            try:
                row = LedgerRow.from_json(json.loads(raw))
                if row.seq != seq + 1 or row.agent_id != chain.agent_id:
                    raise ValueError(f"seq {row.seq} of agent {row.agent_id!r} follows seq {seq}")
                if row.prev_hash != (None if head is None else head.hex()):
                    raise ValueError(f"row {row.seq} does not chain on the row before")
                digest = hash_of_row(row)
                if digest.hex() != row.hash:
                    raise ValueError(f"row {row.seq} does not match its hash")
                if not row.signature:
                    signer = signers.get(row.signer_fp)
                    if signer is None:
                        signer = signers[row.signer_fp] = self.keystore.signer_for(chain.agent_id, row.signer_fp)
                    if row.mark != signer.mark(digest):
                        raise ValueError(f"row {row.seq} carries no signature and no mark of its writer")
            except (ValueError, TypeError, AlephError) as exc:
                return count, (seq, head, fp), str(exc)
            seq, head, fp = row.seq, digest, row.signer_fp
        return len(lines), (seq, head, fp), None


def _checkpoint_seq(ckpt_path: Path) -> int:
    """The seq of the newest checkpoint stored beside a chain (0 when there is none or it is unreadable)."""
    raw = last_line(ckpt_path)
    with contextlib.suppress(ValueError, TypeError, KeyError):
        if raw is not None:
            return int(json.loads(raw)["seq"])
    return 0


def _signed_boundary(lines: list[bytes], sealed: int) -> tuple[int, tuple[int, bytes | None, str | None] | None]:
    """Index just after the last row a signature vouches for (signed, or at most ``sealed``), and that row's head.

    ``(0, None)`` when no such row is among ``lines``. Rows are read from the end.
    """
    for index in range(len(lines) - 1, -1, -1):
        try:
            data = json.loads(lines[index])
            seq, signature = data["seq"], data["signature"]
            if signature or (type(seq) is int and seq <= sealed):
                return index + 1, (int(seq), bytes.fromhex(data["hash"]), str(data["signer_fp"]))
        except (ValueError, TypeError, KeyError):
            continue  # not a readable row: the tail check that follows cuts from it on
    return 0, None
