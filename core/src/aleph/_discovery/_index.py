"""A BM25 index over tool definitions (reference R12.4, extended to parameter names and descriptions).

Every (term, tool) contribution of BM25 depends only on the corpus, so the index stores it
precomputed in one flat array grouped by term; a query adds up a few array slices. Searching is
then independent of the number of tools that do *not* share a term with the query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:

    class _Numpy:
        """numpy, imported when the first index is built: a process that never searches never pays for it."""

        def __getattr__(self, name: str) -> Any:
            import numpy

            globals()["np"] = numpy
            return getattr(numpy, name)

    np = _Numpy()

from aleph._contract._types import ToolDefinition
from aleph._discovery._tokens import search_terms, term_counts

__all__ = ["K1", "B", "SearchHit", "TermCache", "ToolIndex", "document_text"]

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


class TermCache:
    """Per-definition term vectors kept across index builds, so a rebuild re-tokenises only what changed.

    Definitions are immutable and the registry keeps the same objects across generations, so a
    definition's terms are computed once. Term ids come from one vocabulary that only grows; the cache
    is reset when it holds far more entries than the registry (tools removed in bulk).
    """

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self._docs: dict[int, tuple[ToolDefinition, np.ndarray, np.ndarray, int]] = {}

    def vectors(self, definition: ToolDefinition) -> tuple[np.ndarray, np.ndarray, int]:
        """(term ids, term frequencies, document length) of ``definition``."""
        hit = self._docs.get(id(definition))
        if hit is not None and hit[0] is definition:
            return hit[1], hit[2], hit[3]
        counts, length = term_counts(document_text(definition))
        vocabulary = self.vocabulary
        ids = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in counts), np.int64, len(counts))
        tfs = np.fromiter(counts.values(), np.float64, len(counts))
        self._docs[id(definition)] = (definition, ids, tfs, length)
        return ids, tfs, length

    def trim(self, live: int) -> None:
        """Forget everything once the cache holds more than four times ``live`` definitions."""
        if len(self._docs) > 4 * max(live, 1_000):
            # New objects, not clear(): an index built earlier may still be answering queries.
            self._docs = {}
            self.vocabulary = {}


class ToolIndex:
    """BM25 (k1=1.5, b=0.75, idf = ln(1 + (N - n + 0.5)/(n + 0.5))) over a fixed set of tools.

    Terms are :func:`search_terms` (the R12.3 tokens minus English stop words, lightly stemmed).
    Build one per registry generation (pass the same :class:`TermCache` each time); an index is
    immutable and safe to share between threads.
    """

    def __init__(self, definitions: Iterable[ToolDefinition], cache: TermCache | None = None) -> None:
        defs = sorted(definitions, key=lambda d: d.name)
        cache = cache if cache is not None else TermCache()
        cache.trim(len(defs))
        self.names: tuple[str, ...] = tuple(d.name for d in defs)
        """Indexed tool names, sorted (a document's position is its rank among equal scores)."""
        vectors = [cache.vectors(d) for d in defs]
        self._term_ids = cache.vocabulary
        n_docs = len(defs)
        n_terms = len(self._term_ids)
        if vectors:
            terms = np.concatenate([v[0] for v in vectors])
            tf_all = np.concatenate([v[1] for v in vectors])
            sizes = np.fromiter((len(v[0]) for v in vectors), np.int64, n_docs)
            doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), sizes)
            dl = np.fromiter((v[2] for v in vectors), np.float64, n_docs)
        else:
            terms = doc_of = np.zeros(0, np.int64)
            tf_all = dl = np.zeros(0, np.float64)
        order = np.argsort(terms)  # order inside one term's postings does not matter: each doc occurs once
        docs = doc_of[order]
        tf = tf_all[order]
        df = np.bincount(terms, minlength=n_terms).astype(np.float64)
        self._offsets = np.concatenate(([0], np.cumsum(df))).astype(np.int64)
        avgdl = float(dl.mean()) if n_docs else 0.0
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        norm = K1 * (1.0 - B + B * dl / max(avgdl, 1.0))
        self._docs = docs
        self._weights = idf[terms[order]] * tf * (K1 + 1.0) / (tf + norm[docs])

    def __len__(self) -> int:
        return len(self.names)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every indexed tool for ``query`` (a repeated query token counts each time)."""
        scores = np.zeros(len(self.names), dtype=np.float64)
        for token in search_terms(query):
            tid = self._term_ids.get(token)
            if tid is None or tid + 1 >= len(self._offsets):
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
