"""A private note's owner is who created it, never what a caller's text or the index's limits make it look like.

The owner lives in the note's front matter; a title or tag a caller writes is folded onto its own line so it
can never add an ``owner:`` or ``private:`` line, and a note the index left out is judged by its own front
matter, so ``max_notes`` is not a way past another agent's private note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph

from .conftest import caller, make_runtime

pytestmark = pytest.mark.anyio

FORGED = "x\nprivate: true\nowner: {who}\ny"


async def refusal(call: Any, name: str, **payload: Any) -> str:
    with pytest.raises(aleph.ToolError) as info:
        await call(name, **payload)
    return str(info.value)


def paths(listed: dict[str, Any]) -> list[str]:
    return [n["path"] for n in listed["notes"]]


@pytest.mark.parametrize("tag", [FORGED, FORGED.replace("\n", "\r"), FORGED.replace("\n", "\u2028")])
async def test_a_tag_cannot_make_a_shared_note_private_to_its_writer(
    rt: aleph.Aleph, workspace: Path, tag: str
) -> None:
    alice = caller(rt, agent="alice", session="alice-notes")
    mallory = caller(rt, agent="mallory", session="mallory-notes")
    await alice("note_manage", action="create", path="team/plan", title="Plan", content="the shared plan")
    await mallory("note_manage", action="update", path="team/plan", content="edited", tags=[tag.format(who="mallory")])
    assert paths(await alice("note_manage", action="list")) == ["team/plan"]
    assert (await alice("note_manage", action="get", path="team/plan"))["content"].strip() == "edited"
    lines = (workspace / "notes" / "team" / "plan.md").read_text().splitlines()
    assert not [line for line in lines if line.startswith(("owner:", "private:"))]


async def test_a_tag_or_title_cannot_plant_a_private_note_in_another_agents_name(rt: aleph.Aleph) -> None:
    mallory = caller(rt, agent="mallory", session="mallory-notes")
    alice = caller(rt, agent="alice", session="alice-notes")
    bob = caller(rt, agent="bob", session="bob-notes")
    await mallory(
        "note_manage", action="create", path="alice/todo", title="T", content="pay m", tags=[FORGED.format(who="alice")]
    )
    await mallory("note_manage", action="append", path="alice/more", facts=["pay m"], tags=[FORGED.format(who="alice")])
    await mallory("note_manage", action="create", path="alice/t2", title=FORGED.format(who="alice"), content="pay m")
    # Shared notes, as mallory made them: bob sees them too, none is presented as alice's own.
    assert paths(await bob("note_manage", action="list")) == ["alice/more", "alice/t2", "alice/todo"]
    assert paths(await alice("note_manage", action="list")) == ["alice/more", "alice/t2", "alice/todo"]


async def test_a_private_note_past_max_notes_still_does_not_exist_for_another_agent(workspace: Path) -> None:
    async with make_runtime(workspace, "[memory]\nmax_notes = 3\n") as rt:
        alice = caller(rt, agent="alice", session="alice-notes")
        mallory = caller(rt, agent="mallory", session="mallory-notes")
        await alice(
            "note_manage", action="create", path="plans/heist", title="Heist", content="code 4711", private=True
        )
        for name in ("a", "b", "c"):  # walked before plans/: the index is full without alice's note
            await mallory("note_manage", action="create", path=name, title=name, content="filler")
        assert paths(await mallory("note_manage", action="list")) == ["a", "b", "c"]
        for name, payload in (
            ("note_manage", {"action": "get"}),
            ("note_manage", {"action": "update", "content": "mine now"}),
            ("note_manage", {"action": "delete"}),
            ("memory_browse", {"action": "read"}),
        ):
            foreign = await refusal(mallory, name, **payload, path="plans/heist")
            missing = await refusal(mallory, name, **payload, path="plans/nothere")
            assert foreign == missing.replace("nothere", "heist"), name
        assert (await mallory("memory_browse", path="plans"))["entries"] == []
        assert "already exists" in await refusal(
            mallory, "note_manage", action="append", path="plans/heist", facts=["x"]
        )
        assert (await alice("note_manage", action="get", path="plans/heist"))["content"].strip() == "code 4711"


async def test_a_folder_of_only_another_agents_private_notes_does_not_exist_for_others(rt: aleph.Aleph) -> None:
    alice = caller(rt, agent="alice", session="alice-notes")
    mallory = caller(rt, agent="mallory", session="mallory-notes")
    await alice("note_manage", action="create", path="acme-deal/terms", title="T", content="price 9M", private=True)
    await alice("note_manage", action="create", path="acme-deal/deep/more", title="M", content="x", private=True)
    await alice("note_manage", action="create", path="shared/readme", title="R", content="hello")
    assert (await mallory("memory_browse", path=""))["entries"] == ["shared/"]
    for where in ("acme-deal", "acme-deal/deep"):
        foreign = await mallory("memory_browse", path=where)
        missing = await mallory("memory_browse", path="nothere")
        assert foreign == {**missing, "message": missing["message"].replace("nothere", where)}
    assert (await alice("memory_browse", path=""))["entries"] == ["acme-deal/", "shared/"]
    # Once a note others can see is in it, the folder is everyone's to see.
    await mallory("note_manage", action="create", path="acme-deal/public", title="P", content="news")
    assert (await mallory("memory_browse", path="acme-deal"))["entries"] == ["public"]
