"""An approval binds the secret-named values of the call it was shown, under a key only Aleph holds.

A grant fingerprint stands every non-empty string under a secret-looking name (``password``, ``token``,
``auth…``, ``…pass…``) as one fixed mark, so that a fingerprint kept in the ledger or the results store
gives nobody an offline guess-and-check of the value. Approvals used that fingerprint too, so one grant
covered *every* value under such a name: approving ``configure(auth_mode="required")`` for the session
also approved ``configure(auth_mode="disabled")``, and ``api_key="k1"`` covered ``api_key="k2"``: a
different call the human never saw. An approval's fingerprint therefore also carries an HMAC of those
values under the keystore's seal secret (``StateSeal``, purpose ``approval-secret-values``): exact, stable
across processes on one data directory (standing grants, resumed calls, sealed MCP states still match),
and useless for guessing without the secret. Calls with no secret-named value keep their fingerprints.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aleph._chokepoint._gate import _is_secret_key
from aleph._seal import StateSeal

__all__ = ["secrets_bound"]

_PURPOSE = "approval-secret-values"
_PROCESS_KEY = secrets.token_bytes(32)
"""The key for a gate with no keystore (an in-memory runtime): its grants never outlive the process anyway."""
_seals: dict[Path, StateSeal] = {}


def secret_values(arguments: Mapping[str, Any]) -> list[list[Any]]:
    """``[path, value]`` for every non-empty string under a secret-named key, as a fingerprint masks them."""
    found: list[list[Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if type(value) is str:
                    if value and _is_secret_key(key):
                        found.append([[*path, str(key)], value])
                elif isinstance(value, Mapping | list | tuple):
                    walk(value, [*path, str(key)])
        elif isinstance(node, list | tuple):
            for index, value in enumerate(node):
                walk(value, [*path, index])

    walk(arguments, [])  # the input boundary has bounded the depth (64) before any approval is asked
    return found


def _mac(gate: Any, data: bytes) -> str:
    seal: StateSeal | None = getattr(gate, "_seal", None)
    if seal is not None:
        binder = _seals.get(seal.key_dir)
        if binder is None:
            binder = _seals[seal.key_dir] = StateSeal(seal.key_dir, _PURPOSE)
        try:
            return binder.sign(data)
        except OSError:  # an unreadable keystore: bind in this process only (later processes ask again)
            pass
    return hmac.new(_PROCESS_KEY, data, hashlib.sha256).hexdigest()


def secrets_bound(fingerprint: str, arguments: Mapping[str, Any], gate: Any) -> str:
    """``fingerprint`` bound to the secret-named values of ``arguments`` (unchanged when there are none)."""
    found = secret_values(arguments)
    if not found:
        return fingerprint
    found.sort(key=lambda item: json.dumps(item[0]))
    body = json.dumps(found, ensure_ascii=False, separators=(",", ":"))
    mac = _mac(gate, f"{fingerprint}\x1f{body}".encode())
    return hashlib.sha256(f"{fingerprint}\x1fsecrets\x1f{mac}".encode()).hexdigest()[:32]
