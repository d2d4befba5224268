"""hub_catalog_sync, hub_catalog_search and hub_fetch_docs against a PEP 691/503 index on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import aleph

from .conftest import LocalIndex, build_plugin_wheel, hub_runtime


def run(rt: aleph.Aleph, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def go() -> list[Any]:
        async with rt:
            service = rt.tool_service(tier="auto")
            return [(await service.execute(name, payload)).value for name, payload in calls]

    return asyncio.run(go())


@pytest.fixture
def index(local_index: LocalIndex, wheels: dict[str, Path]) -> LocalIndex:
    local_index.add("aleph-greet", wheels["greet-1.0.0"])
    local_index.add("aleph-greet", wheels["greet-1.1.0"])
    local_index.add("aleph-shout", wheels["shout"])
    local_index.add("aleph-plain", wheels["plain"])
    local_index.add("requests-thing", wheels["plain"])  # outside the prefix: never inspected
    return local_index


@pytest.mark.parametrize("json_api", [True, False], ids=["pep691-json", "pep503-html"])
def test_sync_finds_the_plugins_and_their_newest_versions(tmp_path: Path, index: LocalIndex, json_api: bool) -> None:
    index.json_api = json_api
    synced, found = run(
        hub_runtime(tmp_path, index.url), ("hub_catalog_sync", {}), ("hub_catalog_search", {"query": "greet"})
    )
    assert synced["plugins"] == ["aleph-greet", "aleph-shout"]
    assert synced["failed"] == [] and synced["complete"] is True
    top = found["hits"][0]
    assert (top["name"], top["version"], top["installed"]) == ("aleph-greet", "1.1.0", False)
    assert top["entry_points"] == ["greet"] and top["needs_user_consent"] is True
    assert not any(r.startswith("/simple/requests-thing") for r in index.requests)


def test_search_is_offline_ranked_and_limited(tmp_path: Path, index: LocalIndex) -> None:
    run(hub_runtime(tmp_path, index.url), ("hub_catalog_sync", {}))
    index.projects.clear()  # the index is gone: search reads only the local catalog
    loud, limited, none = run(
        hub_runtime(tmp_path, index.url),
        ("hub_catalog_search", {"query": "capital letters"}),
        ("hub_catalog_search", {"limit": 0}),
        ("hub_catalog_search", {"installed": True}),
    )
    assert loud["hits"][0]["name"] == "aleph-shout"
    assert (len(limited["hits"]), limited["total_matched"], limited["truncated"]) == (1, 2, True)
    assert none["hits"] == []


def test_sync_reports_a_wheel_whose_hash_does_not_match(
    tmp_path: Path, index: LocalIndex, wheels: dict[str, Path]
) -> None:
    index.corrupt.add(wheels["shout"].name)
    [synced] = run(hub_runtime(tmp_path, index.url), ("hub_catalog_sync", {}))
    assert synced["plugins"] == ["aleph-greet"]
    [failure] = synced["failed"]
    assert failure["project"] == "aleph-shout" and "does not match" in failure["error"]


def test_sync_of_an_unreachable_index_reports_and_keeps_the_catalog(tmp_path: Path, index: LocalIndex) -> None:
    run(hub_runtime(tmp_path, index.url), ("hub_catalog_sync", {}))
    dead = hub_runtime(tmp_path, "http://127.0.0.1:9/simple/")
    synced, found = run(dead, ("hub_catalog_sync", {}), ("hub_catalog_search", {}))
    assert synced["synced"] == 0 and "fetching" in synced["failed"][0]["error"]
    assert found["total_matched"] == 2


def test_fetch_docs_returns_the_description_and_fetches_through_web_fetch(
    tmp_path: Path, local_index: LocalIndex, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import aleph_files.plugin

    out = tmp_path_factory.mktemp("docwheel")
    docs_url = local_index.url.replace("/simple/", "/docs/greet")
    wheel = build_plugin_wheel(out, "greet", "2.0.0", "Greet people.", urls={"Documentation": docs_url})
    local_index.add("aleph-greet", wheel)
    guarded = hub_runtime(tmp_path, local_index.url, "", aleph_files.plugin)
    [synced] = run(guarded, ("hub_catalog_sync", {}))
    assert synced["plugins"] == ["aleph-greet"]
    with pytest.raises(aleph.ToolError, match="loopback"):  # the files family's SSRF guard is in the way
        run(hub_runtime(tmp_path, local_index.url, "", aleph_files.plugin), ("hub_fetch_docs", {"name": "aleph-greet"}))
    allowed = hub_runtime(tmp_path, local_index.url, '[files]\nallowed_hosts = ["127.0.0.1"]\n', aleph_files.plugin)
    [docs] = run(allowed, ("hub_fetch_docs", {"name": "aleph-greet"}))
    assert docs["docs_url"] == docs_url
    assert "Greet docs" in str(docs["docs"])
    [plain] = run(hub_runtime(tmp_path, local_index.url), ("hub_fetch_docs", {"name": "aleph-greet", "fetch": False}))
    assert plain["summary"] and "docs" not in plain


def test_fetch_docs_of_an_unknown_entry(tmp_path: Path) -> None:
    with pytest.raises(aleph.ExecutionFailed, match="not found in catalog"):
        run(hub_runtime(tmp_path), ("hub_fetch_docs", {"name": "aleph-nothing"}))
