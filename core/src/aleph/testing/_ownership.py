"""The ownership contract: what one principal stores is invisible and immutable to another.

A family subclasses :class:`OwnershipContractTests` once per kind of object it stores (memory items,
heartbeats, teams, notes, ...) and fills in how to create, read, list, update and delete one through
its tools. The kit then checks, through the real chokepoint and the family's real store, that a
stranger cannot see, read, change or delete the owner's object, and that every refusal answers
exactly like the same request for an object that does not exist (no existence oracle)::

    class TestHeartbeatOwnership(OwnershipContractTests):
        plugin = aleph_teams.plugin

        async def create_object(self, service):
            result = await service.call("heartbeat_create", {...})
            return json.loads(result.output)["id"]

        async def read_object(self, service, object_id):
            return await service.call("heartbeat_get", {"id": object_id})
        ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

from aleph._chokepoint._approval import ApprovalOutcome, ApprovalRequest, ApprovalResponse
from aleph._chokepoint._requesters import ScriptedRequester
from aleph._chokepoint._scoped import ScopedToolService
from aleph._contract._types import ToolResult
from aleph._runtime import Aleph, load
from aleph._turn import TurnContext

__all__ = ["OwnershipContractTests"]


_Body = Callable[[ScopedToolService, ScopedToolService, str], Awaitable[None]]


def _approve(request: ApprovalRequest) -> ApprovalResponse:
    del request
    return ApprovalResponse(ApprovalOutcome.APPROVED)


class OwnershipContractTests:
    """Ownership contract for one kind of stored object. Set ``plugin``; implement the five operations.

    Every operation receives a :class:`~aleph.ScopedToolService` bound to the owner's or the stranger's
    principal (both operators with an approving human, so only ownership can refuse) and goes through
    the family's tools. The kit's ``test_*`` methods must not be overridden.
    """

    plugin: ClassVar[object]
    """The plugin object or module holding the family's ``@aleph.hookimpl`` functions."""
    config_toml: ClassVar[str] = ""
    """Extra ``aleph.toml`` text for the runtime under test."""
    owner_agent: ClassVar[str] = "alice"
    """The agent that creates the object."""
    stranger_agent: ClassVar[str] = "mallory"
    """Another agent of the same install, with the same permissions."""

    _KIT_TESTS: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        overridden = sorted(name for name in OwnershipContractTests._KIT_TESTS if name in vars(cls))
        if overridden:
            raise TypeError(f"{cls.__name__} overrides ownership contract tests {overridden}; add new tests instead")

    # -- what a family fills in ----------------------------------------------------------------

    async def create_object(self, service: ScopedToolService) -> str:
        """Create one object as ``service``'s principal; return its id."""
        raise NotImplementedError

    async def read_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        """Read object ``object_id`` (its content must be in the output when it succeeds)."""
        raise NotImplementedError

    async def list_object_ids(self, service: ScopedToolService) -> set[str]:
        """The ids ``service``'s principal sees in the family's listing or search."""
        raise NotImplementedError

    async def update_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        """Change object ``object_id`` in a way :meth:`read_object` shows."""
        raise NotImplementedError

    async def delete_object(self, service: ScopedToolService, object_id: str) -> ToolResult:
        """Delete object ``object_id``."""
        raise NotImplementedError

    def missing_id(self, object_id: str) -> str:
        """An id of the same shape as ``object_id`` that names no object (override for other id shapes)."""
        last = object_id[-1:] or "x"
        swap = "1" if last == "0" else "0" if last.isdigit() else "b" if last == "a" else "a"
        return object_id[:-1] + swap

    def make_runtime(self, workspace: Path) -> Aleph:
        """The runtime under test: only this plugin, in a fresh workspace and data directory."""
        (workspace / "aleph.toml").write_text(
            f'[workspace]\ndata_dir = "{(workspace / ".aleph-data").as_posix()}"\n{self.config_toml}'
        )
        return load(
            workspace / "aleph.toml", workspace=workspace, plugins=[self.plugin], entry_points=False, strict=True
        )

    def service_for(self, rt: Aleph, agent: str) -> ScopedToolService:
        """The service a principal of ``agent`` calls through (an operator whose human approves)."""
        turn = TurnContext(session_key=f"{agent}-ownership-session", run_id=f"{agent}-run")
        return rt.tool_service(agent=agent, turn=turn, requester=ScriptedRequester(_approve))

    # -- helpers -------------------------------------------------------------------------------

    def _run(
        self, tmp_path: Path, body: Callable[[ScopedToolService, ScopedToolService, str], Awaitable[None]]
    ) -> None:
        rt = self.make_runtime(tmp_path)

        async def go() -> None:
            async with rt:
                owner = self.service_for(rt, self.owner_agent)
                stranger = self.service_for(rt, self.stranger_agent)
                object_id = await self.create_object(owner)
                assert isinstance(object_id, str) and object_id, "create_object must return the new object's id"
                await body(owner, stranger, object_id)

        asyncio.run(go())

    @staticmethod
    def _shape(result: ToolResult, *ids: str) -> tuple[bool, str | None, str | None, str | None]:
        """What a caller learns from a result, with the object ids it named blanked out."""

        def blank(text: str | None) -> str | None:
            if text is None:
                return None
            for object_id in ids:
                text = text.replace(object_id, "<id>")
            return text

        return result.success, result.error_kind, blank(result.error), blank(result.output)

    async def _like_missing(self, act: Callable[[str], Awaitable[ToolResult]], object_id: str, what: str) -> None:
        missing = self.missing_id(object_id)
        assert missing != object_id, "missing_id must differ from the object's id"
        foreign = await act(object_id)
        absent = await act(missing)
        assert not foreign.success, f"a stranger could {what} the owner's object: {foreign.output!r}"
        assert self._shape(foreign, object_id, missing) == self._shape(absent, object_id, missing), (
            f"{what} of a foreign object must answer exactly like {what} of a missing one"
        )

    # -- the contract --------------------------------------------------------------------------

    def test_the_owner_reads_lists_updates_and_deletes_its_object(self, tmp_path: Path) -> None:
        """The operations work for the owner (so the refusals below are about ownership, nothing else)."""

        async def body(owner: ScopedToolService, stranger: ScopedToolService, object_id: str) -> None:
            del stranger
            before = await self.read_object(owner, object_id)
            assert before.success, f"the owner cannot read its own object: {before.error}"
            assert object_id in await self.list_object_ids(owner)
            changed = await self.update_object(owner, object_id)
            assert changed.success, f"the owner cannot update its own object: {changed.error}"
            after = await self.read_object(owner, object_id)
            assert after.output != before.output, "update_object must change what read_object shows"
            gone = await self.delete_object(owner, object_id)
            assert gone.success, f"the owner cannot delete its own object: {gone.error}"
            assert object_id not in await self.list_object_ids(owner)

        self._run(tmp_path, body)

    def test_a_foreign_object_is_not_listed(self, tmp_path: Path) -> None:
        """A stranger's listing never shows the owner's object."""

        async def body(owner: ScopedToolService, stranger: ScopedToolService, object_id: str) -> None:
            assert object_id in await self.list_object_ids(owner)
            assert object_id not in await self.list_object_ids(stranger)

        self._run(tmp_path, body)

    def test_reading_a_foreign_object_answers_like_a_missing_one(self, tmp_path: Path) -> None:
        """A stranger's read fails exactly as a read of an id that names nothing."""

        async def body(owner: ScopedToolService, stranger: ScopedToolService, object_id: str) -> None:
            del owner
            await self._like_missing(lambda oid: self.read_object(stranger, oid), object_id, "read")

        self._run(tmp_path, body)

    def test_updating_a_foreign_object_answers_like_a_missing_one_and_changes_nothing(self, tmp_path: Path) -> None:
        """A stranger's update fails like one of a missing object, and the owner sees its object unchanged."""

        async def body(owner: ScopedToolService, stranger: ScopedToolService, object_id: str) -> None:
            before = await self.read_object(owner, object_id)
            await self._like_missing(lambda oid: self.update_object(stranger, oid), object_id, "update")
            after = await self.read_object(owner, object_id)
            assert self._shape(after) == self._shape(before), "a stranger's update changed the owner's object"

        self._run(tmp_path, body)

    def test_deleting_a_foreign_object_answers_like_a_missing_one_and_removes_nothing(self, tmp_path: Path) -> None:
        """A stranger's delete fails like one of a missing object, and the owner still has its object."""

        async def body(owner: ScopedToolService, stranger: ScopedToolService, object_id: str) -> None:
            await self._like_missing(lambda oid: self.delete_object(stranger, oid), object_id, "delete")
            still = await self.read_object(owner, object_id)
            assert still.success, "a stranger's delete removed the owner's object"
            assert object_id in await self.list_object_ids(owner)

        self._run(tmp_path, body)


OwnershipContractTests._KIT_TESTS = frozenset(n for n in vars(OwnershipContractTests) if n.startswith("test_"))
