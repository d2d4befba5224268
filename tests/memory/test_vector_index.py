"""The vector index's nearest rows: exactly a full sort's, whatever the scores' layout, ties and gaps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from aleph_memory._vectorindex import SAMPLE, VectorIndex, top_positions


def full_sort(values: Any, k: int) -> list[int]:
    """The reference: finite values by descending value, the lower position first among equals."""
    finite = [i for i, v in enumerate(values.tolist()) if np.isfinite(v)]
    return sorted(finite, key=lambda i: (-values[i], i))[:k]


def scores(n: int, seed: int, *, decimals: int | None = None) -> Any:
    values = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    return values if decimals is None else values.round(decimals)


@pytest.mark.parametrize("n", [1, 7, 150, 5_000, 4 * SAMPLE + 1, 100_000])
@pytest.mark.parametrize("k", [1, 30, 150])
def test_the_nearest_positions_are_a_full_sorts_at_every_size(n: int, k: int) -> None:
    values = scores(n, n + k)
    assert top_positions(np, values, k).tolist() == full_sort(values, k)


def test_ties_at_the_last_place_keep_the_lower_positions_whichever_way_a_partial_sort_left_them() -> None:
    values = scores(100_000, 1, decimals=2)  # about 500 values for each of a few hundred levels
    for k in (1, 37, 150, 600):
        assert top_positions(np, values, k).tolist() == full_sort(values, k)


def test_rows_outside_the_gate_and_broken_scores_are_never_among_the_nearest() -> None:
    values = scores(100_000, 2)
    rng = np.random.default_rng(3)
    values[rng.choice(100_000, 60_000, replace=False)] = -np.inf
    values[rng.choice(100_000, 50, replace=False)] = np.nan
    got = top_positions(np, values, 150).tolist()
    assert got == full_sort(values, 150)
    assert all(np.isfinite(values[got]))
    few = np.full(100_000, -np.inf, dtype=np.float32)
    few[[5, 70_000, 99_999]] = [0.5, 0.9, 0.5]
    assert top_positions(np, few, 150).tolist() == [70_000, 5, 99_999]  # fewer than k: every finite one


def test_a_sample_that_misjudges_where_the_high_scores_are_only_costs_time() -> None:
    n = 100_000
    sampled = np.arange(0, n, n // SAMPLE)
    # The sampled positions hold the only high scores: the sample's bound admits fewer than k, and the
    # exact k-th highest is taken instead.
    only_sampled = np.zeros(n, dtype=np.float32)
    only_sampled[sampled] = np.linspace(1.0, 2.0, len(sampled), dtype=np.float32)
    assert top_positions(np, only_sampled, 150).tolist() == full_sort(only_sampled, 150)
    # The high scores sit between the sampled positions: the bound admits every row, and is not used either.
    between = np.zeros(n, dtype=np.float32)
    unsampled = np.setdiff1d(np.arange(n), sampled)[:400]
    between[unsampled] = np.linspace(1.0, 2.0, len(unsampled), dtype=np.float32)
    assert top_positions(np, between, 150).tolist() == full_sort(between, 150)
    flat = np.ones(n, dtype=np.float32)  # every score equal: the first k positions
    assert top_positions(np, flat, 150).tolist() == list(range(150))


def index_of(vectors: Any, speakers: list[str | None]) -> VectorIndex:
    """An index over ``vectors`` (each row also its own context), rowids 1..n, through its refresh path."""
    index = VectorIndex("test", vectors.shape[1])
    rows = [(i + 1, vectors[i].tobytes(), speakers[i], 1) for i in range(len(vectors))]
    index.refresh(lambda after: rows if after < 1 else [], lambda after: [], lambda what: 1 if what == "rowid" else 0)
    return index


def test_the_index_takes_the_nearest_among_a_speakers_rows_and_masks_the_rest() -> None:
    rng = np.random.default_rng(4)
    n = 30_000
    vectors = rng.standard_normal((n, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    speakers: list[str | None] = [("Ann", "Bo", None)[i % 3] for i in range(n)]
    index = index_of(vectors, speakers)
    query = vectors[0]
    full = (vectors * 2) @ query  # own + context, each row its own context
    ids, sims = index.similarities(query)
    assert ids.tolist() == list(range(1, n + 1))
    assert np.allclose(sims, full, atol=1e-5)
    near = index.nearest(query, 150)
    assert near.rowids.tolist() == [i + 1 for i in full_sort(sims, 150)]
    assert near.sims.tolist() == sims[full_sort(sims, 150)].tolist()
    _, gated = index.similarities(query, "Bo")
    bo = np.array([s == "Bo" for s in speakers])
    assert np.all(np.isneginf(gated[~bo])) and np.array_equal(gated[bo], sims[bo])
    near = index.nearest(query, 150, "Bo")
    assert near.rowids.tolist() == [i + 1 for i in full_sort(gated, 150)]
    assert all(speakers[i - 1] == "Bo" for i in near.rowids.tolist())
    found, values = near.similarities(np.arange(1, 100))  # other rows: the speaker's only, exactly as scored
    assert found.tolist() == [i for i in range(1, 100) if speakers[i - 1] == "Bo"]
    assert values.tolist() == sims[found - 1].tolist()
    near = index.nearest(query, 150, "Cy")  # nobody of that name: every row
    assert near.rowids.tolist() == [i + 1 for i in full_sort(sims, 150)]
    assert index.nearest(query, 0).rowids.tolist() == []
