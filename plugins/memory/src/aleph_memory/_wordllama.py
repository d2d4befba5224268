"""The ``wordllama`` embedder: WordLlama's static token embeddings, shipped inside the PyPI package.

Nothing is downloaded: the weights and the tokenizer are read from the installed package (its own
loader looks for the tokenizer in a folder the wheel does not have and would fall back to a download).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aleph

__all__ = ["WordLlamaEmbedder"]


class WordLlamaEmbedder:
    """256-dimensional WordLlama (l2_supercat) sentence vectors; loads in ~0.2 s, no torch."""

    name = "wordllama"
    dim = 256

    def __init__(self) -> None:
        try:
            import wordllama
            from safetensors import safe_open
            from wordllama import WordLlama
            from wordllama.inference import WordLlamaInference
        except ImportError as exc:
            raise aleph.ExecutionFailed(
                "memory_search",
                f"embedder not available: wordllama is not installed ({exc.name});"
                " pip install 'aleph-memory[wordllama]'",
            ) from None
        base = Path(wordllama.__file__).parent
        weights = base / "weights" / "l2_supercat_256.safetensors"
        tokenizer = base / "tokenizers" / "l2_supercat_tokenizer_config.json"
        if not weights.is_file() or not tokenizer.is_file():
            raise aleph.ExecutionFailed(
                "memory_search", f"embedder not available: this wordllama has no bundled l2_supercat model in {base}"
            )
        with safe_open(str(weights), framework="np", device="cpu") as fh:
            matrix = fh.get_tensor("embedding.weight")
        self._model: Any = WordLlamaInference(matrix, WordLlama.load_tokenizer(tokenizer))

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors for ``texts``."""
        return self._model.embed(list(texts), norm=True)
