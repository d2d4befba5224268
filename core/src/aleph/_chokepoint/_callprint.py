"""A mutating call's row summary and argument fingerprint, built in one pass over its arguments.

:func:`~aleph._chokepoint._gate.summarize_call` and :func:`~aleph._chokepoint._gate.grant_fingerprint`
each walk the arguments (redacting, masking, sorting, encoding). Every ledgered call needs both, so
:func:`summary_and_fingerprint` builds them together for the common input — a flat object of strings,
integers, booleans and nulls — and hands anything else to those two functions. Both values are stored
(``detail`` and ``args_fp``): the result is exactly theirs, byte for byte
(``tests/core/test_fingerprints.py`` compares them on many inputs and pins known values).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring as _quote
from typing import Any

from aleph._chokepoint._gate import (
    EXEC_TOOLS,
    SECRET_MARK,
    SUMMARY_LIMIT,
    _is_secret_key,
    _secret_keys,
    escape_for_prompt,
    grant_fingerprint,
    redact,
    summarize_call,
)
from aleph._ledger._speedups import native

__all__ = ["NATIVE_PRINT", "PRINTER", "summary_and_fingerprint"]


def summary_and_fingerprint(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str]:
    """``(summarize_call(tool, arguments), grant_fingerprint(tool, arguments))``, in one pass when it can."""
    if _native_print is not None and tool not in EXEC_TOOLS and tool != "file_ops":
        fast: tuple[str, str] | None
        try:  # the native twin of _flat (the ledger's accelerator): the same two strings, or None where _flat is
            fast = _native_print(tool, arguments, _secret_keys, _is_secret_key, _clean, _SECRET_JSON, SUMMARY_LIMIT)
        except Exception:  # what _flat would raise too (an integer too long to print): the full functions say it
            fast = None
    else:
        fast = _flat(tool, arguments)
    if fast is not None:
        return fast
    return summarize_call(tool, arguments), grant_fingerprint(tool, arguments)


def _clean(value: str) -> str:
    """A string argument as the summary shows it: secret-looking values masked, invisible characters escaped."""
    return escape_for_prompt(redact(value))


def _flat(tool: str, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """Both values for a flat dict of str / int / bool / None under str keys; None for any other input."""
    if type(arguments) is not dict or tool in EXEC_TOOLS or tool == "file_ops":
        return None  # those tools summarise chosen fields, and exec tools leave `justification` out
    # The canonical JSON is written as _CANONICAL writes it (keys sorted, "," and ":", ensure_ascii off): each
    # key and string through json's own string encoder, integers as int.__repr__, booleans as true / false.
    canonical: list[str] = []
    parts: list[str] = []
    try:
        keys = sorted(arguments)
    except TypeError:  # keys of mixed types
        return None
    for key in keys:
        if type(key) is not str:
            return None
        value = arguments[key]
        kind = type(value)
        if kind is str:
            # Summary: a secret-named non-empty string shows as ***; fingerprint: it stands as SECRET_MARK.
            if value and _is_secret_key(key):
                canonical.append(f"{_quote(key)}:{_SECRET_JSON}")
                parts.append(f"{key}=***")
            else:
                canonical.append(f"{_quote(key)}:{_quote(value)}")
                parts.append(f"{key}={escape_for_prompt(redact(value))}")
        elif value is None:  # shown as null, left out of the fingerprint (as canonical_json drops nulls)
            parts.append(f"{key}=null")
        elif kind is int or kind is bool:
            shown = ("true" if value else "false") if kind is bool else int.__repr__(value)
            canonical.append(f"{_quote(key)}:{shown}")
            # The summary masks any non-empty value under a secret name; the fingerprint only strings.
            parts.append(f"{key}=***" if _is_secret_key(key) else f"{key}={shown}")
        else:
            return None
    preview = " ".join(parts) if parts else "(no arguments)"
    text = " ".join(f"{tool}: {preview}".split())
    summary = text if len(text) <= SUMMARY_LIMIT else text[:SUMMARY_LIMIT] + "…"
    body = "{" + ",".join(canonical) + "}"
    return summary, hashlib.sha256(f"{tool}\x1f{body}".encode()).hexdigest()[:32]


_SECRET_JSON = _quote(SECRET_MARK)
_native_print: Callable[..., tuple[str, str] | None] | None = native.call_print if native is not None else None
NATIVE_PRINT: frozenset[str] | None = None if native is None else frozenset(EXEC_TOOLS | {"file_ops"})
"""With the native module: the tools whose row summary it does not make (they summarise chosen fields), so
:meth:`~aleph._ledger.Ledger.write_call` is not for them; None without it (then it is for none)."""
PRINTER = (_secret_keys, _is_secret_key, _clean, _SECRET_JSON, SUMMARY_LIMIT)
"""``call_print``'s arguments after the call's own, as :meth:`~aleph._ledger.Ledger.write_call` passes them on."""
