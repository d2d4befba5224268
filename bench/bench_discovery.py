"""Tool discovery figures: tool_search latency at 1,000 and 10,000 tools, index rebuild, relevance, disclosure cut.

Run: python bench/bench_discovery.py
Targets (discovery issue): tool_search p50 <= 1 ms at 1,000 tools and <= 10 ms at 10,000; rebuild after a
change <= 200 ms at 10,000; recall@5 >= 0.90 on the labelled set; disclosure cut >= 50%.
Baseline measured in the same run: rank-bm25's BM25Okapi over the same terms (if installed).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _util import percentile

import aleph
from aleph._discovery import ProgressiveDisclosure, ToolIndex, document_text
from aleph._discovery._tokens import search_terms
from aleph._turn import TurnContext

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "core"))
from discovery_relevance import QUERIES, catalog_definitions

VERBS = "create list get update delete search send read write move copy sync export import archive restore".split()
NOUNS = (
    "issue pull_request comment repository branch commit file folder message channel user group invoice customer "
    "order payment ticket calendar_event contact note page database table row column dashboard report alert "
    "incident deployment pipeline build artifact secret webhook label milestone project task sprint document"
).split()
SERVERS = "github gitlab slack notion jira linear stripe salesforce zendesk datadog pagerduty figma asana".split()
WORDS = (
    "the a for with by from in of to and or using current selected given matching optional required id name "
    "title body status owner date range limit cursor page token filter sort order field value format"
).split()


@functools.cache
def synthetic_tools(n: int, seed: int = 7) -> list[aleph.LoopTool]:
    """``n`` MCP-style tools with realistic names, descriptions and 2-6 described parameters."""
    rng = random.Random(seed)
    tools = []
    seen: set[str] = set()
    while len(tools) < n:
        server, verb, noun = rng.choice(SERVERS), rng.choice(VERBS), rng.choice(NOUNS)
        name = f"{server}__{verb}_{noun}"
        if name in seen:
            name = f"{name}_{len(tools)}"
        seen.add(name)
        filler = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
        description = f"{verb.capitalize()} a {noun.replace('_', ' ')} in {server.capitalize()}. {filler}."
        props: dict[str, Any] = {}
        for _ in range(rng.randint(2, 6)):
            pname = f"{rng.choice(NOUNS)}_{rng.choice(['id', 'name', 'filter', 'limit', 'body', 'status'])}"
            pdesc = " ".join(rng.choice(WORDS + NOUNS) for _ in range(rng.randint(4, 12)))
            props[pname] = {"type": "string", "description": pdesc.capitalize() + "."}
        schema = {"type": "object", "properties": props, "required": list(props)[:1]}

        async def handler(data: dict[str, Any]) -> str:
            return "ok"

        tools.append(aleph.LoopTool(name, description, schema, handler, facts=aleph.ToolFacts()))
    return tools


def time_ms(fn: Any, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def rank_bm25_baseline(defs: list[aleph.ToolDefinition], queries: list[str]) -> float | None:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    bm25 = BM25Okapi([search_terms(document_text(d)) for d in defs])
    terms = [search_terms(q) for q in queries]
    samples = []
    for i in range(200):
        q = terms[i % len(terms)]
        start = time.perf_counter()
        scores = bm25.get_scores(q)
        sorted(range(len(scores)), key=lambda j: -scores[j])[:5]
        samples.append((time.perf_counter() - start) * 1000)
    return percentile(samples, 0.5)


async def through_the_chokepoint(n: int, queries: list[str]) -> tuple[float, float, float]:
    """p50/p99 of service.execute("tool_search") and the rebuild time after one registration, at ``n`` tools."""
    with tempfile.TemporaryDirectory() as data:
        (Path(data) / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{data}/d"\n[ledger]\nenabled = false\n')
        rt = aleph.load(Path(data) / "aleph.toml", entry_points=False)
        async with rt:
            for tool in synthetic_tools(n):
                rt.registry.register(tool, source=aleph.ToolSource.mcp(tool.name.split("__")[0]))
            service = rt.tool_service(turn=TurnContext(session_key="bench"))
            rt.discovery.index()
            samples = []
            for i in range(300):
                start = time.perf_counter()
                await service.execute("tool_search", {"query": queries[i % len(queries)]})
                samples.append((time.perf_counter() - start) * 1000)

            async def noop(data: dict[str, Any]) -> str:
                return "ok"

            rebuilds = []
            for i in range(5):
                rt.register(aleph.LoopTool(f"extra_tool_{i}", "One more tool.", {"type": "object"}, noop))
                start = time.perf_counter()
                rt.discovery.index()
                rebuilds.append((time.perf_counter() - start) * 1000)
        return percentile(samples, 0.5), percentile(samples, 0.99), min(rebuilds)


def main() -> None:
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (figures stretch with load)")
    rng = random.Random(3)
    # Half the queries name things the synthetic tools do, half are the labelled natural-language queries.
    queries = [
        f"{rng.choice(VERBS)} the {rng.choice(NOUNS).replace('_', ' ')} in {rng.choice(SERVERS)}" for _ in range(60)
    ] + [q for q, _ in QUERIES[:60]]
    print("tool_search latency (index built once per registry generation)")
    for n, target_ms in ((1_000, 1.0), (10_000, 10.0)):
        defs = [t.definition() for t in synthetic_tools(n)]
        build = min(time_ms(lambda defs=defs: ToolIndex(defs), 2))
        index = ToolIndex(defs)
        raw = []
        hits = 0
        for i in range(600):
            q = queries[i % len(queries)]
            start = time.perf_counter()
            hits += len(index.search(q, 5))
            raw.append((time.perf_counter() - start) * 1000)
        p50, p99, rebuild = asyncio.run(through_the_chokepoint(n, queries))
        base = rank_bm25_baseline(defs, queries)
        ratio = f"  rank-bm25 p50 {base:7.3f} ms ({base / percentile(raw, 0.5):5.1f}x slower)" if base else ""
        print(
            f"  {n:>6} tools: index.search p50 {percentile(raw, 0.5):6.3f} ms p99 {percentile(raw, 0.99):6.3f} ms"
            f" | execute('tool_search') p50 {p50:6.3f} ms p99 {p99:6.3f} ms (target p50 <= {target_ms} ms)"
            f" | {hits / 600:.1f} hits per query"
        )
        print(f"  {'':>6}        build {build:7.1f} ms, rebuild after a change {rebuild:7.1f} ms{ratio}")

    index = ToolIndex(catalog_definitions())
    r1 = sum([h.name for h in index.search(q, 1)] == [t] for q, t in QUERIES) / len(QUERIES)
    r5 = sum(t in [h.name for h in index.search(q, 5)] for q, t in QUERIES) / len(QUERIES)
    print(f"relevance on {len(QUERIES)} labelled queries over {len(catalog_definitions())} catalog tools:")
    print(f"  recall@1 {r1:.3f}  recall@5 {r5:.3f}  (target recall@5 >= 0.90)")

    print("progressive disclosure size (JSON characters of the function definitions sent to a model)")
    catalog = catalog_definitions()
    core = list(aleph._config.DEFAULT_CORE_TOOLS)
    for truncate in (False, True):
        rewrite = ProgressiveDisclosure(core, truncate_descriptions=truncate)
        full = sum(len(json.dumps(d.to_function())) for d in catalog)
        cut = sum(len(json.dumps(rewrite(d).to_function())) for d in catalog)
        schemas = sum(len(json.dumps(d.input_schema)) for d in catalog)
        cut_schemas = sum(len(json.dumps(rewrite(d).input_schema)) for d in catalog)
        print(
            f"  reference catalog, default core, truncate={truncate!s:5}: whole {full} -> {cut} chars "
            f"({1 - cut / full:.0%} cut); schemas {schemas} -> {cut_schemas} ({1 - cut_schemas / schemas:.0%} cut)"
        )
    installed = asyncio.run(_installed())
    if installed:
        for label, (full, cut) in installed.items():
            print(f"  installed tools, {label}: {full} -> {cut} chars ({1 - cut / full:.0%} cut)")
    synthetic = [t.definition() for t in synthetic_tools(1000)]
    rewrite = ProgressiveDisclosure(core)
    full = sum(len(json.dumps(d.to_function())) for d in synthetic)
    cut = sum(len(json.dumps(rewrite(d).to_function())) for d in synthetic)
    print(f"  1,000 synthetic MCP tools: {full} -> {cut} chars ({1 - cut / full:.0%} cut)")


async def _installed() -> dict[str, tuple[int, int]]:
    async with aleph.load() as rt:
        defs = [e.definition for e in rt.registry]
    if not defs:
        return {}
    out = {}
    for label, core in (("default core", list(aleph._config.DEFAULT_CORE_TOOLS)), ("core = [ask_user]", ["ask_user"])):
        rewrite = ProgressiveDisclosure(core)
        full = sum(len(json.dumps(d.to_function())) for d in defs)
        out[f"{label} ({len(defs)} tools)"] = (full, sum(len(json.dumps(rewrite(d).to_function())) for d in defs))
    return out


if __name__ == "__main__":
    main()
