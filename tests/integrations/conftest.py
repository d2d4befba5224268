"""A real Aleph runtime (config file, registry, chokepoint, signed ledger on disk) for every framework test.

The tools keep a real notebook (a list the test can read) so a test sees whether a call really ran.
Policy: ``note_add`` and ``notes_list`` are allowed, ``note_delete`` asks a human, ``vault_open`` is denied.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import aleph

POLICY = """
[policies]
exec_tier = "auto"

[policies.tool_permissions.overrides]
note_add = "allow"
notes_list = "allow"
note_delete = "ask"
vault_open = "deny"
"""


@dataclass
class Notebook:
    """The effect the tools have, visible to the test."""

    notes: list[str] = field(default_factory=list)
    vault_opened: int = 0


def build_tools(book: Notebook) -> list[aleph.Tool]:
    @aleph.tool(idempotent=False, inline=True)
    def note_add(text: str) -> str:
        """Add a note to the notebook."""
        book.notes.append(text)
        return f"added note {len(book.notes)}"

    @aleph.tool(idempotent=False, inline=True)
    def note_delete(index: int) -> str:
        """Delete the note at a 1-based index."""
        if not 1 <= index <= len(book.notes):
            raise aleph.ExecutionFailed("note_delete", f"no note {index}; there are {len(book.notes)}")
        removed = book.notes.pop(index - 1)
        return f"deleted {removed!r}"

    @aleph.tool(idempotent=True, inline=True)
    def notes_list() -> list[str]:
        """List every note."""
        return list(book.notes)

    @aleph.tool(idempotent=False, inline=True)
    def vault_open() -> str:
        """Open the vault."""
        book.vault_opened += 1
        return "opened"

    return [note_add, note_delete, notes_list, vault_open]


@dataclass
class Env:
    rt: aleph.Aleph
    book: Notebook

    def service(self, **kwargs: object) -> aleph.ScopedToolService:
        kwargs.setdefault("agent", "main")
        return self.rt.tool_service(**kwargs)  # type: ignore[arg-type]

    async def rows(self, agent: str = "main") -> list[tuple[str, str, str]]:
        """(action, target, outcome) of the agent's ledger rows after the genesis row; the chain verifies."""
        ledger = self.rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        if agent not in ledger.agents():
            return []
        assert ledger.verify(agent).ok
        return [(r.action, r.target, r.outcome) for r in ledger.rows(agent)[1:]]


@pytest.fixture
async def env(workspace: Path) -> AsyncIterator[Env]:
    (workspace / "aleph.toml").write_text(POLICY)
    book = Notebook()
    async with aleph.load(entry_points=False) as rt:
        for tool in build_tools(book):
            rt.register(tool)
        yield Env(rt, book)
