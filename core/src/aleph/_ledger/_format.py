"""The ledger's row format: records, rows, the v2 row hash, checkpoints, and chain verification.

Row hash (version 2 of the reference layout; every displayed field is hashed)::

    SHA-256( b"aleph-agent-ledger-v2" ‖ LP(agent_id) ‖ i64be(seq) ‖ i64be(at_ms) ‖ LP(action) ‖ LP(outcome)
             ‖ LP(target) ‖ OPT(args_fp) ‖ LP(detail) ‖ LP(signer_fp) ‖ OPT(principal) ‖ OPT(result_fp)
             ‖ OPT(rule) [‖ 0x02 ‖ LP(refs)] ‖ prev_hash or 32 zero bytes )

``LP(x)`` = 4-byte big-endian length + UTF-8 bytes; ``OPT(x)`` = ``0x00`` for None, else ``0x01`` + LP(x).
``refs`` (the string references a family attached to the call: team, task, memory ids) is hashed as its canonical
JSON (sorted keys) and only when the row has any, so rows without refs hash exactly as before.
A signature is Ed25519 over the 32-byte hash. Since each hash covers every row before it, one signature
vouches for every row before it under the same key. Identity rows carry their own signature; the other
rows carry ``"signature": ""`` and the writer's ``mark`` (an HMAC of the hash under a key derived from
the private key, which only the recovery at start reads), and are vouched for by the next signature:
a signed row, or a signed checkpoint of the chain's head, which the writer adds beside the chain a few
milliseconds after the rows (see :mod:`aleph._ledger._chainwriter`). Rows at the end of a chain that no
signature vouches for yet are reported as ``unsigned_tail``: a running writer seals them within moments,
and one that crashed leaves them for the next open, which seals those that carry its mark and cuts the rest.
A checkpoint signs
``SHA-256(b"aleph-agent-ledger-checkpoint-v1" ‖ LP(agent_id) ‖ i64be(seq) ‖ head_hash ‖ LP(signer_fp) ‖ i64be(at_ms))``.
The verifier pins the algorithms and domain tags; nothing in a row or checkpoint chooses them.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from aleph._errors import AlephError
from aleph._ledger._keystore import Signer, fingerprint, verify_signature

__all__ = [
    "ACTIONS",
    "CHECKPOINT_DOMAIN",
    "HASH_DOMAIN",
    "IDENTITY_ACTIONS",
    "OUTCOMES",
    "LedgerAction",
    "LedgerError",
    "LedgerOutcome",
    "LedgerRecord",
    "LedgerRow",
    "VerifyReport",
    "canonical_refs",
    "checkpoint_digest",
    "hash_of_row",
    "last_line",
    "read_lines",
    "row_hash",
    "signed_checkpoint",
    "verify_chain",
]

LedgerAction = Literal[
    "tool_call",
    "tool_denied",
    "approval_granted",
    "approval_denied",
    "identity_created",
    "identity_rotated",
    "identity_revoked",
    "checkpoint",
    "tool_event",
]
"""What a row records (``tool_event``: provenance a tool recorded about itself, e.g. memory fed into a turn)."""
LedgerOutcome = Literal["ok", "error", "denied"]
"""How it ended."""

ACTIONS: frozenset[str] = frozenset(get_args(LedgerAction))
OUTCOMES: frozenset[str] = frozenset(get_args(LedgerOutcome))
IDENTITY_ACTIONS: frozenset[str] = frozenset({"identity_created", "identity_rotated", "identity_revoked"})
"""Rows that always carry their own signature."""

HASH_DOMAIN = b"aleph-agent-ledger-v2"
"""Domain tag that starts every row hash."""
CHECKPOINT_DOMAIN = b"aleph-agent-ledger-checkpoint-v1"
"""Domain tag that starts every checkpoint digest."""

_ZERO_HASH = bytes(32)
_I64 = struct.Struct(">q")
_pack_i64 = _I64.pack
_U32 = struct.Struct(">I")


class LedgerError(AlephError):
    """The ledger cannot do what was asked (export a checkpoint of a broken chain, read a missing agent)."""


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """What the chokepoint hands the ledger: one refusal, decision or mutating call.

    ``detail`` must already be redacted. ``args_fp`` is the 32-hex fingerprint of tool + canonical
    arguments (the grant key; the values of secret-named string fields are masked in it);
    ``result_fp`` an optional digest of the result; ``rule`` the rule that decided, when the row
    records a decision.
    """

    agent_id: str
    action: LedgerAction
    target: str
    outcome: LedgerOutcome
    detail: str
    args_fp: str | None = None
    principal: str | None = None
    result_fp: str | None = None
    rule: str | None = None
    refs: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One stored row. Hashes and signatures are lowercase hex; ``prev_hash`` is None only for seq 1."""

    agent_id: str
    seq: int
    prev_hash: str | None
    hash: str
    signature: str
    signer_fp: str
    action: str
    target: str
    outcome: str
    args_fp: str | None
    detail: str
    at_ms: int
    principal: str | None = None
    result_fp: str | None = None
    rule: str | None = None
    refs: dict[str, str] | None = None
    mark: str | None = None
    """The writer's mark on an unsigned row (see the module docstring); not part of the hash."""

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object (the on-disk form; ``refs`` and ``mark`` only when present)."""
        out = asdict(self)
        if out["refs"] is None:
            del out["refs"]
        if out["mark"] is None:
            del out["mark"]
        return out

    @classmethod
    def from_json(cls, data: Any) -> LedgerRow:
        """Parse a stored row; raises ``ValueError`` naming the first bad field."""
        if not isinstance(data, dict):
            raise ValueError("row is not a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
        for name in ("agent_id", "hash", "signature", "signer_fp", "action", "target", "outcome", "detail"):
            if not isinstance(data.get(name), str):
                raise ValueError(f"field {name!r} is missing or not a string")
        for name in ("prev_hash", "args_fp", "principal", "result_fp", "rule", "mark"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"field {name!r} is not a string or null")
        for name in ("seq", "at_ms"):
            if type(data.get(name)) is not int:
                raise ValueError(f"field {name!r} is missing or not an integer")
        refs = data.get("refs")
        if refs is not None and not (
            isinstance(refs, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in refs.items())
        ):
            raise ValueError("field 'refs' is not an object of strings")
        if data["action"] not in ACTIONS:
            raise ValueError(f"unknown action {data['action']!r}")
        if data["outcome"] not in OUTCOMES:
            raise ValueError(f"unknown outcome {data['outcome']!r}")
        return cls(**data)


@dataclass(slots=True)
class VerifyReport:
    """The result of :meth:`Ledger.verify` for one agent.

    ``first_bad_seq`` / ``first_bad_line`` name the first row that failed and ``reason`` says why.
    ``torn_tail`` is true when the file ends in an incomplete line: a write cut short by a crash, never
    acknowledged, which the writer cuts on its next open. ``unsigned_tail`` counts the complete rows at
    the end that no signature vouches for yet: a running writer seals them within moments; after a
    crash the next open seals those its writer marked and cuts the rest. Neither fails verification,
    and neither is counted in ``rows``.
    """

    ok: bool
    rows: int
    first_bad_seq: int | None = None
    reason: str | None = None
    head_hash: str | None = None
    agent_id: str = ""
    first_bad_line: int | None = None
    checkpoint_seq: int | None = None
    torn_tail: bool = False
    signers: list[str] = field(default_factory=list)
    unsigned_tail: int = 0

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object."""
        return asdict(self)


_sha256 = hashlib.sha256
_LP_CACHE: dict[str, bytes] = {}
# Names, fingerprints and principals repeat from row to row: their encoding is kept (short ones, boundedly).
_LP_CACHED_LENGTH = 64
_LP_CACHE_SIZE = 4096


def _lp(value: str) -> bytes:
    cached = _LP_CACHE.get(value)
    if cached is not None:
        return cached
    data = value.encode("utf-8", "surrogatepass")
    out = _U32.pack(len(data)) + data
    if len(value) <= _LP_CACHED_LENGTH and len(_LP_CACHE) < _LP_CACHE_SIZE:
        _LP_CACHE[value] = out
    return out


def _opt(value: str | None) -> bytes:
    return b"\x00" if value is None else b"\x01" + _lp(value)


def canonical_refs(refs: Mapping[str, str] | None) -> str | None:
    """The form ``refs`` is hashed in: sorted-key JSON, or None when there are none."""
    if not refs:
        return None
    return json.dumps(dict(refs), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def row_hash(
    *,
    agent_id: str,
    seq: int,
    at_ms: int,
    action: str,
    outcome: str,
    target: str,
    args_fp: str | None,
    detail: str,
    signer_fp: str,
    principal: str | None,
    result_fp: str | None,
    rule: str | None,
    prev_hash: bytes | None,
    refs: str | None = None,
) -> bytes:
    """The 32-byte SHA-256 of a row in the v2 layout (see the module docstring); ``refs`` in canonical form."""
    # Written out flat (it runs for every row): cached encodings looked up inline, `or` falls back on
    # _lp for one not cached (a cached encoding is never empty: it starts with its 4-byte length).
    lp = _LP_CACHE.get
    return _sha256(
        b"".join(
            (
                HASH_DOMAIN,
                lp(agent_id) or _lp(agent_id),
                _pack_i64(seq),
                _pack_i64(at_ms),
                lp(action) or _lp(action),
                lp(outcome) or _lp(outcome),
                lp(target) or _lp(target),
                b"\x00" if args_fp is None else b"\x01" + (lp(args_fp) or _lp(args_fp)),
                lp(detail) or _lp(detail),
                lp(signer_fp) or _lp(signer_fp),
                b"\x00" if principal is None else b"\x01" + (lp(principal) or _lp(principal)),
                b"\x00" if result_fp is None else b"\x01" + (lp(result_fp) or _lp(result_fp)),
                b"\x00" if rule is None else b"\x01" + (lp(rule) or _lp(rule)),
                b"" if refs is None else b"\x02" + _lp(refs),
                _ZERO_HASH if prev_hash is None else prev_hash,
            )
        )
    ).digest()


def hash_of_row(row: LedgerRow) -> bytes:
    """The hash a stored row must carry: :func:`row_hash` over its fields."""
    return row_hash(
        agent_id=row.agent_id,
        seq=row.seq,
        at_ms=row.at_ms,
        action=row.action,
        outcome=row.outcome,
        target=row.target,
        args_fp=row.args_fp,
        detail=row.detail,
        signer_fp=row.signer_fp,
        principal=row.principal,
        result_fp=row.result_fp,
        rule=row.rule,
        prev_hash=None if row.prev_hash is None else bytes.fromhex(row.prev_hash),
        refs=canonical_refs(row.refs),
    )


def checkpoint_digest(agent_id: str, seq: int, head_hash: bytes, signer_fp: str, at_ms: int) -> bytes:
    """The 32-byte digest a checkpoint signature covers."""
    return hashlib.sha256(
        CHECKPOINT_DOMAIN + _lp(agent_id) + _I64.pack(seq) + head_hash + _lp(signer_fp) + _I64.pack(at_ms)
    ).digest()


def read_lines(path: Path) -> tuple[list[bytes], bool]:
    """Complete lines of ``path`` and whether it ends in an incomplete (torn) line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], False
    lines = data.split(b"\n")
    torn = lines[-1] != b""
    return lines[:-1], torn


def last_line(path: Path, window: int = 1 << 16) -> bytes | None:
    """The last complete line of ``path`` (read from its end), or None when it has none."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            while True:
                start = max(0, size - window)
                fh.seek(start)
                lines = fh.read(size - start).split(b"\n")[:-1]
                if len(lines) > 1 or start == 0:
                    return lines[-1] if lines else None
                window *= 4  # a single line longer than the window: look further back
    except FileNotFoundError:
        return None


def verify_chain(
    agent_id: str, path: Path, ckpt_path: Path, keys: dict[str, bytes], checkpoint: Path | None = None
) -> VerifyReport:
    """Check a chain file row by row against ``keys``, then its newest checkpoint in ``ckpt_path`` and ``checkpoint``.

    Detects an edited field, a reordered, deleted or inserted row, a bad signature, an unknown or
    undeclared signer, a wrong genesis, an unreadable row, and (against a checkpoint) a deleted tail.
    The file is streamed: memory does not grow with the chain.
    """
    report = VerifyReport(agent_id=agent_id, ok=False, rows=0)
    # Checkpoints first, so the scan keeps only the row hashes they name.
    anchors: list[tuple[str, int, str, str]] = []
    newest = last_line(ckpt_path)
    sources: list[tuple[str, bytes]] = []
    if newest is not None:
        sources.append((f"stored checkpoint {ckpt_path.name}", newest))
    if checkpoint is not None:
        try:
            sources.append((f"checkpoint {checkpoint}", Path(checkpoint).read_bytes()))
        except OSError as exc:
            report.reason = f"cannot read checkpoint {checkpoint}: {exc.strerror}"
            return report
    for label, raw in sources:
        problem, anchor = _parse_checkpoint(raw, agent_id, keys)
        if anchor is None:
            report.reason = f"{label}: {problem}"
            return report
        anchors.append((label, *anchor))
    wanted: dict[int, str] = {anchor[1]: "" for anchor in anchors}

    expected_signer: str | None = None
    prev: str | None = None
    seq = 0
    # Rows verified only once a later signature under the same key vouches for them: (first seq, signer, prev).
    unsigned: tuple[int, str, str | None] | None = None

    def bad(line: int, reason: str) -> VerifyReport:
        report.first_bad_seq, report.first_bad_line, report.reason = line, line, reason
        report.rows, report.head_hash = line - 1, prev
        return report

    try:
        fh = path.open("rb")
    except FileNotFoundError:
        report.reason = f"no ledger rows for agent {agent_id!r} in {path.parent}"
        return report
    with fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                report.torn_tail = True  # an unacknowledged write cut short by a crash; the writer cuts it
                break
            seq += 1
            try:
                row = LedgerRow.from_json(json.loads(raw))
            except ValueError as exc:
                return bad(seq, f"row is unreadable: {exc}")
            if row.seq != seq:
                what = "missing or moved" if row.seq > seq else "out of order or duplicated"
                return bad(seq, f"expected seq {seq} but found seq {row.seq}: a row is {what}")
            if row.agent_id != agent_id:
                return bad(seq, f"row belongs to agent {row.agent_id!r}")
            if seq == 1:
                if row.prev_hash is not None or row.action != "identity_created":
                    return bad(seq, "wrong genesis: seq 1 must be identity_created with no prev hash")
                expected_signer = row.signer_fp
            elif row.prev_hash != prev:
                return bad(seq, "prev_hash does not match the hash of the row before: the chain is broken")
            try:
                computed = hash_of_row(row)
            except ValueError:
                return bad(seq, "prev_hash is not hex")
            if computed.hex() != row.hash:
                return bad(seq, "hash mismatch: a field of this row was changed after it was written")
            public = keys.get(row.signer_fp)
            if public is None:
                return bad(seq, f"unknown signer {row.signer_fp}: no such key for this agent in the keystore")
            if row.signer_fp != expected_signer:
                return bad(seq, f"signed by {row.signer_fp} but the chain's key is {expected_signer} (no rotation row)")
            if not row.signature:
                if row.action in IDENTITY_ACTIONS:
                    return bad(seq, f"{row.action} row carries no signature")
                if unsigned is None:
                    unsigned = (seq, row.signer_fp, prev)
            else:
                try:
                    signature = bytes.fromhex(row.signature)
                except ValueError:
                    signature = b""
                if not verify_signature(public, signature, computed):
                    if unsigned is None:
                        return bad(seq, f"bad signature under key {row.signer_fp}")
                    first, prev = unsigned[0], unsigned[2]
                    return bad(
                        first,
                        f"bad signature under key {row.signer_fp} on row {seq}, which vouches for rows {first}..{seq}: "
                        "one of them was changed after it was written",
                    )
                if unsigned is not None and unsigned[1] != row.signer_fp:
                    prev = unsigned[2]
                    return bad(unsigned[0], f"unsigned row followed by a signature under another key ({row.signer_fp})")
                unsigned = None
            if row.action == "identity_rotated":
                if row.target not in keys:
                    return bad(seq, f"rotation to unknown key {row.target}")
                expected_signer = row.target
            if row.signer_fp not in report.signers:
                report.signers.append(row.signer_fp)
            if seq in wanted:
                wanted[seq] = row.hash
            prev = row.hash
    file_end = seq
    if unsigned is not None:
        # No signed row vouches for the last rows. A signed checkpoint of a head among them (the writer seals
        # its rows that way, moments after writing them) vouches for every row up to that head; the rows
        # after it wait for their seal (or, after a crash, for the next open). Either way rows no signature
        # vouches for are not part of the verified chain.
        seq, prev = unsigned[0] - 1, unsigned[2]
        for _, ck_seq, head_hex, ck_signer in anchors:
            if seq < ck_seq <= file_end and ck_signer == unsigned[1] and wanted[ck_seq] == head_hex:
                seq, prev = ck_seq, head_hex
        report.unsigned_tail = file_end - seq
    report.rows, report.head_hash = seq, prev
    if seq == 0:
        report.reason = f"no ledger rows for agent {agent_id!r} in {path.parent}"
        return report

    for label, ck_seq, head_hex, ck_signer in anchors:
        if ck_seq > file_end:
            report.first_bad_seq = report.first_bad_line = file_end + 1
            report.reason = (
                f"{label}: records seq {ck_seq} but the chain ends at seq {file_end}: "
                f"rows {file_end + 1}..{ck_seq} were removed"
                + (f" (and rows {seq + 1}..{file_end} carry no signature)" if seq < file_end else "")
            )
            return report
        if wanted[ck_seq] != head_hex:
            report.first_bad_seq = report.first_bad_line = ck_seq
            report.reason = (
                f"{label}: row {ck_seq} has hash {wanted[ck_seq][:16]}… but the checkpoint records {head_hex[:16]}…"
            )
            return report
        if ck_seq > seq:
            report.first_bad_seq = report.first_bad_line = seq + 1
            report.reason = (
                f"{label}: signed by {ck_signer}, but rows {seq + 1}..{ck_seq} carry no signature of that key"
            )
            return report
        report.checkpoint_seq = max(report.checkpoint_seq or 0, ck_seq)
    report.ok = True
    return report


def signed_checkpoint(signer: Signer, seq: int, head: bytes) -> dict[str, Any]:
    """A checkpoint of ``head`` at ``seq``, signed by ``signer`` (the JSON object stored and exported)."""
    at_ms = time.time_ns() // 1_000_000
    digest = checkpoint_digest(signer.agent_id, seq, head, signer.fingerprint, at_ms)
    return {
        "agent_id": signer.agent_id,
        "seq": seq,
        "head_hash": head.hex(),
        "signer_fp": signer.fingerprint,
        "at_ms": at_ms,
        "signature": signer.sign(digest).hex(),
    }


def _parse_checkpoint(raw: bytes, agent_id: str, keys: dict[str, bytes]) -> tuple[str, tuple[int, str, str] | None]:
    """``(problem, (seq, head_hash, signer_fp))``: no anchor when the checkpoint is unreadable, foreign or forged."""
    try:
        data = json.loads(raw)
        seq, head_hex, signer_fp, at_ms = data["seq"], data["head_hash"], data["signer_fp"], data["at_ms"]
        if data["agent_id"] != agent_id:
            return f"belongs to agent {data['agent_id']!r}, not {agent_id!r}", None
        if type(seq) is not int or type(at_ms) is not int or seq < 1:
            raise ValueError("seq and at_ms must be positive integers")
        head, signature = bytes.fromhex(head_hex), bytes.fromhex(data["signature"])
    except (ValueError, TypeError, KeyError) as exc:
        return f"unreadable ({type(exc).__name__}: {exc})", None
    public = keys.get(signer_fp)
    if public is None:
        return f"signed by unknown key {signer_fp}", None
    if fingerprint(public) != signer_fp or not verify_signature(
        public, signature, checkpoint_digest(agent_id, seq, head, signer_fp, at_ms)
    ):
        return "bad signature", None
    return "", (seq, head.hex(), signer_fp)
