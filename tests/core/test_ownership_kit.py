"""The ownership kit (aleph.testing.OwnershipContractTests) on a family that filters by owner, and on ones that
leak: the kit passes the first and fails each leaky one, so a family's inherited test can fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

import aleph
from aleph import ScopedToolService, ToolResult
from aleph.testing import OwnershipContractTests


class NotesFamily:
    """A small notes store, owned by ``principal.owner`` and filtered in one place (``_mine``)."""

    ALEPH_PLUGIN_NAME = "notes_fixture"
    leak: ClassVar[str] = ""  # "", "list", "read", "update", "delete", "oracle"

    def __init__(self) -> None:
        self.notes: dict[str, dict[str, str]] = {}
        self.next = 100

    def _owner(self) -> str:
        principal = aleph.current_principal()
        assert principal is not None
        return principal.owner

    def _mine(self, note_id: str, op: str) -> dict[str, str]:
        note = self.notes.get(note_id)
        if note is None or (note["owner"] != self._owner() and self.leak != op):
            if self.leak == "oracle" and note is not None:
                raise aleph.PermissionDenied("note", f"note {note_id} belongs to someone else")
            raise aleph.ExecutionFailed("note", f"no note {note_id}")
        return note

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        family = self

        @aleph.tool(name="note_create")
        def note_create(text: str) -> str:
            """Create a note."""
            family.next += 1
            note_id = f"n{family.next}"
            family.notes[note_id] = {"owner": family._owner(), "text": text}
            return note_id

        @aleph.tool(name="note_get", idempotent=True)
        def note_get(note_id: str) -> str:
            """Read a note."""
            return family._mine(note_id, "read")["text"]

        @aleph.tool(name="note_list", idempotent=True)
        def note_list() -> str:
            """List note ids."""
            owner = family._owner()
            return json.dumps(
                sorted(k for k, v in family.notes.items() if v["owner"] == owner or family.leak == "list")
            )

        @aleph.tool(name="note_update")
        def note_update(note_id: str, text: str) -> str:
            """Change a note."""
            family._mine(note_id, "update")["text"] = text
            return "updated"

        @aleph.tool(name="note_delete")
        def note_delete(note_id: str) -> str:
            """Delete a note."""
            family._mine(note_id, "delete")
            del family.notes[note_id]
            return "deleted"

        for t in (note_create, note_get, note_list, note_update, note_delete):
            register(t)


class NotesOwnership(OwnershipContractTests):
    family_class: ClassVar[type[NotesFamily]] = NotesFamily

    def make_runtime(self, workspace: Path) -> aleph.Aleph:
        (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(workspace / ".data").as_posix()}"\n')
        plugin = self.family_class()
        return aleph.load(workspace / "aleph.toml", workspace=workspace, plugins=[plugin], entry_points=False)

    async def create_object(self, service: ScopedToolService) -> str:
        result = await service.call("note_create", {"text": "secret"})
        assert result.success and result.output is not None
        return result.output

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("note_get", {"note_id": object_id})

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        result = await service.call("note_list", {})
        return set(json.loads(result.output or "[]"))

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("note_update", {"note_id": object_id, "text": "changed"})

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("note_delete", {"note_id": object_id})


class TestAFamilyThatFiltersByOwnerPassesTheKit(NotesOwnership):
    pass


KIT = sorted(n for n in vars(OwnershipContractTests) if n.startswith("test_"))


def _leaky(kind: str) -> NotesOwnership:
    family = type(f"Leaky{kind.title()}", (NotesFamily,), {"leak": kind})
    return type(f"Leaky{kind.title()}Ownership", (NotesOwnership,), {"family_class": family})()


@pytest.mark.parametrize(
    ("leak", "caught_by"),
    [
        ("list", "test_a_foreign_object_is_not_listed"),
        ("read", "test_reading_a_foreign_object_answers_like_a_missing_one"),
        ("update", "test_updating_a_foreign_object_answers_like_a_missing_one_and_changes_nothing"),
        ("delete", "test_deleting_a_foreign_object_answers_like_a_missing_one_and_removes_nothing"),
        ("oracle", "test_reading_a_foreign_object_answers_like_a_missing_one"),
    ],
)
def test_the_kit_catches_each_kind_of_leak(tmp_path: Path, leak: str, caught_by: str) -> None:
    with pytest.raises(AssertionError):
        getattr(_leaky(leak), caught_by)(tmp_path)


def test_a_family_cannot_override_a_kit_test() -> None:
    with pytest.raises(TypeError, match="overrides ownership contract tests"):
        type("Cheat", (OwnershipContractTests,), {"test_a_foreign_object_is_not_listed": lambda self, tmp_path: None})


def test_the_kit_has_the_five_contract_tests() -> None:
    assert len(KIT) == 5
