"""Embedders and summarisers: the protocols, the registry filled by the family's hooks, the vector index."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import aleph

__all__ = [
    "Embedder",
    "EmbedderFactory",
    "Providers",
    "Summariser",
    "embed_normalised",
    "length_batches",
    "one_blas_thread",
]

MAX_EMBED_BATCH = 512


@runtime_checkable
class Embedder(Protocol):
    """A text embedder: ``embed`` maps texts to vectors of ``dim`` floats (normalised or not)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order. Called from a worker thread."""
        ...


EmbedderFactory = Callable[[], Embedder]
Summariser = Callable[[Sequence[str], str | None], Awaitable[str]]


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        raise aleph.ExecutionFailed(
            "memory_search", "vector index not available: numpy is not installed (pip install 'aleph-memory[vectors]')"
        ) from None
    return numpy


class Providers:
    """Embedders and summarisers registered through the family's hooks, and the configured choices."""

    def __init__(
        self, embedder: str | None, summariser: str | None, *, note: str | None = None, optional: bool = False
    ) -> None:
        self.embedder_name = embedder
        self.summariser_name = summariser
        self.note = note
        """Why search is lexical though no one asked it to be (the default embedder is missing or broken)."""
        self.optional = optional
        """The embedder is the default, not configured: if it will not load, search is lexical (with ``note``)."""
        self.embedders: dict[str, EmbedderFactory] = {}
        self.summarisers: dict[str, Summariser] = {}
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()

    def add_embedder(self, name: str, factory: EmbedderFactory) -> None:
        """The ``register`` of ``aleph_memory_embedders``."""
        if not isinstance(name, str) or not name or not callable(factory):
            raise ValueError("register(name, factory) needs a non-empty name and a callable factory")
        if name in self.embedders:
            raise ValueError(f"embedder {name!r} is registered twice")
        self.embedders[name] = factory

    def add_summariser(self, name: str, summarise: Summariser) -> None:
        """The ``register`` of ``aleph_memory_summarisers``."""
        if not isinstance(name, str) or not name or not callable(summarise):
            raise ValueError("register(name, summarise) needs a non-empty name and an async callable")
        if name in self.summarisers:
            raise ValueError(f"summariser {name!r} is registered twice")
        self.summarisers[name] = summarise

    def embedder(self) -> Embedder | None:
        """The configured embedder, loaded on first use; None for lexical search.

        None when none is configured, or when the default would not load (``note`` says why).
        """
        if self.embedder_name is None:
            return None
        with self._lock:
            if self._embedder is None and self.optional and self.note is not None:
                return None
            if self._embedder is None:
                factory = self.embedders.get(self.embedder_name)
                if factory is None:
                    known = ", ".join(sorted(self.embedders)) or "none"
                    raise aleph.ExecutionFailed(
                        "memory_search",
                        f"embedder not available: [memory] embedder = {self.embedder_name!r} is not registered"
                        f" (registered: {known}); install a package that provides it, or remove the setting",
                    )
                try:
                    embedder = factory()
                except aleph.ExecutionFailed as exc:
                    if not self.optional:
                        raise
                    self.note = f"{exc.cause}; search is lexical"
                    return None
                if not isinstance(embedder, Embedder) or not isinstance(embedder.dim, int) or embedder.dim < 1:
                    raise aleph.ExecutionFailed(
                        "memory_search", f"embedder {self.embedder_name!r} is broken: it has no positive dim"
                    )
                self._embedder = embedder
            return self._embedder

    def summariser(self, tool: str) -> Summariser:
        """The configured summariser (or the only one); raises "summariser not available" otherwise."""
        if self.summariser_name is not None:
            found = self.summarisers.get(self.summariser_name)
            if found is None:
                raise aleph.ExecutionFailed(
                    tool,
                    f"summariser not available: [memory] summariser = {self.summariser_name!r} is not registered"
                    f" (registered: {', '.join(sorted(self.summarisers)) or 'none'})",
                )
            return found
        if len(self.summarisers) == 1:
            return next(iter(self.summarisers.values()))
        if not self.summarisers:
            raise aleph.ExecutionFailed(
                tool,
                "summariser not available: no plugin implements aleph_memory_summarisers (install one that"
                " wraps your LLM); pass extractive=true for the stored text itself, clearly marked as not a summary",
            )
        raise aleph.ExecutionFailed(
            tool,
            f"summariser not available: several are registered ({', '.join(sorted(self.summarisers))});"
            " choose one with [memory] summariser",
        )


def embed_normalised(embedder: Embedder, texts: Sequence[str]) -> Any:
    """``texts`` embedded in batches as a float32 matrix with unit-length rows."""
    np = _numpy()
    parts = []
    for start in range(0, len(texts), MAX_EMBED_BATCH):
        chunk = list(texts[start : start + MAX_EMBED_BATCH])
        vectors = np.asarray(embedder.embed(chunk), dtype=np.float32)
        if vectors.shape != (len(chunk), embedder.dim):
            raise aleph.ExecutionFailed(
                "memory_search",
                f"embedder {embedder.name!r} returned shape {vectors.shape}, expected ({len(chunk)}, {embedder.dim})",
            )
        parts.append(vectors)
    matrix = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


_controller: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread inside (without threadpoolctl, BLAS keeps its own setting).

    The products here are small or memory-bound, and OpenBLAS's second thread spin-waits for work on the
    other core: a 100,000-row product took 23 ms with two threads on the busy 2-core machine, 6 ms with one.
    """
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            _controller = ThreadpoolController()
    if not _controller:
        yield
        return
    with _controller.limit(limits=1, user_api="blas"):
        yield


def length_batches(np: Any, encoded: Sequence[Any], size: int, mask_dtype: Any) -> Iterator[tuple[list[int], Any, Any]]:
    """Tokenised texts in batches of similar length (little padding): each batch's positions, ids and mask.

    ``encoded`` are ``tokenizers`` encodings; ids are int64, the mask (1 for a token, 0 for padding) is ``mask_dtype``.
    """
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        width = max(len(encoded[i].ids) for i in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=mask_dtype)
        for r, i in enumerate(rows):
            n = len(encoded[i].ids)
            ids[r, :n] = encoded[i].ids
            mask[r, :n] = 1
        yield rows, ids, mask
