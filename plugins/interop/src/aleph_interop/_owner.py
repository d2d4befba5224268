"""Who owns what this family keeps: the agent a call acts as (one place, so every store agrees)."""

from __future__ import annotations

import aleph

__all__ = ["owner_of_call"]


def owner_of_call() -> str:
    """The agent the running call acts as (``default`` outside a named agent)."""
    principal = aleph.current_principal()
    return principal.owner if principal is not None else "default"
