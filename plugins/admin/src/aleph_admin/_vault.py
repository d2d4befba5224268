"""The vault: secrets encrypted at rest (AES-256-GCM), owned by a principal, resolved only after a verdict.

The key is 32 random bytes in ``vault.key`` (0600) beside the ledger's signing keys; each secret is
sealed with the owner and name as associated data, so a blob copied to another owner or name does not
open. A secret's rule says which tools (``web_fetch`` or ``web_fetch(domain:api.github.com)``) and
which argument fields (``headers``) may receive it. :class:`VaultResolver` is the chokepoint's resolver
for ``{{vault:NAME}}`` handles: it never returns a value to a principal that does not own the secret,
to a tool or field its rule does not name, or to a URL outside its domain.
"""

from __future__ import annotations

import json
import os
import re
import secrets as _random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import aleph
from aleph_admin._store import AdminStore

__all__ = ["SecretRule", "Vault", "VaultResolver", "parse_rule"]

_RULE = re.compile(r"([a-z0-9_]{1,64})(?:\(domain:([A-Za-z0-9.-]{1,253})\))?")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_VERSION = b"\x01"


class SecretRule:
    """Which tools (optionally on which domains) and which argument fields may receive a secret."""

    def __init__(self, allow: list[str], fields: list[str]) -> None:
        self.allow = [parse_rule(r) for r in allow]
        if not self.allow:
            raise ValueError("allow: name at least one tool the secret may be used with, e.g. web_fetch(domain:x.org)")
        self.fields = list(fields)
        self.texts = list(allow)

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"allow": self.texts, "fields": self.fields}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SecretRule:
        """The rule as stored."""
        return cls(list(data.get("allow", [])), list(data.get("fields", [])))

    def permits(self, tool: str, field: tuple[str | int, ...], arguments: Mapping[str, Any]) -> bool:
        """Whether ``tool`` may receive the secret in ``field`` of a call with ``arguments``."""
        if self.fields and (not field or str(field[0]) not in self.fields):
            return False
        for name, domain in self.allow:
            if name != tool:
                continue
            if domain is None:
                return True
            host = (urlsplit(str(arguments.get("url", ""))).hostname or "").lower().rstrip(".")
            if host == domain or host.endswith("." + domain):
                return True
        return False


def parse_rule(text: str) -> tuple[str, str | None]:
    """``tool`` or ``tool(domain:host)`` → (tool, host or None); anything else is a ValueError naming it."""
    match = _RULE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"allow: {text!r} is not `tool` or `tool(domain:host)`")
    return match.group(1), (match.group(2).lower().rstrip(".") if match.group(2) else None)


class Vault:
    """Encrypts, stores and opens secrets; the key is created on first use."""

    def __init__(self, store: AdminStore, key_dir: Callable[[], Path]) -> None:
        self.store = store
        self._key_dir = key_dir
        self._aead: AESGCM | None = None

    def _cipher(self) -> AESGCM:
        if self._aead is None:
            directory = self._key_dir()
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = directory / "vault.key"
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                key = path.read_bytes()
            else:
                key = AESGCM.generate_key(bit_length=256)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(key)
                    fh.flush()
                    os.fsync(fh.fileno())
            if len(key) != 32:
                raise aleph.ExecutionFailed("vault_store", f"vault key {path} is damaged (expected 32 bytes)")
            self._aead = AESGCM(key)
        return self._aead

    @staticmethod
    def check_name(name: str) -> str:
        """A secret name: letters, digits, ``_ . -``; at most 128."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"name {name!r}: use letters, digits, _ . - (at most 128)")
        return name

    def put(self, owner: str, name: str, value: str, rule: SecretRule) -> bool:
        """Seal and store ``value``; True when the secret is new."""
        nonce = _random.token_bytes(12)
        sealed = self._cipher().encrypt(nonce, value.encode("utf-8"), f"{owner}\0{name}".encode())
        return self.store.put_secret(owner, name, _VERSION + nonce + sealed, rule.to_json())

    def open(self, owner: str, name: str) -> tuple[str, SecretRule] | None:
        """The value and rule of ``owner``'s secret ``name``, or None (missing and foreign alike)."""
        rows = self.store.owned("secrets", owner, name)
        if not rows:
            return None
        blob = bytes(rows[0]["blob"])
        try:
            value = self._cipher().decrypt(blob[1:13], blob[13:], f"{owner}\0{name}".encode()).decode("utf-8")
        except (InvalidTag, ValueError):
            raise aleph.ExecutionFailed(
                "vault", f"secret {name!r} does not decrypt: its blob or the key changed"
            ) from None
        return value, SecretRule.from_json(json.loads(rows[0]["rule"]))

    def describe(self, owner: str, name: str | None = None) -> list[dict[str, Any]]:
        """Metadata of ``owner``'s secrets (never a value)."""
        return [
            {
                "name": row["name"],
                "handle": "{{vault:" + row["name"] + "}}",
                "rule": json.loads(row["rule"]),
                "created_at": row["created_at"],
                "updated_at": row["updated_at"],
            }
            for row in self.store.owned("secrets", owner, name)
        ]


class VaultResolver:
    """Resolves ``{{vault:NAME}}`` for the chokepoint (see :class:`aleph.SecretResolver`)."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault

    def resolve_secret(
        self,
        name: str,
        *,
        tool: str,
        field: tuple[str | int, ...],
        arguments: Mapping[str, Any],
        principal: aleph.Principal,
    ) -> str:
        """The secret's value when the principal owns it and its rule allows this tool, field and URL."""
        opened = self.vault.open(principal.owner, name)
        where = ".".join(str(p) for p in field) or "(input)"
        if opened is None or not opened[1].permits(tool, field, arguments):
            # One answer for missing, foreign and not-allowed: nothing here tells whether it exists.
            raise aleph.PermissionDenied(
                tool,
                f"`{{{{vault:{name}}}}}` in `{where}`: no secret by that name may be used by `{tool}` in this "
                "field for this URL. Check the name with vault_store action=list, or ask the user to allow it.",
            )
        return opened[0]
