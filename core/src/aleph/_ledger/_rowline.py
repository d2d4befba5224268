"""One marked ledger row as the line stored: its hash, the writer's mark and its JSON, built in one call.

:func:`row_line` is the native builder (``_rowfast.c``) when it was built and :func:`py_row_line` otherwise;
both give the same bytes (``tests/core/test_rowfast.py`` compares them on many rows). Each handles the
common row only — every text field an exact ``str`` within its clipping limit, no lone surrogates, no
refs, not signed — and returns None for anything else, which the chain writer then clips and builds field
by field.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring as _quote
from typing import Any

from aleph._ledger._clip import MAX_DETAIL, MAX_SHORT, MAX_TARGET, needs_no_clip
from aleph._ledger._format import row_hash
from aleph._ledger._speedups import native

__all__ = ["encode_line", "py_row_line", "row_line"]


def _text(value: str | None) -> str:
    return "null" if value is None else _quote(value)


def encode_line(
    agent_id: str,
    seq: int,
    prev: bytes | None,
    digest: bytes,
    signature: str,
    fp: str,
    action: str,
    target: str,
    outcome: str,
    args_fp: str | None,
    detail: str,
    at_ms: int,
    principal: str | None,
    result_fp: str | None,
    rule: str | None,
    mark: str | None,
) -> bytes:
    """A row without refs as ``json.dumps(row, ensure_ascii=False)`` writes it, at a third of the cost.

    Every string goes through json's own C string encoder; hex and the checked action and outcome need none.
    """
    previous = "null" if prev is None else f'"{prev.hex()}"'
    return (
        f'{{"agent_id": {_quote(agent_id)}, "seq": {seq}, "prev_hash": {previous}, '
        f'"hash": "{digest.hex()}", "signature": "{signature}", "signer_fp": {_quote(fp)}, "action": {_quote(action)}, '
        f'"target": {_quote(target)}, "outcome": {_quote(outcome)}, "args_fp": {_text(args_fp)}, '
        f'"detail": {_quote(detail)}, "at_ms": {at_ms}, "principal": {_text(principal)}, '
        f'"result_fp": {_text(result_fp)}, "rule": {_text(rule)}'
        + ("}\n" if mark is None else f', "mark": "{mark}"}}\n')
    ).encode("utf-8")


def _plain(value: object, limit: int) -> bool:
    """An exact str within ``limit`` characters that UTF-8 can encode (no lone surrogates)."""
    if type(value) is not str or len(value) > limit:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_ANY = 1 << 62


def py_row_line(
    agent_id: str,
    seq: int,
    prev: bytes | None,
    signer_fp: str,
    key: Any,
    at_ms: int,
    action: str,
    target: str,
    outcome: str,
    detail: str,
    args_fp: str | None,
    principal: str | None,
    result_fp: str | None,
    rule: str | None,
) -> tuple[bytes, bytes] | None:
    """``(line, hash)`` of a marked row (``key.mark`` makes the mark), or None when it needs clipping or more."""
    fast = (  # one check for the common row (short ASCII strings); field by field only when it fails
        type(agent_id) is str
        and type(signer_fp) is str
        and type(action) is str
        and type(outcome) is str
        and (agent_id + signer_fp + action + outcome).isascii()
        and needs_no_clip(target, detail, args_fp, principal, result_fp, rule)
    )
    if not fast and not (
        _plain(agent_id, _ANY)
        and _plain(signer_fp, _ANY)
        and _plain(action, _ANY)
        and _plain(outcome, _ANY)
        and _plain(target, MAX_TARGET)
        and _plain(detail, MAX_DETAIL)
        and (args_fp is None or _plain(args_fp, MAX_SHORT))
        and (principal is None or _plain(principal, MAX_SHORT))
        and (result_fp is None or _plain(result_fp, MAX_SHORT))
        and (rule is None or _plain(rule, MAX_SHORT))
    ):
        return None
    digest = row_hash(
        agent_id=agent_id,
        seq=seq,
        at_ms=at_ms,
        action=action,
        outcome=outcome,
        target=target,
        args_fp=args_fp,
        detail=detail,
        signer_fp=signer_fp,
        principal=principal,
        result_fp=result_fp,
        rule=rule,
        prev_hash=prev,
    )
    line = encode_line(agent_id, seq, prev, digest, "", signer_fp, action, target, outcome, args_fp, detail, at_ms,
                       principal, result_fp, rule, key.mark(digest))  # fmt: skip
    return line, digest


RowLine = Callable[..., "tuple[bytes, bytes] | None"]
row_line: RowLine = native.row_line if native is not None else py_row_line
"""The builder the chain writer uses: native when built (and not switched off), else :func:`py_row_line`."""
