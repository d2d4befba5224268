"""search through a SearXNG-compatible server on loopback and through a provider plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aleph

from .conftest import make_runtime
from .servers import searxng_routes, serve

RESULTS = [
    {"title": "Aleph docs", "url": "https://example.org/aleph", "content": "Tool system"},
    {"title": "Second", "url": "https://example.org/2", "content": "More"},
]


class ProviderPlugin:
    """An in-process plugin that registers a search backend through the hook."""

    ALEPH_PLUGIN_NAME = "fake_search_provider"

    def __init__(self) -> None:
        self.queries: list[str] = []

    @aleph.hookimpl
    def aleph_search_providers(self, register: Any) -> None:
        async def search(query: str, max_results: int) -> list[dict[str, str]]:
            self.queries.append(query)
            return [{"title": f"hit for {query}", "url": "https://example.net/", "snippet": "from the plugin"}]

        register("plugin_engine", search)


@pytest.mark.anyio
async def test_search_queries_searxng_json_api(workspace: Path) -> None:
    with serve(searxng_routes(RESULTS)) as base:
        async with make_runtime(workspace, f'[files]\nsearxng_url = "{base}"\n') as rt:
            result = await aleph.UnscopedToolService(rt.registry).call("search", {"query": "aleph", "max_results": 1})
    out = json.loads(result.output or "")
    assert "searxng" == out["provider"]
    assert [{"title": "Aleph docs", "url": "https://example.org/aleph", "snippet": "Tool system (aleph)"}] == out[
        "results"
    ]


@pytest.mark.anyio
async def test_search_uses_a_plugin_provider_and_falls_back_when_searxng_fails(workspace: Path) -> None:
    plugin = ProviderPlugin()
    with serve({}) as base:  # a server with no /search route: SearXNG answers 404
        toml = f'[files]\nsearxng_url = "{base}"\nsearch_provider = "searxng"\n'
        async with make_runtime(workspace, toml, plugins=(plugin,)) as rt:
            result = await aleph.UnscopedToolService(rt.registry).call("search", {"query": "q1"})
    out = json.loads(result.output or "")
    assert ("plugin_engine", ["q1"]) == (out["provider"], plugin.queries)
    assert out["fallback_errors"][0].startswith("searxng: HTTPStatusError")


@pytest.mark.anyio
async def test_search_without_a_backend_says_how_to_get_one(workspace: Path) -> None:
    async with make_runtime(workspace) as rt:
        result = await aleph.UnscopedToolService(rt.registry).call("search", {"query": "x"})
    assert (
        "tool search execution failed: search not available: no backend configured "
        "(set [files] searxng_url or install a search provider plugin)"
    ) == result.error
