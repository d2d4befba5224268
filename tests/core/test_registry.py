from __future__ import annotations

import pytest

import aleph
from aleph import DuplicateTool, ToolRegistry, ToolSource


def make(name: str) -> aleph.AlephTool:  # type: ignore[type-arg]
    return aleph.tool(name=name, description=f"tool {name}", inline=True)(lambda: name)


def test_duplicate_names_raise_naming_both_owners() -> None:
    reg = ToolRegistry()
    reg.register(make("alpha"), source=ToolSource.plugin("one"))
    with pytest.raises(DuplicateTool) as info:
        reg.register(make("alpha"), source=ToolSource.plugin("two"))
    assert "plugin 'one'" in str(info.value) and "plugin 'two'" in str(info.value)


def test_names_differing_only_by_case_are_refused() -> None:
    reg = ToolRegistry()
    reg.register(make("file_delete"))
    with pytest.raises(DuplicateTool, match="as file_delete"):
        reg.register(make("File_Delete"))


def test_resolve_folds_dots_and_case_to_the_one_canonical_name() -> None:
    reg = ToolRegistry()
    reg.register(make("file_delete"))
    assert reg.resolve("file_delete") == "file_delete"
    assert reg.resolve("file.delete") == "file_delete"
    assert reg.resolve("File.Delete") == "file_delete"
    assert reg.resolve("file-delete") is None
    assert reg.resolve("ﬁle_delete") is None  # ligature look-alike


def test_definitions_are_sorted_and_cached_per_generation() -> None:
    reg = ToolRegistry()
    for n in ("zeta", "alpha", "mid"):
        reg.register(make(n))
    first = reg.definitions()
    assert [d.name for d in first] == ["alpha", "mid", "zeta"]
    assert reg.definitions() is first
    reg.unregister("mid")
    assert [d.name for d in reg.definitions()] == ["alpha", "zeta"]


def test_unregister_by_source_removes_only_that_source() -> None:
    reg = ToolRegistry()
    reg.register(make("a__one"), source=ToolSource.mcp("a"))
    reg.register(make("a__two"), source=ToolSource.mcp("a"))
    reg.register(make("b__one"), source=ToolSource.mcp("b"))
    assert reg.unregister_source(ToolSource.mcp("a")) == ["a__one", "a__two"]
    assert reg.names() == ["b__one"]


def test_subscribers_hear_every_change_and_can_unsubscribe() -> None:
    reg = ToolRegistry()
    seen: list[int] = []
    stop = reg.subscribe(lambda r: seen.append(r.generation))
    reg.register(make("a"))
    reg.unregister("a")
    stop()
    reg.register(make("b"))
    assert seen == [1, 2]


def test_double_underscore_is_reserved_for_mcp_tools_of_the_named_server() -> None:
    reg = ToolRegistry()
    with pytest.raises(ValueError, match="reserved for MCP"):
        reg.register(make("github__create_issue"), source=ToolSource.plugin("sneaky"))
    with pytest.raises(ValueError, match="must be named 'github_evil__<tool>'"):
        reg.register(make("github__create_issue"), source=ToolSource.mcp("github_evil"))
    reg.register(make("github__create_issue"), source=ToolSource.mcp("github"))
    assert reg.get("github__create_issue").source.server_id == "github"  # type: ignore[union-attr]
