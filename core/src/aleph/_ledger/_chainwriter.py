"""The ledger's writer thread: it drains the queue, chains, signs and group-commits rows per agent.

:class:`ChainWriter` is the writer-thread half of :class:`~aleph._ledger._writer.Ledger`; the caller
side (queueing, flushing, closing) and the readers live there. Here: the state of each open chain
file, reading a chain's head back after a crash (cutting a torn or unsigned tail), building and
sealing rows, and checkpoints.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aleph._errors import AlephError
from aleph._ledger._clip import MAX_DETAIL, MAX_SHORT, MAX_TARGET, _clip, _clip_opt, _clip_refs, _now_ms
from aleph._ledger._durability import Ack, Reserve, describe_os_error, is_full
from aleph._ledger._format import (
    ACTIONS,
    IDENTITY_ACTIONS,
    OUTCOMES,
    LedgerRecord,
    LedgerRow,
    canonical_refs,
    read_lines,
    row_hash,
    signed_checkpoint,
    unsigned_tail_start,
)
from aleph._ledger._keystore import Keystore, KeystoreError, Signer, agent_file_stem, check_agent_id

__all__ = ["ChainWriter"]

logger = logging.getLogger("aleph.ledger")

_MAX_OPEN_CHAINS = 256
SIGN_EVERY = 64
"""A signature at least every this many rows of a chain (see :func:`_seal`)."""
# A row is at most ~10 KiB (fields are clipped), so the last signed row is within this window.
_TAIL_WINDOW = 1 << 20


class _Flush:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class _Sync:
    """Ask the writer to record the agent's key state (rotation, revocation) without another record."""

    __slots__ = ("agent_id",)

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id


class _Stop:
    __slots__ = ()


class _Later:
    """A record the writer builds: ``build`` makes it from values the caller can no longer change."""

    __slots__ = ("agent_id", "build")

    def __init__(self, agent_id: str, build: Callable[[], LedgerRecord]) -> None:
        self.agent_id = agent_id
        self.build = build


class _Durable:
    """A record (or a deferred one) whose caller waits on ``ack`` until its row is durable."""

    __slots__ = ("ack", "item")

    def __init__(self, item: LedgerRecord | _Later, ack: Ack) -> None:
        self.item = item
        self.ack = ack


_Item = LedgerRecord | _Later | _Durable | _Flush | _Sync | _Stop


@dataclass(slots=True)
class _Chain:
    """The writer's view of one agent's chain file."""

    agent_id: str
    path: Path
    ckpt_path: Path
    fd: int
    size: int = 0
    seq: int = 0
    head: bytes | None = None
    signer_fp: str | None = None
    revoked: bool = False
    ckpt_seq: int = 0
    broken: str | None = None


_ROW_ENCODER = json.JSONEncoder(ensure_ascii=False)  # json.dumps(row, ensure_ascii=False) without a new encoder per row


@dataclass(slots=True)
class _Pending:
    """A row built in a batch, waiting for :func:`_seal` to decide whether it carries a signature."""

    row: dict[str, Any]
    digest: bytes
    signer: Signer


def _seal(rows: list[_Pending]) -> bytes:
    """Sign the rows that must carry a signature and serialise the batch.

    Each row's hash covers every row before it, so one Ed25519 signature vouches for the whole run
    of unsigned rows that precede it under the same key. Signed: the last row of the batch (a
    batch never ends unsigned), the last row before a key change, identity rows, and at least every
    :data:`SIGN_EVERY`-th row, which bounds how far back the writer looks to find the last signed
    row after a crash.
    """
    out = []
    run = 0
    last = len(rows) - 1
    for i, pending in enumerate(rows):
        row = pending.row
        run += 1
        if (
            i == last
            or run >= SIGN_EVERY
            or row["action"] in IDENTITY_ACTIONS
            or rows[i + 1].signer.fingerprint != pending.signer.fingerprint
        ):
            row["signature"] = pending.signer.sign(pending.digest).hex()
            run = 0
        out.append(_ROW_ENCODER.encode(row))
    return "\n".join(out).encode("utf-8") + b"\n"


class ChainWriter:
    """The writer-thread half of :class:`~aleph._ledger._writer.Ledger` (a mixin: it reads the ledger's fields)."""

    directory: Path
    chains_dir: Path
    keystore: Keystore
    checkpoint_every: int
    lost_appends: int
    faults: dict[str, str]
    failure: str | None
    reserve: Reserve
    _queue: queue.SimpleQueue[_Item]
    _lock: threading.Lock
    _chains: dict[str, _Chain]
    _last_loss: str

    def _lose(self, count: int, why: str) -> None:
        with self._lock:
            self.lost_appends += count
            self._last_loss = why
        logger.error("ledger: %d record(s) not stored: %s", count, why)

    def _build(self, later: _Later) -> LedgerRecord | None:
        """The record ``later`` makes; None (counted lost, logged) when it cannot be built."""
        try:
            record = later.build()
            if record.agent_id != later.agent_id:
                raise ValueError(f"built for agent {record.agent_id!r}, queued for {later.agent_id!r}")
        except Exception:
            logger.exception("ledger: a deferred record could not be built")
            self._lose(1, "it could not be built")
            return None
        return record

    # ---- writer side -------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < 4096:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                stop = self._process(batch)
            except Exception:  # the writer must outlive any single bad batch
                logger.exception("ledger: writer failed on a batch")
                stop = any(isinstance(item, _Stop) for item in batch)
                for item in batch:
                    if isinstance(item, _Flush):
                        item.event.set()
                    elif isinstance(item, _Durable):
                        item.ack.settle("the ledger's writer failed on this batch (see the log)")
            if stop:
                return

    def _process(self, batch: list[_Item]) -> bool:
        per_agent: dict[str, list[LedgerRecord | _Sync]] = {}
        flushes: list[_Flush] = []
        acks: dict[str, list[tuple[LedgerRecord, Ack]]] = {}
        stop = False
        for item in batch:
            if isinstance(item, _Durable):
                inner = item.item
                record = self._build(inner) if isinstance(inner, _Later) else inner
                if record is None:
                    item.ack.settle(f"the ledger could not build the row: {self._last_loss}")
                    continue
                per_agent.setdefault(record.agent_id, []).append(record)
                acks.setdefault(record.agent_id, []).append((record, item.ack))
            elif isinstance(item, _Flush):
                flushes.append(item)
            elif isinstance(item, _Stop):
                stop = True
            elif isinstance(item, _Later):
                record = self._build(item)
                if record is not None:
                    per_agent.setdefault(item.agent_id, []).append(record)
            else:  # a record (or a wrongly typed object, which _commit counts as lost)
                per_agent.setdefault(getattr(item, "agent_id", ""), []).append(item)
        for agent_id, items in per_agent.items():
            stored = self._commit(agent_id, items)
            for record, ack in acks.get(agent_id, ()):
                ack.seq = stored.get(id(record))
                ack.settle(None if ack.seq is not None else self._last_loss)
        if stop:
            for chain in self._chains.values():
                self._final_checkpoint(chain)
                with contextlib.suppress(OSError):
                    os.close(chain.fd)
            self._chains.clear()
        for marker in flushes:
            marker.event.set()
        return stop

    def _chain_paths(self, agent_id: str) -> tuple[Path, Path]:
        stem = agent_file_stem(agent_id)
        return self.chains_dir / f"{stem}.jsonl", self.chains_dir / f"{stem}.ckpt.jsonl"

    def _open_chain(self, agent_id: str) -> _Chain:
        chain = self._chains.pop(agent_id, None)
        if chain is not None:
            self._chains[agent_id] = chain  # most recently used last
            return chain
        if len(self._chains) >= _MAX_OPEN_CHAINS:
            # Bound open file descriptors; an evicted chain reloads its head from disk on next use.
            oldest = self._chains.pop(next(iter(self._chains)))
            self._final_checkpoint(oldest)
            with contextlib.suppress(OSError):
                os.close(oldest.fd)
        check_agent_id(agent_id)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.chains_dir.mkdir(exist_ok=True, mode=0o700)
        path, ckpt_path = self._chain_paths(agent_id)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        chain = _Chain(agent_id, path, ckpt_path, fd)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            self._load_state(chain)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        self._chains[agent_id] = chain
        return chain

    def _load_state(self, chain: _Chain) -> str | None:
        """Read the chain head from the file tail, cutting a torn final line left by a crash.

        Returns (and stores in ``chain.broken``) why the chain cannot be appended to, or None.
        """
        size = os.fstat(chain.fd).st_size
        start = max(0, size - _TAIL_WINDOW)
        tail = os.pread(chain.fd, size - start, start)
        cut = tail.rfind(b"\n")
        keep = start + cut + 1 if cut >= 0 else start
        if keep != size:
            if cut < 0 and start > 0:
                chain.broken = f"{chain.path}: no complete row in the last {_TAIL_WINDOW} bytes"
                return chain.broken
            os.ftruncate(chain.fd, keep)
            os.fsync(chain.fd)
            logger.warning(
                "ledger: %s ended in a torn row (%d bytes, a write cut short by a crash); cut it, earlier rows kept",
                chain.path,
                size - keep,
            )
            tail = tail[: keep - start]
        lines = tail.split(b"\n")[:-1]
        # Rows after the last signature belong to a batch whose write a crash cut short: never acknowledged.
        unsigned = unsigned_tail_start(lines)
        if unsigned is not None:
            if unsigned == 0 and start > 0:
                chain.broken = f"{chain.path}: no signed row in the last {_TAIL_WINDOW} bytes"
                return chain.broken
            cut_to = start + sum(len(line) + 1 for line in lines[:unsigned])
            os.ftruncate(chain.fd, cut_to)
            os.fsync(chain.fd)
            logger.warning(
                "ledger: %s ended in %d unsigned row(s) of a batch cut short by a crash; cut them, earlier rows kept",
                chain.path,
                len(lines) - unsigned,
            )
            keep, lines = cut_to, lines[:unsigned]
        chain.size = keep
        chain.seq, chain.head, chain.signer_fp, chain.revoked = 0, None, None, False
        if lines:
            try:
                last = LedgerRow.from_json(json.loads(lines[-1]))
            except ValueError as exc:
                chain.broken = f"{chain.path}: the last row is unreadable ({exc}); run `aleph ledger verify`"
                return chain.broken
            chain.seq, chain.head, chain.signer_fp = last.seq, bytes.fromhex(last.hash), last.signer_fp
            if self.keystore.is_revoked(chain.agent_id):
                with chain.path.open("rb") as fh:
                    chain.revoked = b'"action": "identity_revoked"' in fh.read()
        chain.ckpt_seq = 0
        ckpt_lines, _ = read_lines(chain.ckpt_path)
        for raw in reversed(ckpt_lines):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                chain.ckpt_seq = int(json.loads(raw)["seq"])
                break
        return None

    def _row(
        self,
        chain_state: list[Any],
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
    ) -> _Pending:
        seq, prev = chain_state[0] + 1, chain_state[1]
        agent_id = signer.agent_id
        at_ms = _now_ms()
        digest = row_hash(
            agent_id=agent_id,
            seq=seq,
            at_ms=at_ms,
            action=action,
            outcome=outcome,
            target=target,
            args_fp=args_fp,
            detail=detail,
            signer_fp=signer.fingerprint,
            principal=principal,
            result_fp=result_fp,
            rule=rule,
            prev_hash=prev,
            refs=canonical_refs(refs),
        )
        # The same keys, in the same order, as LedgerRow (built directly: asdict() costs on the hot path).
        row = {
            "agent_id": agent_id,
            "seq": seq,
            "prev_hash": None if prev is None else prev.hex(),
            "hash": digest.hex(),
            "signature": "",  # filled in by _seal for the rows that carry one
            "signer_fp": signer.fingerprint,
            "action": action,
            "target": target,
            "outcome": outcome,
            "args_fp": args_fp,
            "detail": detail,
            "at_ms": at_ms,
            "principal": principal,
            "result_fp": result_fp,
            "rule": rule,
        }
        if refs:
            row["refs"] = refs
        chain_state[0], chain_state[1], chain_state[2] = seq, digest, signer.fingerprint
        if seq % self.checkpoint_every == 0:
            chain_state[4].append((seq, digest, signer.fingerprint))
        return _Pending(row, digest, signer)

    def _identity_rows(self, chain: _Chain, state: list[Any], out: list[_Pending]) -> Signer:
        """Append the genesis, rotation and revocation rows the keystore calls for; return the active signer."""
        agent_id = chain.agent_id
        active = self.keystore.signer(agent_id)
        if state[0] == 0:
            out.append(
                self._row(
                    state,
                    active,
                    action="identity_created",
                    target=active.fingerprint,
                    outcome="ok",
                    detail=f"chain opened under key {active.fingerprint}",
                )
            )
        elif state[2] != active.fingerprint:
            # The old key vouches for the new one, so a key swapped in behind the ledger's back fails verify.
            old = self.keystore.signer_for(agent_id, state[2])
            out.append(
                self._row(
                    state,
                    old,
                    action="identity_rotated",
                    target=active.fingerprint,
                    outcome="ok",
                    detail=f"key rotated from {old.fingerprint} to {active.fingerprint}",
                )
            )
            state[2] = active.fingerprint  # rows after the rotation row are signed by the new key
        if not state[3] and self.keystore.is_revoked(agent_id):
            out.append(
                self._row(
                    state,
                    active,
                    action="identity_revoked",
                    target=active.fingerprint,
                    outcome="ok",
                    detail=f"identity revoked; the agent keeps signing under key {active.fingerprint}",
                )
            )
            state[3] = True
        return active

    def _commit(self, agent_id: str, items: list[LedgerRecord | _Sync]) -> dict[int, int]:
        """Write ``items`` to the agent's chain; returns the ids of the records now durable, with their seq."""
        records = sum(1 for item in items if not isinstance(item, _Sync))
        try:
            return self._commit_locked(agent_id, items, records)
        except Exception as exc:  # an unexpected failure loses this agent's batch, never the writer
            logger.exception("ledger: unexpected failure writing the chain of agent %r", agent_id)
            self._lose(records, f"unexpected {type(exc).__name__}: {exc}")
            return {}

    def _commit_locked(self, agent_id: str, items: list[LedgerRecord | _Sync], records: int) -> dict[int, int]:
        try:
            chain = self._open_chain(agent_id)
        except OSError as exc:
            self._fail(records, describe_os_error(exc, exc.filename or self.chains_dir))
            return {}
        except (ValueError, AlephError) as exc:
            self._lose(records, f"cannot open the chain of agent {agent_id!r}: {exc}")
            return {}
        if chain.broken:
            self._lose(records, chain.broken)
            return {}
        fcntl.flock(chain.fd, fcntl.LOCK_EX)
        try:
            if os.fstat(chain.fd).st_size != chain.size:
                broken = self._load_state(chain)  # another process appended since our last batch
                if broken:
                    self._lose(records, broken)
                    return {}
            # seq, head hash, signer fingerprint, revocation recorded, checkpoints due (seq, head, signer)
            state: list[Any] = [chain.seq, chain.head, chain.signer_fp, chain.revoked, []]
            lines: list[_Pending] = []
            stored: dict[int, int] = {}
            signer: Signer | None = None
            for position, item in enumerate(items):
                try:
                    # Key state is read once per batch, and again after an explicit rotate/revoke.
                    if signer is None or isinstance(item, _Sync):
                        signer = self._identity_rows(chain, state, lines)
                    if isinstance(item, _Sync):
                        continue
                    if item.action not in ACTIONS or item.outcome not in OUTCOMES:
                        self._lose(1, f"unknown action {item.action!r} or outcome {item.outcome!r}")
                        continue
                    lines.append(
                        self._row(
                            state,
                            signer,
                            action=item.action,
                            target=_clip(item.target, MAX_TARGET),
                            outcome=item.outcome,
                            detail=_clip(item.detail, MAX_DETAIL),
                            args_fp=_clip_opt(item.args_fp, MAX_SHORT),
                            principal=_clip_opt(item.principal, MAX_SHORT),
                            result_fp=_clip_opt(item.result_fp, MAX_SHORT),
                            rule=_clip_opt(item.rule, MAX_SHORT),
                            refs=_clip_refs(item.refs),
                        )
                    )
                    stored[id(item)] = state[0]
                except KeystoreError as exc:
                    # A key that no longer matches the chain cannot vouch for anything: stop this chain, loudly.
                    why = f"the ledger of agent {agent_id!r} stopped taking rows: {exc}"
                    chain.broken = why
                    if agent_id not in self.faults:
                        logger.error("%s; run `aleph doctor`", why)
                    self.faults[agent_id] = why
                    self._lose(sum(1 for i in items[position:] if isinstance(i, LedgerRecord)), why)
                    break
                except AlephError as exc:
                    self._lose(1 if isinstance(item, LedgerRecord) else 0, f"agent {agent_id!r}: {exc}")
            if not lines:
                return stored
            data = _seal(lines)
            try:
                self._write_batch(chain, data)
            except OSError as exc:
                why = describe_os_error(exc, chain.path)
                if not (is_full(exc) and self.reserve.release()):
                    self._fail(len(stored), why)
                    return {}
                # The disk is full: the reserve's space takes these rows (their calls already ran), and
                # the ledger reports itself unavailable until the reserve can be made again.
                logger.error("ledger: %s; wrote the pending rows into the reserve", why)
                self.failure = why
                try:
                    self._write_batch(chain, data)
                except OSError as again:
                    self._fail(len(stored), describe_os_error(again, chain.path))
                    return {}
            chain.size += len(data)
            chain.seq, chain.head, chain.signer_fp, chain.revoked = state[:4]
            # Checkpoints follow the rows they vouch for onto the disk, never precede them.
            self._write_checkpoints(chain, state[4])
            return stored
        finally:
            fcntl.flock(chain.fd, fcntl.LOCK_UN)

    def _write_batch(self, chain: _Chain, data: bytes) -> None:
        """Append ``data`` and fsync; on failure cut back to the last complete row and re-raise."""
        try:
            written = 0
            while written < len(data):
                written += os.write(chain.fd, data[written:])
            os.fsync(chain.fd)
        except OSError:
            # Leave no partial row behind: the chain must stay verifiable after a failed write.
            with contextlib.suppress(OSError):
                os.ftruncate(chain.fd, chain.size)
            raise

    def _fail(self, count: int, why: str) -> None:
        """The ledger cannot write: ``count`` records are lost and it reports itself unavailable."""
        if self.failure != why:
            logger.error("ledger: cannot record: %s", why)
        self.failure = why
        self._lose(count, why)

    def _write_checkpoints(self, chain: _Chain, due: list[tuple[int, bytes, str]]) -> None:
        if not due:
            return
        try:
            lines = b"".join(
                json.dumps(signed_checkpoint(self.keystore.signer_for(chain.agent_id, fp), seq, head)).encode() + b"\n"
                for seq, head, fp in due
            )
            fd = os.open(chain.ckpt_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines)
                os.fsync(fd)
            finally:
                os.close(fd)
            chain.ckpt_seq = due[-1][0]
        except (OSError, AlephError) as exc:
            logger.error("ledger: checkpoint of agent %r at seq %d not written: %s", chain.agent_id, due[-1][0], exc)

    def _final_checkpoint(self, chain: _Chain) -> None:
        if chain.broken or chain.seq <= chain.ckpt_seq:
            return
        fcntl.flock(chain.fd, fcntl.LOCK_EX)
        try:
            if os.fstat(chain.fd).st_size == chain.size and chain.head is not None and chain.signer_fp:
                self._write_checkpoints(chain, [(chain.seq, chain.head, chain.signer_fp)])
        finally:
            fcntl.flock(chain.fd, fcntl.LOCK_UN)
