"""Discovery through ``aleph.load(...)`` + ``rt.tool_service(...)``: discovery tools, deferral, modes, repair, CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import (
    ExecutionFailed,
    LoopTool,
    PermissionDenied,
    ToolFacts,
    ToolNotFound,
    ToolSource,
    ValidationFailed,
)
from aleph._cli import main
from aleph._discovery import DeferredSet, collapse_note
from aleph._turn import TurnContext

sys.path.insert(0, str(Path(__file__).parent))
from discovery_relevance import catalog_tools

pytestmark = pytest.mark.anyio

PER_REQUEST = {"tool_search", "get_tool_schema", "session_set_mode"}


class Catalog:
    """An in-process plugin registering the reference catalog."""

    ALEPH_PLUGIN_NAME = "catalog"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        # Aleph adds its discovery tools per request; the catalog's stand-ins would shadow them.
        register(*(t for t in catalog_tools() if t.name not in PER_REQUEST))


def write_config(workspace: Path, text: str) -> None:
    (workspace / "aleph.toml").write_text(text)


def load(workspace: Path, config: str = "") -> aleph.Aleph:
    write_config(workspace, config)
    return aleph.load(workspace=workspace, plugins=[Catalog()], entry_points=False, strict=True)


def session(key: str = "s1") -> TurnContext:
    return TurnContext(session_key=key)


async def search(service: aleph.ScopedToolService, query: str, limit: int | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"query": query} if limit is None else {"query": query, "limit": limit}
    result: dict[str, Any] = (await service.execute("tool_search", payload)).value
    return result


# -- defaults from [tools] ------------------------------------------------------------------------


async def test_default_config_collapses_non_core_and_keeps_core(workspace: Path) -> None:
    async with load(workspace) as rt:
        defs = {d.name: d for d in await rt.tool_service(turn=session()).list()}
    assert defs["file_read"].input_schema["properties"]
    assert {"type": "object", "additionalProperties": True} == defs["memory_browse"].input_schema
    assert defs["memory_browse"].description.endswith(collapse_note("memory_browse"))
    assert {"tool_search", "get_tool_schema", "session_set_mode"} <= set(defs)
    assert defs["tool_search"].input_schema["properties"]


async def test_star_core_sends_every_schema_and_offers_no_discovery_tools(workspace: Path) -> None:
    async with load(workspace, '[tools]\ncore = ["*"]\n') as rt:
        defs = {d.name: d for d in await rt.tool_service(turn=session()).list()}
    assert defs["memory_browse"].input_schema["properties"]
    assert "browser_click" in defs  # no mode deferral without discovery
    assert not {"tool_search", "get_tool_schema"} & set(defs)


async def test_browser_satellites_are_deferred_but_describable_and_callable(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        listed = {d.name for d in await service.list()}
        assert "browser_open" in listed and "browser_click" not in listed
        assert "browser_click" in {d.name for d in await service.dispatchable_list()}
        assert await service.describe("browser_click") is not None
        out = await service.execute("browser_click", {"target": "e4"})
    assert {"tool": "browser_click", "input": {"target": "e4"}} == out.value


async def test_a_collapsed_schema_does_not_skip_validation(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        assert (await service.describe("memory_browse")).input_schema.get("additionalProperties") is True  # type: ignore[union-attr]
        with pytest.raises(ValidationFailed, match="category"):
            await service.execute("memory_browse", {"category": 5})
        with pytest.raises(ValidationFailed):
            await service.execute("memory_browse", {"category": "x", "bogus": 1})


async def test_dispatcher_schema_is_cached_across_requests_of_a_session(workspace: Path) -> None:
    async with load(workspace) as rt:
        first = await rt.tool_service(turn=session()).dispatcher_schema()
        second = await rt.tool_service(turn=session()).dispatcher_schema()
    assert first is second


# -- tool_search ----------------------------------------------------------------------------------


async def test_search_ranks_the_relevant_tool_first_with_its_full_schema(workspace: Path) -> None:
    async with load(workspace) as rt:
        found = await search(rt.tool_service(turn=session()), "take a screenshot of the browser page")
    top = found["results"][0]
    assert "browser_screenshot" == top["name"]
    assert top["parameters"]["properties"]["full_page"]
    assert round(top["score"], 3) == top["score"]
    assert found["count"] == len(found["results"]) <= 5
    assert "take a screenshot of the browser page" == found["query"]


async def test_search_hits_are_promoted_only_the_top_hit_with_limit_one(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        found = await search(service, "drag and drop an element", 1)
        assert ["browser_drag"] == [r["name"] for r in found["results"]]
        following = {d.name for d in await rt.tool_service(turn=session()).list()}
        other = {d.name for d in await rt.tool_service(turn=session("s2")).list()}
    assert "browser_drag" in following and "browser_hover" not in following
    assert "browser_drag" not in other  # another session keeps its own deferred set


async def test_limit_is_clamped_and_defaults_to_five(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        assert 5 == (await search(service, "browser"))["count"]
        assert 20 == (await search(service, "browser", 500))["count"]
        assert 1 == (await search(service, "browser", 0))["count"]


async def test_empty_query_is_a_clear_error(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        with pytest.raises(ValidationFailed, match=r"tool_search requires a non-empty `query`\."):
            await search(service, "   ")
        with pytest.raises(ValidationFailed, match="query"):
            await service.execute("tool_search", {"limit": 3})


async def test_no_match_is_count_zero(workspace: Path) -> None:
    async with load(workspace) as rt:
        assert {"query": "xyzzy", "count": 0, "results": []} == await search(rt.tool_service(turn=session()), "xyzzy")


async def test_denied_and_not_allowed_tools_are_never_returned(workspace: Path) -> None:
    config = (
        '[policies.tool_permissions.overrides]\n"browser_screenshot" = "deny"\n'
        '[agents.limited]\nallowed_tools = ["browser_click", "file_read", "tool_search", "get_tool_schema"]\n'
        "[agents.none]\nallowed_tools = []\n"
    )
    async with load(workspace, config) as rt:
        found = await search(rt.tool_service(turn=session()), "screenshot of the page", 20)
        names = {r["name"] for r in found["results"]}
        assert "browser_screenshot" not in names and "desktop" in names
        limited = rt.tool_service(agent="limited", turn=session("s3"))
        found = await search(limited, "click on the page", 20)
        assert {"browser_click"} == {r["name"] for r in found["results"]}
        lookup = (await limited.execute("get_tool_schema", {"tool_name": "browser_screenshot"})).value
        assert lookup["found"] is False and "browser_screenshot" not in lookup["suggestions"]
        nothing = rt.tool_service(agent="none", turn=session("s4"))
        assert await nothing.list() == [] and await nothing.dispatchable_list() == []
        for name, payload in (
            ("tool_search", {"query": "click"}),
            ("get_tool_schema", {"tool_name": "file_read"}),
            ("session_set_mode", {"mode": "chat"}),
        ):
            with pytest.raises(aleph.ToolNotFound):
                await nothing.execute(name, payload)


# -- get_tool_schema --------------------------------------------------------------------------------


async def test_get_tool_schema_returns_the_original_schema(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        out = (await service.execute("get_tool_schema", {"tool_name": "browser_navigate"})).value
    assert {"found", "name", "parameters"} == set(out)
    assert out["found"] is True and "browser_navigate" == out["name"]
    assert "url" in out["parameters"]["properties"]


async def test_get_tool_schema_miss_suggests_names(workspace: Path) -> None:
    async with load(workspace) as rt:
        out = (await rt.tool_service(turn=session()).execute("get_tool_schema", {"tool_name": "browser_navigat"})).value
    assert out["found"] is False
    assert "No tool named 'browser_navigat'." == out["error"]
    assert "browser_navigate" == out["suggestions"][0]


async def test_get_tool_schema_empty_name_is_an_error(workspace: Path) -> None:
    async with load(workspace) as rt:
        with pytest.raises(ValidationFailed, match=r"get_tool_schema requires a non-empty `tool_name`\."):
            await rt.tool_service(turn=session()).execute("get_tool_schema", {"tool_name": " "})


# -- deferral settings ------------------------------------------------------------------------------


async def test_defer_mcp_tools_defers_every_mcp_tool_until_searched(workspace: Path) -> None:
    async def handler(data: dict[str, Any]) -> str:
        return "created"

    async with load(workspace, "[tools]\ndefer_mcp_tools = true\n") as rt:
        rt.register(
            LoopTool("gh__create_issue", "Create a GitHub issue.", {"type": "object"}, handler, facts=ToolFacts()),
            source=ToolSource.mcp("gh"),
        )
        service = rt.tool_service(turn=session())
        assert "gh__create_issue" not in {d.name for d in await service.list()}
        assert "created" == (await service.execute("gh__create_issue", {})).value
        await search(service, "open a github issue")
        assert "gh__create_issue" in {d.name for d in await rt.tool_service(turn=session()).list()}


async def test_auto_deferral_defers_non_core_tools_above_the_threshold(workspace: Path) -> None:
    config = '[tools]\ncore = ["file_read"]\ndefer = "auto:1"\ncontext_budget_tokens = 1000\n'
    async with load(workspace, config) as rt:
        listed = {d.name for d in await rt.tool_service(turn=session()).list()}
    assert {"file_read", "tool_search", "get_tool_schema", "ask_user", "session_set_mode", "self_config"} == listed


async def test_auto_deferral_stays_off_below_the_threshold(workspace: Path) -> None:
    config = '[tools]\ncore = ["file_read"]\ndefer = "auto:100"\ncontext_budget_tokens = 10000000\n'
    async with load(workspace, config) as rt:
        listed = {d.name for d in await rt.tool_service(turn=session()).list()}
    assert "memory_browse" in listed


async def test_bad_defer_setting_is_a_config_error(workspace: Path) -> None:
    with pytest.raises(aleph.ConfigError, match="auto:N"):
        load(workspace, '[tools]\ndefer = "sometimes"\n')


async def test_an_explicit_deferred_set_is_used_and_promoted_by_search(workspace: Path) -> None:
    deferred = DeferredSet(["memory_browse"])
    async with load(workspace, '[tools]\ncore = ["*"]\n') as rt:
        service = rt.tool_service(turn=session(), deferred=deferred)
        assert "memory_browse" not in {d.name for d in await service.list()}
        await search(service, "browse memory by category", 1)
    assert "memory_browse" not in deferred and 1 == deferred.generation


# -- session modes ---------------------------------------------------------------------------------


async def test_session_set_mode_changes_core_and_deferral_from_the_next_turn(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        out = (await service.execute("session_set_mode", {"mode": "chat"})).value
        assert {"mode": "chat", "previous": "work"} == {k: out[k] for k in ("mode", "previous")}
        chat = {d.name: d for d in await rt.tool_service(turn=session()).list()}
        assert "browser_open" not in chat and "team_create" not in chat
        assert chat["bash"].input_schema == {"type": "object", "additionalProperties": True}
        await rt.tool_service(turn=session()).execute("session_set_mode", {"mode": "code"})
        code = {d.name: d for d in await rt.tool_service(turn=session()).list()}
    assert code["apply_patch"].input_schema["properties"] and "desktop" not in code
    assert "code" == aleph.load(workspace=workspace, entry_points=False).discovery.sessions.get("s1").mode


async def test_session_set_mode_without_a_session_is_a_clear_error(workspace: Path) -> None:
    async with load(workspace) as rt:
        with pytest.raises(ExecutionFailed, match="needs a session"):
            await rt.tool_service().execute("session_set_mode", {"mode": "chat"})
        with pytest.raises(ValidationFailed, match="mode"):
            await rt.tool_service(turn=session()).execute("session_set_mode", {"mode": "party"})


async def test_a_stored_session_exec_tier_applies_when_the_request_names_none(workspace: Path) -> None:
    async with load(workspace) as rt:
        rt.discovery.sessions.set_exec_tier("s1", "plan")
        assert "plan" == rt.tool_service(turn=session()).tier.id
        assert "full" == rt.tool_service(turn=session(), tier="full").tier.id
        assert "auto" == rt.tool_service(turn=session("s2")).tier.id


# -- name repair -----------------------------------------------------------------------------------


async def test_case_and_separator_spellings_are_repaired_to_the_canonical_tool(workspace: Path) -> None:
    async with load(workspace) as rt:
        service = rt.tool_service(turn=session())
        assert "browser_click" == (await service.execute("Browser.Click", {"target": "e1"})).value["tool"]
        assert 0 == (await service.execute("Tool.Search", {"query": "xyzzy"})).value["count"]


async def test_a_fuzzy_name_is_suggested_not_run(workspace: Path) -> None:
    async with load(workspace) as rt:
        with pytest.raises(ToolNotFound, match="Did you mean: browser_click"):
            await rt.tool_service(turn=session()).execute("browser_clik", {"target": "e1"})


async def test_gates_run_on_the_repaired_canonical_name(workspace: Path) -> None:
    async with load(workspace, '[policies.tool_permissions.overrides]\n"browser_click" = "deny"\n') as rt:
        service = rt.tool_service(turn=session())
        with pytest.raises(PermissionDenied, match="browser_click"):
            await service.execute("Browser.Click", {"target": "e1"})


async def test_a_denied_tool_is_not_repaired_into(workspace: Path) -> None:
    async with load(workspace, '[policies.tool_permissions.overrides]\n"tool_search" = "deny"\n') as rt:
        service = rt.tool_service(turn=session())
        with pytest.raises(ToolNotFound):
            await service.execute("Tool.Search", {"query": "x"})
        assert "tool_search" not in {d.name for d in await service.list()}


async def test_look_alike_unicode_names_are_never_repaired(workspace: Path) -> None:
    async with load(workspace) as rt:
        with pytest.raises(ToolNotFound):
            await rt.tool_service(turn=session()).execute("\u212aEEP", {})  # Kelvin sign folds to 'k'
        with pytest.raises(ToolNotFound):
            await rt.tool_service(turn=session()).execute("tool_search\u200b", {"query": "x"})


# -- CLI --------------------------------------------------------------------------------------------


@pytest.fixture
def cli_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI loads the catalog plugin in-process (the core test env installs no tool distribution)."""
    from aleph._cli import tools_cmd

    def load_runtime(args: Any) -> aleph.Aleph:
        return aleph.load(args.config, workspace=args.workspace, plugins=[Catalog()], entry_points=False)

    monkeypatch.setattr(tools_cmd, "load_runtime", load_runtime)


@pytest.mark.usefixtures("cli_catalog")
def test_cli_tools_search_prints_ranked_tools(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["tools", "search", "take a screenshot of the browser page", "--limit", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert 2 == len(lines)
    assert "browser_screenshot" == lines[0].split()[1]


@pytest.mark.usefixtures("cli_catalog")
def test_cli_tools_search_json(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["tools", "search", "browse my memories by category", "--json"])
    found = json.loads(capsys.readouterr().out)
    assert "memory_browse" == found["results"][0]["name"]
    assert found["results"][0]["parameters"]["properties"]["category"]


def test_cli_tools_search_rejects_bad_arguments(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 2 == main(["tools", "search", " "])
    assert 2 == main(["tools", "search", "x", "--limit", "21"])
    assert "--limit must be between 1 and 20" in capsys.readouterr().err


@pytest.mark.usefixtures("cli_catalog")
def test_cli_describe_shows_the_full_schema(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert 0 == main(["tools", "describe", "memory_browse"])
    assert json.loads(capsys.readouterr().out)["input_schema"]["properties"]["category"]
