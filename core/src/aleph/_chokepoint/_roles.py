"""What the chokepoint's parts need of the scoped service, as protocols.

The call context (:mod:`._call`), the call guard (:mod:`._callguard`) and the recording half
(:mod:`._recording`) work on the :class:`~aleph.ScopedToolService` that runs the call, but only through
these shapes. Naming them here, instead of importing the service's module, keeps those parts below the
service in the import graph: the service imports them, never the other way round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aleph._contract._registry import RegisteredTool
    from aleph._contract._tool import Prepared
    from aleph._contract._types import ToolOutput
    from aleph._ledger import Ledger, LedgerAction, LedgerOutcome
    from aleph._ledger._events import EventKind, EventLog
    from aleph._turn import TurnContext

__all__ = ["Explained", "RunningService", "Stores"]


class Explained(Protocol):
    """A decision with everything that led to it (:class:`~aleph.Explanation` has this shape)."""

    @property
    def decision(self) -> str:
        """``"allow"``, ``"ask"`` or ``"deny"``."""
        ...

    @property
    def rule_id(self) -> str:
        """The id of the rule that decided."""
        ...

    @property
    def rule(self) -> str | None:
        """The rule's text, when a configured rule decided."""
        ...

    @property
    def layer(self) -> str | None:
        """The permission layer the rule came from."""
        ...

    @property
    def reason(self) -> str:
        """Why, in words for a person."""
        ...

    @property
    def tier(self) -> str:
        """The exec tier in force."""
        ...

    @property
    def decided_by(self) -> str:
        """The stage of the chain that decided."""
        ...

    @property
    def notes(self) -> tuple[str, ...]:
        """Anything else worth knowing about the decision."""
        ...

    def to_json(self) -> dict[str, Any]:
        """JSON form for ``aleph policy explain --json``."""
        ...


class Stores(Protocol):
    """The shared stores a call writes to: the signed ledger, the session event log, the data directory."""

    @property
    def ledger(self) -> Ledger | None:
        """The signed ledger (None when disabled)."""
        ...

    @property
    def events(self) -> EventLog | None:
        """The session event log."""
        ...

    @property
    def data_dir(self) -> Path | None:
        """Aleph's data directory (None for a runtime without one)."""
        ...


class RunningService(Protocol):
    """The scoped service as the call guard sees it: its turn, its stores, how it records and runs."""

    @property
    def turn(self) -> TurnContext | None:
        """The turn the service was built for."""
        ...

    @property
    def _cp(self) -> Stores: ...

    def _event(self, kind: EventKind, tool: str, detail: str, by: str | None = None) -> None: ...

    async def _ledger(
        self,
        entry: RegisteredTool,
        arguments: Mapping[str, Any],
        action: LedgerAction,
        outcome: LedgerOutcome,
        detail: str,
        rule: str | None,
        refs: Mapping[str, str] | None = None,
        *,
        durable: bool = False,
        on_row: Callable[[int], None] | None = None,
    ) -> str | None: ...

    async def _run(
        self, entry: RegisteredTool, prepared: Prepared, cancel: asyncio.Event | None, action: str = "allow"
    ) -> ToolOutput: ...
