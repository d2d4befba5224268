"""The ledger's committer thread: it makes written rows durable on disk and seals them with a signature.

Rows reach the chain file on the caller's thread (:mod:`aleph._ledger._chainwriter`); this thread, woken
when a chain has new rows, waits up to :data:`SEAL_INTERVAL` for more (no wait when a caller waits for
its fsync, or :attr:`~aleph._ledger._writer.Ledger.checkpoint_every` rows are unsealed), then per chain:
``fsync`` (which also wakes the callers waiting for it), and one Ed25519 signature over the chain's head
as a checkpoint appended beside the chain (``<agent>.ckpt.jsonl``, itself fsync'd after the rows). Since
every row hash covers the rows before it, that one signature vouches for every row up to the head.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time

from aleph._errors import AlephError
from aleph._ledger._chainwriter import ChainWriter, _Chain, _checkpoint_seq
from aleph._ledger._durability import describe_os_error
from aleph._ledger._format import signed_checkpoint
from aleph._ledger._lease import LEASE_HOLDOFF, close_lease

__all__ = ["SEAL_INTERVAL", "Committer"]

logger = logging.getLogger("aleph.ledger")

SEAL_INTERVAL = 0.02
"""Seconds the committer gathers rows before it fsyncs and seals them (unless a caller waits on the fsync)."""


class Committer(ChainWriter):
    """The committer half of :class:`~aleph._ledger._writer.Ledger` (a mixin, like :class:`ChainWriter`)."""

    _stopping: bool
    _commit_lock: threading.Lock

    def _run_committer(self) -> None:
        while True:
            self._wake.wait()
            if not self._stopping:
                self._urgent.wait(SEAL_INTERVAL)
            self.commit(seal=self._stopping)
            if self._stopping:
                return

    def commit(self, *, seal: bool = True) -> None:
        """Fsync every chain with rows written since the last commit, and seal it (any thread; serialised).

        Without ``seal`` (the committer's own passes), a chain sealed less than :data:`SEAL_INTERVAL` ago
        with fewer than ``checkpoint_every`` rows waiting is only fsync'd (for callers waiting on that, under
        ``sync = "fsync"``) and sealed on a later pass: one signature per interval, however many fsyncs.
        """
        with self._commit_lock:
            with self._lock:
                dirty, self._dirty = self._dirty, set()
                self._wake.clear()
                self._urgent.clear()
                # Closed after this pass only if retired before it: one retired meanwhile is in the next pass.
                retired = [chain for chain in dirty if chain.retired]
            for chain in dirty:
                try:
                    self._commit_chain(chain, seal)
                except Exception:  # the committer must outlive any single chain's failure
                    logger.exception("ledger: committing the chain of agent %r failed", chain.agent_id)
            for chain in retired:
                with self._lock:
                    close_lease(chain.lease, chain.lease_map)
                with contextlib.suppress(OSError):
                    os.close(chain.fd)

    def _commit_chain(self, chain: _Chain, seal: bool) -> None:
        with self._lock:
            self._end_lease(chain)
            seq, head, fp = chain.seq, chain.head, chain.signer_fp
            waiting, chain.waiting = chain.waiting, []
            signer = chain.signer if chain.signer is not None and chain.signer.fingerprint == fp else None
            due = head is not None and fp is not None and seq > chain.sealed_seq
            if due and not seal and not chain.retired:
                seal = seq - chain.sealed_seq >= self.checkpoint_every
                seal = seal or time.monotonic() - chain.sealed_at >= SEAL_INTERVAL
                if not seal:  # later: this chain comes back on the next pass
                    if not self._dirty:
                        self._wake.set()
                    self._dirty.add(chain)
                    due = False
        error = None
        try:
            os.fsync(chain.fd)  # every row written so far, those of the callers in `waiting` included
        except OSError as exc:
            error = describe_os_error(exc, chain.path)
            self._fail(0, error)
        for ack in waiting:
            ack.settle(error)
        if error is not None or not due:
            return  # the key state is looked at after each seal: at most once per interval
        assert head is not None and fp is not None
        try:
            if signer is None:
                signer = self.keystore.signer_for(chain.agent_id, fp)
            line = json.dumps(signed_checkpoint(signer, seq, head)).encode() + b"\n"
            fd = os.open(chain.ckpt_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # checkpoints of several processes go in in seq order
                if seq > _checkpoint_seq(chain.ckpt_path):
                    _append_whole(fd, line)
                    os.fsync(fd)
            finally:
                os.close(fd)
        except (OSError, AlephError) as exc:
            logger.error("ledger: seal of agent %r at seq %d not written: %s", chain.agent_id, seq, exc)
            return
        with self._lock:
            chain.sealed_seq = max(chain.sealed_seq, seq)
            chain.sealed_at = time.monotonic()
        self._check_keys(chain)

    @staticmethod
    def _end_lease(chain: _Chain) -> None:
        """Give the chain's lock up at every pass (self._lock held): a process that stops writing holds nothing.

        A lease given up because another writer asked for it is allowed again :data:`LEASE_HOLDOFF` later.
        """
        lease = chain.lease
        if lease is None:
            return
        with contextlib.suppress(OSError):
            lease.release()
        if lease.allowed or chain.lease_map is None or chain.retired:
            return
        now = time.monotonic()
        if not chain.contended_at:
            chain.contended_at = now
        elif now - chain.contended_at >= LEASE_HOLDOFF:
            lease.allowed, chain.contended_at = 1, 0.0

    def _check_keys(self, chain: _Chain) -> None:
        """Notice a key rotated or revoked by another process (off the callers' path): re-read before the next row."""
        if chain.retired or chain.broken:
            return
        try:
            active = self.keystore.active_fingerprint(chain.agent_id)
            revoked = self.keystore.is_revoked(chain.agent_id)
        except (OSError, AlephError):
            active, revoked = None, not chain.revoked
        with self._lock:
            if chain.signer is None or active != chain.signer.fingerprint or revoked != chain.revoked:
                chain.refresh = True


def _append_whole(fd: int, line: bytes) -> None:
    """Append ``line`` whole or not at all: a short write (a nearly full disk) is cut back, never left torn.

    A torn checkpoint followed by the next one would read as one unreadable line, and verify trusts the
    newest line; one a killed writer left is cut first.
    """
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        # A line a killed writer left torn: cut it first (reading back from the end to the last newline).
        start = max(0, size - (1 << 16))
        tail = os.pread(fd, size - start, start)
        size = start + tail.rfind(b"\n") + 1 if b"\n" in tail else start
        os.ftruncate(fd, size)
        logger.warning("ledger: cut a torn checkpoint line at the end of %d bytes", size)
    try:
        written = os.write(fd, line)
        while written < len(line):
            written += os.write(fd, line[written:])
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise
