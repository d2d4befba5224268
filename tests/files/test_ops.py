"""file_ops: listing and searching with glob semantics, and the mutating operations."""

from __future__ import annotations

from pathlib import Path

import pytest
from aleph_files._ops import glob_regex

from aleph import ExecutionFailed, ValidationFailed


def test_glob_star_never_crosses_a_slash_and_double_star_spans_directories() -> None:
    assert glob_regex("src/*.py").match("src/a.py")
    assert not glob_regex("src/*.py").match("src/sub/a.py")
    assert glob_regex("src/**/*.py").match("src/sub/deep/a.py")
    assert glob_regex("src/**/*.py").match("src/a.py")
    assert not glob_regex("?.txt").match("ab.txt")


@pytest.fixture
def tree(workspace: Path) -> Path:
    for rel, text in {
        "src/app.py": "def main():\n    return 42\n",
        "src/sub/util.py": "HELPER = 'answer 42'\n",
        "docs/readme.md": "# Title\n",
        "notes.txt": "nothing here\n",
    }.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    return workspace


@pytest.mark.anyio
async def test_search_by_name_and_content(call, tree: Path) -> None:
    names = await call("file_ops", operation="search", pattern="*.py")
    assert ["src/app.py", "src/sub/util.py"] == [m["path"] for m in names["matches"]]
    shallow = await call("file_ops", operation="search", pattern="src/*.py")
    assert ["src/app.py"] == [m["path"] for m in shallow["matches"]]
    hits = await call("file_ops", operation="search", content_regex=r"\b42\b", pattern="**/*.py")
    assert [("src/app.py", 2), ("src/sub/util.py", 1)] == [(m["path"], m["line"]) for m in hits["matches"]]
    bounded = await call("file_ops", operation="search", pattern="*", max_results=2)
    assert (2, True) == (len(bounded["matches"]), bounded["truncated"])
    with pytest.raises(ValidationFailed, match="content_regex"):
        await call("file_ops", operation="search", content_regex="(")


@pytest.mark.anyio
async def test_list_and_stats(call, tree: Path) -> None:
    top = await call("file_ops", operation="list", path=".")
    assert {"docs", "src", "notes.txt", "aleph.toml"} <= {e["path"] for e in top["entries"]}
    stats = await call("file_ops", operation="stats", path="src")
    assert ("directory", 2, 1) == (stats["type"], stats["files"], stats["directories"])


@pytest.mark.anyio
async def test_listings_and_searches_leave_out_alephs_own_workspace_directories(call, tree: Path) -> None:
    # .aleph-tx holds aleph-exec's transaction layers: not the project's files, at the workspace's top only.
    (tree / ".aleph-tx" / "rt-1" / "layer" / "upper").mkdir(parents=True)
    (tree / ".aleph-tx" / "rt-1" / "layer" / "upper" / "app.py").write_text("42\n")
    (tree / "src" / ".aleph-tx").mkdir()
    (tree / "src" / ".aleph-tx" / "kept.py").write_text("42\n")
    top = await call("file_ops", operation="list", path=".")
    assert ".aleph-tx" not in {e["path"] for e in top["entries"]}
    everything = await call("file_ops", operation="list", path=".", recursive=True)
    assert not [e["path"] for e in everything["entries"] if e["path"].startswith(".aleph-tx")]
    hits = await call("file_ops", operation="search", content_regex="42", pattern="**/*.py")
    assert ["src/.aleph-tx/kept.py", "src/app.py", "src/sub/util.py"] == sorted(m["path"] for m in hits["matches"])
    stats = await call("file_ops", operation="stats", path=".")
    assert stats["files"] == len([p for p in tree.rglob("*") if p.is_file() and ".aleph-tx/rt-1" not in str(p)])


@pytest.mark.anyio
async def test_move_copy_mkdir_and_delete(call, tree: Path) -> None:
    await call("file_ops", operation="mkdir", path="build/out")
    assert (tree / "build/out").is_dir()
    await call("file_ops", operation="copy", path="src", destination="backup")
    assert "def main():\n    return 42\n" == (tree / "backup/app.py").read_text()
    await call("file_ops", operation="move", path="notes.txt", destination="docs")
    assert (tree / "docs/notes.txt").exists() and not (tree / "notes.txt").exists()
    with pytest.raises(ExecutionFailed, match="already exists"):
        await call("file_ops", operation="move", path="docs/notes.txt", destination="docs/readme.md")
    with pytest.raises(ExecutionFailed, match="not empty"):
        await call("file_ops", operation="delete", path="backup")
    out = await call("file_ops", operation="delete", path="backup", recursive=True)
    assert not (tree / "backup").exists() and out["entries"] == 4


@pytest.mark.anyio
async def test_delete_of_a_symlink_removes_the_link_not_its_target(call, tree: Path) -> None:
    (tree / "link").symlink_to("src")
    await call("file_ops", operation="delete", path="link")
    assert not (tree / "link").is_symlink() and (tree / "src/app.py").exists()


@pytest.mark.anyio
async def test_batch_move_is_all_or_nothing(call, tree: Path) -> None:
    moves = [
        {"source": "notes.txt", "destination": "n.txt"},
        {"source": "missing.txt", "destination": "m.txt"},
    ]
    with pytest.raises(ExecutionFailed, match="undone"):
        await call("file_ops", operation="batch_move", moves=moves)
    assert (tree / "notes.txt").exists() and not (tree / "n.txt").exists()
    ok = await call("file_ops", operation="batch_move", moves=moves[:1])
    assert [{"source": "notes.txt", "destination": "n.txt"}] == ok["moved"]


@pytest.mark.anyio
async def test_organize_sorts_files_into_folders_by_extension(call, tree: Path) -> None:
    (tree / "inbox").mkdir()
    for name in ("a.PDF", "b.pdf", "c.jpg", "README"):
        (tree / "inbox" / name).write_text(name)
    plan = await call("file_ops", operation="organize", path="inbox", dry_run=True)
    assert 4 == len(plan["moves"]) and (tree / "inbox/a.PDF").exists()
    await call("file_ops", operation="organize", path="inbox")
    assert sorted(p.relative_to(tree / "inbox").as_posix() for p in (tree / "inbox").rglob("*") if p.is_file()) == [
        "jpg/c.jpg",
        "no_extension/README",
        "pdf/a.PDF",
        "pdf/b.pdf",
    ]
