"""``search``: web search through pluggable backends (SearXNG, or any plugin's provider)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import httpx
from pydantic import Field

from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph_files._config import FilesConfig

__all__ = ["SearchFn", "SearchTool", "searxng_backend"]

SearchFn = Callable[[str, int], Awaitable[list[Mapping[str, Any]]]]
"""A backend: ``await search(query, max_results)`` → mappings with ``title``, ``url``, ``snippet``."""


def searxng_backend(config: FilesConfig) -> SearchFn:
    """A backend over a SearXNG instance's JSON API (``/search?q=...&format=json``).

    The URL comes from the operator's configuration, so it may point at a private address (a local
    SearXNG is the usual set-up); the model never chooses it.
    """
    base = (config.searxng_url or "").rstrip("/")

    async def search(query: str, max_results: int) -> list[Mapping[str, Any]]:
        async with httpx.AsyncClient(trust_env=False, timeout=config.search_timeout_seconds) as client:
            resp = await client.get(
                f"{base}/search",
                params={"q": query, "format": "json"},
                headers={"User-Agent": config.user_agent, "Accept": "application/json"},
            )
            resp.raise_for_status()
            data = resp.json()
        results = data.get("results", []) if isinstance(data, dict) else []
        return [
            {"title": r.get("title", ""), "url": r.get("url", ""), "snippet": r.get("content", "")}
            for r in results[:max_results]
            if isinstance(r, dict)
        ]

    return search


class SearchArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=1000)
    """What to search the web for."""
    max_results: int = Field(default=8, ge=1, le=20)
    """How many results to return (1-20)."""
    provider: str | None = Field(default=None, max_length=64)
    """A specific backend by name; default: the configured one, falling back to the others."""


class SearchTool(AlephTool[SearchArgs]):
    NAME = "search"
    DESCRIPTION = (
        "Search the web and return result titles, URLs and snippets. Use web_fetch on a result URL to read "
        "the page. Backends: a configured SearXNG instance or a provider plugin; if the first fails the next "
        "is tried."
    )
    Args = SearchArgs
    FACTS = ToolFacts(
        untrusted_output="web search results",
        idempotent=True,
        concurrent_safe=True,
        max_duration_ms=45_000,
        tags=("network", "read"),
    )

    def __init__(self, providers: Mapping[str, SearchFn], config: FilesConfig) -> None:
        self.providers = dict(providers)
        self.config = config

    def _order(self, wanted: str | None) -> list[str]:
        names = list(self.providers)
        if wanted is not None:
            if wanted not in self.providers:
                known = ", ".join(names) or "none"
                raise ValidationFailed(self.NAME, f"provider: unknown search backend {wanted!r} (available: {known})")
            return [wanted]
        preferred = self.config.search_provider
        if preferred in self.providers:
            names.remove(preferred)
            names.insert(0, preferred)
        return names

    async def call(self, args: SearchArgs) -> dict[str, Any]:
        if not self.providers:
            raise ExecutionFailed(
                self.NAME,
                "search not available: no backend configured "
                "(set [files] searxng_url or install a search provider plugin)",
            )
        errors: list[str] = []
        for name in self._order(args.provider):
            try:
                with anyio.fail_after(self.config.search_timeout_seconds):
                    hits = await self.providers[name](args.query, args.max_results)
                results = [
                    {"title": str(h["title"]), "url": str(h["url"]), "snippet": str(h.get("snippet", ""))}
                    for h in list(hits)[: args.max_results]
                ]
            except Exception as exc:  # one backend failing (or answering garbage) falls through to the next
                errors.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
                continue
            out: dict[str, Any] = {"query": args.query, "provider": name, "results": results}
            if errors:
                out["fallback_errors"] = errors
            return out
        raise ExecutionFailed(self.NAME, "every search backend failed: " + "; ".join(errors))
