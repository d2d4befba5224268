"""The inherited ownership contract (``aleph.testing.OwnershipContractTests``) on remembered facts."""

from __future__ import annotations

import json
from typing import Any

import aleph_memory.plugin

from aleph import ScopedToolService, ToolResult
from aleph.testing import OwnershipContractTests


def _value(result: ToolResult) -> Any:
    assert result.success, result.error
    return json.loads(result.output or "null")


class TestFactOwnership(OwnershipContractTests):
    """A fact is addressed by id through its timeline; ``remember`` changes or forgets what the timeline found."""

    plugin = aleph_memory.plugin
    config_toml = '[memory]\nembedder = "none"\n'

    async def create_object(self, service: ScopedToolService) -> str:
        made = await service.call("remember", {"action": "add", "content": "the kitchen key hangs by the window"})
        return str(_value(made)["entries"][0]["id"])

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("memory_timeline", {"fact_id": object_id})

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        found = _value(await service.call("memory_search", {"query": "kitchen key window"}))
        ids = {f["id"] for f in found["facts"]}
        # a superseded fact lives on in its successor's timeline: the chain's first id stands for it
        for fact in list(found["facts"]):
            timeline = _value(await service.call("memory_timeline", {"fact_id": fact["id"]}))
            ids |= {v["id"] for v in timeline["versions"]}
        return ids

    async def _current(self, service: ScopedToolService, object_id: str) -> tuple[ToolResult, str | None]:
        read = await self.read_object(service, object_id)
        if not read.success:
            return read, None
        versions = json.loads(read.output or "{}")["versions"]
        live = [v for v in versions if v["status"] == "active"]
        return read, live[-1]["content"] if live else None

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        read, content = await self._current(service, object_id)
        if content is None:
            return read  # the id names nothing this principal can reach: the same refusal as the read
        return await service.call(
            "remember", {"action": "replace", "old_text": content, "content": "the kitchen key hangs by the door"}
        )

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        read, content = await self._current(service, object_id)
        if content is None:
            return read
        return await service.call("remember", {"action": "remove", "old_text": content})


class TestPrivateNoteOwnership(OwnershipContractTests):
    """A note created with ``private: true`` is its creator's: addressed by path, listed by ``note_manage list``."""

    plugin = aleph_memory.plugin
    config_toml = '[memory]\nembedder = "none"\n'

    async def create_object(self, service: ScopedToolService) -> str:
        made = await service.call(
            "note_manage",
            {"action": "create", "path": "kit/diary", "title": "Diary", "content": "dear diary", "private": True},
        )
        return str(_value(made)["note_path"])

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("note_manage", {"action": "get", "path": object_id})

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        return {n["path"] for n in _value(await service.call("note_manage", {"action": "list"}))["notes"]}

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call(
            "note_manage", {"action": "update", "path": object_id, "content": "dear diary, again"}
        )

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        return await service.call("note_manage", {"action": "delete", "path": object_id})
