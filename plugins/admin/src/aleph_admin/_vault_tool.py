"""``vault_store``: keep a secret for a principal; tools get it only through a ``{{vault:NAME}}`` handle."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_admin._state import AdminState, caller
from aleph_admin._vault import SecretRule, Vault

__all__ = ["VaultStore"]


class VaultArgs(ToolArgs):
    action: Literal["store", "list", "info", "rule", "delete"]
    """store a secret (or replace it), list yours, info on one, rule to change which tools may use it, delete."""
    name: str | None = Field(default=None, max_length=128)
    """The secret's name; tools refer to it as ``{{vault:NAME}}``."""
    secret: str | None = Field(default=None, max_length=65_536)
    """The value (store only). It is never shown again, recorded or returned."""
    allow: list[str] = Field(default_factory=list, max_length=64)
    """Tools that may receive it: ``web_fetch`` or ``web_fetch(domain:api.github.com)`` (store, rule)."""
    fields: list[str] = Field(default_factory=list, max_length=64)
    """Top-level argument fields it may be put in, e.g. ``headers`` (empty: any field of those tools)."""


def _missing(name: str) -> aleph.ExecutionFailed:
    return aleph.ExecutionFailed("vault_store", f"no secret {name!r} of yours: action=list shows them")


class VaultStore(AlephTool[VaultArgs]):
    NAME = "vault_store"
    DESCRIPTION = (
        "Keep a secret (API token, password) encrypted for you, and say which tools may use it. Tools then take "
        "`{{vault:NAME}}` in an argument: the value is put in only after the call is judged and approved, and "
        "scrubbed from results and records. The value never comes back to you. Always asks a human first."
    )
    Args = VaultArgs
    FACTS = ToolFacts(requires_approval=True, tags=("admin", "secrets"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    @property
    def vault(self) -> Vault:
        """The family's vault."""
        return self.state.vault

    async def call(self, args: VaultArgs) -> dict[str, Any]:
        owner = caller(self.NAME).owner
        if args.action == "list":
            return {"secrets": self.vault.describe(owner)}
        if args.name is None:
            raise aleph.ExecutionFailed(self.NAME, f"name: action={args.action} needs the secret's name")
        try:
            name = Vault.check_name(args.name)
            rule = SecretRule(args.allow, args.fields) if args.action in ("store", "rule") else None
        except ValueError as exc:
            raise aleph.ExecutionFailed(self.NAME, str(exc)) from None
        call = aleph.current_call()
        if call is not None:
            call.annotate(secret=name)  # the name, never the value
        if args.action == "store":
            if not args.secret:
                raise aleph.ExecutionFailed(self.NAME, "secret: give the value to store")
            assert rule is not None
            new = self.vault.put(owner, name, args.secret, rule)
            return {"stored": name, "new": new, "handle": "{{vault:" + name + "}}", "rule": rule.to_json()}
        found = self.vault.describe(owner, name)
        if not found:
            raise _missing(name)
        if args.action == "info":
            return found[0]
        if args.action == "rule":
            assert rule is not None
            self.state.store.set_secret_rule(owner, name, rule.to_json())
            return {"name": name, "rule": rule.to_json()}
        self.state.store.remove_secret(owner, name)
        return {"deleted": name}
