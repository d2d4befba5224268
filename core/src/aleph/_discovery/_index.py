"""A BM25 index over tool definitions (reference R12.4, extended to parameter names and descriptions).

Every (term, tool) contribution of BM25 depends only on the corpus, so the index stores it
precomputed in one flat array grouped by term; a query adds up a few array slices. Searching is
then independent of the number of tools that do *not* share a term with the query.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aleph._discovery._tokens import search_terms
from aleph._types import ToolDefinition

__all__ = ["K1", "B", "SearchHit", "ToolIndex", "document_text"]

K1 = 1.5
B = 0.75
_MAX_SCHEMA_DEPTH = 6
_MAX_SCHEMA_TEXT = 20_000


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked tool: its name and BM25 score."""

    name: str
    score: float


def _schema_words(schema: Any, out: list[str], depth: int = 0) -> None:
    """Parameter names and descriptions of ``schema``, walking nested objects and array items (bounded)."""
    if depth > _MAX_SCHEMA_DEPTH or not isinstance(schema, Mapping):
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for key, sub in properties.items():
            out.append(str(key))
            if isinstance(sub, Mapping):
                description = sub.get("description")
                if isinstance(description, str):
                    out.append(description)
                _schema_words(sub, out, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _schema_words(items, out, depth + 1)


def document_text(definition: ToolDefinition) -> str:
    """The text a tool is found by: name (counted twice), description, parameter names and descriptions."""
    words: list[str] = []
    _schema_words(definition.input_schema, words)
    params = " ".join(words)[:_MAX_SCHEMA_TEXT]
    return f"{definition.name} {definition.name} {definition.description} {params}"


class ToolIndex:
    """BM25 (k1=1.5, b=0.75, idf = ln(1 + (N - n + 0.5)/(n + 0.5))) over a fixed set of tools.

    Build one per registry generation; it is immutable and safe to share between threads.
    """

    def __init__(self, definitions: Iterable[ToolDefinition]) -> None:
        defs = sorted(definitions, key=lambda d: d.name)
        self.names: tuple[str, ...] = tuple(d.name for d in defs)
        """Indexed tool names, sorted (a document's position is its rank among equal scores)."""
        term_ids: dict[str, int] = {}
        post_terms: list[int] = []
        post_docs: list[int] = []
        post_tf: list[int] = []
        lengths: list[int] = []
        for doc, definition in enumerate(defs):
            tokens = search_terms(document_text(definition))
            lengths.append(len(tokens))
            for term, count in Counter(tokens).items():
                tid = term_ids.setdefault(term, len(term_ids))
                post_terms.append(tid)
                post_docs.append(doc)
                post_tf.append(count)
        self._term_ids = term_ids
        n_docs = len(defs)
        terms = np.asarray(post_terms, dtype=np.int64)
        order = np.argsort(terms, kind="stable")
        docs = np.asarray(post_docs, dtype=np.int64)[order]
        tf = np.asarray(post_tf, dtype=np.float64)[order]
        df = np.bincount(terms, minlength=len(term_ids)).astype(np.float64)
        self._offsets = np.concatenate(([0], np.cumsum(df))).astype(np.int64)
        dl = np.asarray(lengths, dtype=np.float64)
        avgdl = float(dl.mean()) if n_docs else 0.0
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        norm = K1 * (1.0 - B + B * dl / max(avgdl, 1.0))
        term_of_posting = terms[order]
        self._docs = docs
        self._weights = idf[term_of_posting] * tf * (K1 + 1.0) / (tf + norm[docs]) if len(docs) else tf

    def __len__(self) -> int:
        return len(self.names)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every indexed tool for ``query`` (a repeated query token counts each time)."""
        scores = np.zeros(len(self.names), dtype=np.float64)
        for token in search_terms(query):
            tid = self._term_ids.get(token)
            if tid is None:
                continue
            start, end = self._offsets[tid], self._offsets[tid + 1]
            scores[self._docs[start:end]] += self._weights[start:end]
        return scores

    def search(self, query: str, limit: int, accept: Callable[[str], bool] | None = None) -> list[SearchHit]:
        """Up to ``limit`` tools with a positive score, by score descending then name ascending.

        ``accept`` filters names (a caller's visibility) before the limit is applied.
        """
        if limit <= 0 or not self.names:
            return []
        scores = self.scores(query)
        positive = np.flatnonzero(scores > 0)
        out: list[SearchHit] = []
        want = limit if accept is None else limit * 2
        while True:
            ranked = _top(positive, scores, want)
            out = []
            for doc in ranked:
                name = self.names[doc]
                if accept is None or accept(name):
                    out.append(SearchHit(name, float(scores[doc])))
                    if len(out) == limit:
                        return out
            if len(ranked) >= len(positive):
                return out
            want *= 4


def _top(candidates: np.ndarray, scores: np.ndarray, k: int) -> Sequence[int]:
    """The best ``k`` candidates (plus any tied with the k-th), score descending then position ascending."""
    if len(candidates) > k:
        values = scores[candidates]
        kth = np.partition(values, len(values) - k)[len(values) - k]
        candidates = candidates[values >= kth]
    values = scores[candidates]
    order = np.lexsort((candidates, -values))
    ranked: list[int] = candidates[order].tolist()
    return ranked
