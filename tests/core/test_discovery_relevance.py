"""tool_search relevance on the reference's full builtin catalog: recall@5 over a labelled query set."""

from __future__ import annotations

import sys
from pathlib import Path

from aleph._discovery import ToolIndex

sys.path.insert(0, str(Path(__file__).parent))
from discovery_relevance import QUERIES, catalog_definitions


def recall(k: int) -> float:
    index = ToolIndex(catalog_definitions())
    hits = sum(expected in [h.name for h in index.search(query, k)] for query, expected in QUERIES)
    return hits / len(QUERIES)


def test_the_labelled_set_is_large_and_names_real_catalog_tools() -> None:
    names = {d.name for d in catalog_definitions()}
    assert len(QUERIES) >= 60
    assert len(names) >= 180
    assert {expected for _, expected in QUERIES} <= names
    assert len({q for q, _ in QUERIES}) == len(QUERIES)


def test_recall_at_5_is_at_least_90_percent() -> None:
    assert recall(5) >= 0.90


def test_search_is_deterministic() -> None:
    index = ToolIndex(catalog_definitions())
    again = ToolIndex(list(reversed(catalog_definitions())))
    for query, _ in QUERIES:
        assert index.search(query, 5) == again.search(query, 5)
