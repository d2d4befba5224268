"""Notes on real files: links, backlinks, paths, renames, SCHEMA.md, and the confinement of the notes folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aleph

from .conftest import Call, caller, make_runtime

pytestmark = pytest.mark.anyio


async def make_graph(call: Call) -> None:
    await call("note_manage", action="create", path="projects/aleph", title="Aleph", content="Uses [[tools/sqlite]].")
    await call(
        "note_manage",
        action="create",
        path="tools/sqlite",
        title="SQLite",
        content="An embedded database.\nsupersedes:: [[tools/bdb]]\nSee [[fts5|full text]].",
    )
    await call("note_manage", action="create", path="tools/fts5", title="FTS5", content="Full-text search in SQLite.")
    await call("note_manage", action="create", path="tools/bdb", title="Berkeley DB", content="Old.")
    await call("note_manage", action="create", path="island", title="Island", content="Links nowhere [[ghost]].")


async def test_notes_are_markdown_files_with_front_matter(call: Call, workspace: Path) -> None:
    await call("note_manage", action="create", path="projects/aleph", title="Aleph", content="Body", tags=["a", "b"])
    text = (workspace / "notes" / "projects" / "aleph.md").read_text()
    assert text.startswith("---\ntitle: Aleph\ntags: [a, b]\ncreated: ")
    assert text.endswith("---\nBody\n")
    got = await call("note_manage", action="get", path="aleph")
    assert (got["note_path"], got["title"], got["tags"], got["content"]) == (
        "projects/aleph",
        "Aleph",
        ["a", "b"],
        "Body\n",
    )
    with pytest.raises(aleph.ExecutionFailed, match="already exists"):
        await call("note_manage", action="create", path="projects/aleph", title="Again")


async def test_the_link_graph_has_neighbours_backlinks_paths_and_types(call: Call) -> None:
    await make_graph(call)
    schema = await call("note_graph_query", op="schema")
    assert schema["total_notes"] == 5
    assert schema["categories"] == [["tools", 3], ["", 1], ["projects", 1]]
    assert schema["relation_types"] == [["link", 2], ["supersedes", 1]]
    assert schema["unresolved_links"] == 1
    back = await call("note_graph_query", op="backlinks", target="tools/sqlite")
    assert back["backlinks"] == [{"from": "projects/aleph", "relation": "link"}]
    near = await call("note_graph_query", op="neighbors", target="tools/sqlite")
    assert [n["path"] for n in near["nodes"]] == ["projects/aleph", "tools/bdb", "tools/fts5"]
    path = await call("note_graph_query", op="path", target="projects/aleph", to="tools/bdb")
    assert path["path_found"] is True
    assert path["path"] == [
        {"from": "projects/aleph", "to": "tools/sqlite", "relation": "link"},
        {"from": "tools/sqlite", "to": "tools/bdb", "relation": "supersedes"},
    ]
    far = await call("note_graph_query", op="path", target="projects/aleph", to="island")
    assert far["path_found"] is False
    group = await call("note_graph_query", op="community", target="tools/fts5")
    assert group["community"] == ["projects/aleph", "tools/bdb", "tools/fts5", "tools/sqlite"]
    with pytest.raises(aleph.ValidationFailed, match="op requires a `target`"):
        await call("note_graph_query", op="neighbors")


async def test_rename_moves_the_file_and_rewrites_inbound_links(call: Call, workspace: Path) -> None:
    await make_graph(call)
    out = await call("note_manage", action="rename", path="tools/sqlite", new_path="db/sqlite")
    assert out["rewritten"] == ["projects/aleph"]
    assert not (workspace / "notes" / "tools" / "sqlite.md").exists()
    assert "[[db/sqlite]]" in (workspace / "notes" / "projects" / "aleph.md").read_text()
    back = await call("note_graph_query", op="backlinks", target="db/sqlite")
    assert back["backlinks"] == [{"from": "projects/aleph", "relation": "link"}]


async def test_files_edited_outside_aleph_are_seen(call: Call, workspace: Path) -> None:
    await make_graph(call)
    (workspace / "notes" / "hand.md").write_text("# Handwritten\nAbout [[tools/fts5]] and ranking.\n")
    hits = await call("note_manage", action="query", query="handwritten ranking")
    assert hits["notes"][0]["path"] == "hand"
    back = await call("note_graph_query", op="backlinks", target="tools/fts5")
    assert {b["from"] for b in back["backlinks"]} == {"hand", "tools/sqlite"}
    (workspace / "notes" / "hand.md").unlink()
    assert (await call("note_manage", action="query", query="handwritten"))["notes"] == []


async def test_append_update_delete_and_list(call: Call) -> None:
    await call("note_manage", action="append", path="log/today", facts=["first", "second"], links=["log/yesterday"])
    got = await call("note_manage", action="get", path="log/today")
    assert got["content"] == "- first\n- second\n\n[[log/yesterday]]\n"
    await call("note_manage", action="update", path="log/today", content="rewritten")
    assert (await call("note_manage", action="get", path="log/today"))["content"] == "rewritten\n"
    listed = await call("note_manage", action="list", path="log")
    assert [n["path"] for n in listed["notes"]] == ["log/today"]
    await call("note_manage", action="delete", path="log/today")
    with pytest.raises(aleph.ExecutionFailed, match="does not exist"):
        await call("note_manage", action="get", path="log/today")
    with pytest.raises(aleph.ValidationFailed, match="facts: at least one"):
        await call("note_manage", action="append", path="log/today")


async def test_schema_md_is_guarded_by_its_hash(call: Call) -> None:
    assert await call("note_schema", action="read") == {"content": None, "content_hash": None, "conflict": False}
    first = await call("note_schema", action="write", content="# Schema\n## Tags\nlowercase\n")
    assert first["conflict"] is False
    stale = await call("note_schema", action="write", content="# Other\n", expected_hash="0" * 64)
    assert stale["conflict"] is True
    blind = await call("note_schema", action="write", content="# Blind\n")
    assert blind["conflict"] is True
    ok = await call("note_schema", action="write", content="# New\n", expected_hash=first["content_hash"])
    assert ok["conflict"] is False
    assert (await call("note_schema", action="read"))["content"] == "# New\n"
    orient = await call("note_orient")
    assert orient["schema"] == "# New"


@pytest.mark.parametrize(
    "path", ["../../etc/passwd", "wiki/../../secret", ".hidden/x", "a\\b", "x\x00y", "/".join(["d"] * 9)]
)
async def test_traversal_and_malformed_paths_are_refused(call: Call, path: str) -> None:
    with pytest.raises(aleph.ValidationFailed, match="path"):
        await call("note_manage", action="create", path=path, title="x")
    with pytest.raises(aleph.ValidationFailed, match="path"):
        await call("memory_browse", action="read", path=path)


async def test_symlinks_inside_the_notes_folder_are_never_followed(call: Call, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("top secret")
    notes = workspace / "notes"
    notes.mkdir()
    os.symlink(outside, notes / "escape")
    os.symlink(outside / "secret.md", notes / "leak.md")
    with pytest.raises(aleph.ExecutionFailed, match="symlink"):
        await call("note_manage", action="get", path="escape/secret")
    with pytest.raises(aleph.ExecutionFailed, match="symlink"):
        await call("note_manage", action="get", path="leak")
    with pytest.raises(aleph.ExecutionFailed, match="symlink"):
        await call("note_manage", action="create", path="escape/planted", title="x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]
    listing = await call("memory_browse", action="list")
    assert listing["entries"] == []
    assert (await call("note_graph_query", op="schema"))["total_notes"] == 0


async def test_path_rules_see_the_note_file_the_call_would_write(workspace: Path) -> None:
    policy = '[policies.tool_permissions.overrides]\n"note_manage(notes/private/**)" = "deny"\n'
    async with make_runtime(workspace, policy) as rt:
        call = caller(rt)
        await call("note_manage", action="create", path="public/a", title="A")
        with pytest.raises(aleph.PermissionDenied):
            await call("note_manage", action="create", path="private/b", title="B")
        assert not (workspace / "notes" / "private").exists()


def test_a_notes_folder_inside_the_data_directory_is_refused(workspace: Path) -> None:
    import aleph_memory.plugin

    (workspace / "aleph.toml").write_text(
        f'[workspace]\ndata_dir = "{(workspace / "state").as_posix()}"\n[memory]\nnotes_dir = "state/notes"\n'
    )
    with pytest.raises(aleph.PluginError, match="protected path"):
        aleph.load(workspace / "aleph.toml", plugins=[aleph_memory.plugin], entry_points=False, strict=True)


async def test_memory_browse_lists_folders_and_reads_notes(call: Call) -> None:
    await make_graph(call)
    top = await call("memory_browse", action="list")
    assert top["entries"] == ["projects/", "tools/", "island"]
    tools = await call("memory_browse", action="list", path="tools")
    assert tools["entries"] == ["bdb", "fts5", "sqlite"]
    read = await call("memory_browse", action="read", path="tools/fts5")
    assert "Full-text search in SQLite." in read["content"]
    missing = await call("memory_browse", action="list", path="nothing")
    assert missing == {"success": True, "message": "No entries at nothing", "entries": []}
