"""The vector index's two passes: the int8 copy only ever saves time, the nearest rows are exactly a full sort's.

``VectorIndex.nearest`` scores every row through an int8 copy (native kernel), then scores exactly every row the
copy's error bound cannot rule out. Whatever the store (near ties, duplicate rows, zero rows, broken rows, one
speaker, more rows asked than held, rows and context vectors rewritten after the copy was made), the nearest rows
and their similarities must be those of the exact score over every row, sorted; with the native module and
without it (numpy's product in place of the int8 pass) they are the same bits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aleph_memory import _twopass, _vectorindex
from aleph_memory._twopass import QueryCode, exact_scores, quantise, speedups_disabled
from aleph_memory._vectorindex import VectorIndex

import aleph


def _native() -> Any:
    if _twopass.native is None:
        why = "ALEPH_NO_SPEEDUPS is set" if speedups_disabled() else "it was not built (no C compiler)"
        pytest.skip(f"the native vector kernels are not loaded: {why}")
    return _twopass.native


def test_native_kernels_are_loaded_in_ci() -> None:
    """CI builds the kernels (gcc comes from scripts/setup-system): tox -e memory tests them."""
    if os.environ.get("CI", "").strip().lower() not in ("true", "1", "yes") or speedups_disabled():
        pytest.skip("only checked under CI=true")
    assert _twopass.native is not None, "aleph_memory._int8dot was not built or does not import"


def test_the_doctor_says_whether_the_native_kernels_serve_the_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    import aleph_memory.plugin

    found: dict[str, tuple[str, str]] = {}
    config = aleph.AlephConfig()
    aleph_memory.plugin.aleph_doctor_checks(register=lambda name, check: found.update({name: check()}), config=config)
    if _twopass.native is not None:
        assert found["memory.vectors"] == (
            "ok",
            f"native vector kernels loaded ({_twopass.native.kernel()}): two passes over the vectors",
        )
    monkeypatch.setattr(_twopass, "native", None)
    status, message = _twopass.vectors_check()
    assert status == "warn" and "every row is scored with numpy, the same results more slowly" in message
    monkeypatch.setenv("ALEPH_NO_SPEEDUPS", "1")
    assert "(ALEPH_NO_SPEEDUPS is set)" in _twopass.vectors_check()[1]


@pytest.fixture(params=["native", "numpy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each index test runs with the native kernels and without them (as ALEPH_NO_SPEEDUPS=1 would)."""
    if request.param == "native":
        _native()
    else:
        monkeypatch.setattr(_twopass, "native", None)
        monkeypatch.setattr(_vectorindex, "native", None)
    yield request.param


# ---- the kernels against numpy ------------------------------------------------------------------------------


def _kernels(native: Any) -> list[str]:
    names = ["portable"]
    try:
        previous = native.use_kernel("avx2")
    except ValueError:  # no AVX2 on this CPU (or not x86)
        return names
    native.use_kernel(previous)
    return [*names, "avx2"]


def _unaligned(array: Any, offset: int) -> Any:
    """A copy of ``array`` starting ``offset`` bytes into a fresh buffer (the kernel's loads are unaligned)."""
    raw = bytearray(array.nbytes + offset + 64)
    out = np.frombuffer(raw, dtype=array.dtype, count=array.size, offset=offset).reshape(array.shape)
    out[...] = array
    return out


def test_the_int8_kernel_is_numpys_integer_product_for_every_length_and_alignment() -> None:
    native = _native()
    rng = np.random.default_rng(1)
    before = native.kernel()
    try:
        for kernel in _kernels(native):
            native.use_kernel(kernel)
            for d in [*range(1, 70), 127, 128, 129, 383, 384, 385]:
                top = min(32767, (2**31 - 1) // (128 * d))
                for n in (1, 2, 3, 7):
                    rows = rng.integers(-127, 128, (n, d)).astype(np.int8)
                    rows[0, :] = 127 if d % 2 else -127  # the extremes, where an int16 sum would overflow
                    query = rng.integers(-top, top + 1, d).astype(np.int16)
                    query[: d // 2] = top
                    scales = rng.random(n).astype(np.float32)
                    factor = float(np.float32(rng.random()))
                    dots = rows.astype(np.int64) @ query.astype(np.int64)
                    want = scales * (np.float32(factor) * dots.astype(np.float32))
                    for offset in (0, 1, 3, 16, 31):
                        out = np.empty(n, dtype=np.float32)
                        native.approx(
                            _unaligned(query, 2 * (offset % 3)), _unaligned(rows, offset), scales, factor, out
                        )
                        assert out.tobytes() == want.tobytes(), (kernel, d, n, offset)
    finally:
        native.use_kernel(before)


def test_the_kernels_refuse_buffers_that_do_not_fit() -> None:
    native = _native()
    rows = np.zeros((4, 8), dtype=np.int8)
    out = np.empty(4, dtype=np.float32)
    with pytest.raises(ValueError, match="row bytes"):
        native.approx(np.zeros(8, np.int16), rows[:3], np.ones(4, np.float32), 1.0, out)
    with pytest.raises(ValueError, match="overflow"):  # 600,000 products of 32767 x 127 exceed an int32
        native.approx(
            np.full(600_000, 32767, np.int16), np.zeros(600_000, np.int8), np.ones(1, np.float32), 1.0, out[:1]
        )
    with pytest.raises(TypeError, match="items of 2 bytes"):
        native.approx(np.zeros(8, np.int32), rows, np.ones(4, np.float32), 1.0, out)
    with pytest.raises(ValueError, match="not aligned"):
        native.approx(_unaligned(np.zeros(8, np.int16), 1), rows, np.ones(4, np.float32), 1.0, out)
    floats = np.zeros((4, 8), dtype=np.float32)
    with pytest.raises(IndexError, match="position 4 outside the 4 rows"):
        native.exact(np.zeros(8, np.float32), floats, np.array([0, 4]), np.empty(2, np.float32))
    with pytest.raises(IndexError, match="position -1"):
        native.exact(np.zeros(8, np.float32), floats, np.array([-1]), np.empty(1, np.float32))
    with pytest.raises(ValueError, match="out floats"):
        native.exact(np.zeros(8, np.float32), floats, np.array([0, 1]), np.empty(1, np.float32))


def test_the_exact_score_is_the_same_bits_native_or_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    _native()
    rng = np.random.default_rng(2)
    for d in (1, 2, 5, 31, 384):
        rows = (rng.standard_normal((500, d)) * rng.choice([1e-3, 1.0, 30.0], (500, 1))).astype(np.float32)
        query = rng.standard_normal(d).astype(np.float32)
        for m in (0, 1, 2, 3, 4, 5, 9, 150, 500):
            positions = rng.choice(500, m)
            native_scores = exact_scores(np, query, rows, positions)
            with monkeypatch.context() as patch:
                patch.setattr(_twopass, "native", None)
                numpy_scores = exact_scores(np, query, rows, positions)
            assert native_scores.tobytes() == numpy_scores.tobytes(), (d, m)
            # One row's score does not depend on which other rows were asked for with it (BLAS's would).
            single = [exact_scores(np, query, rows, [p])[0] for p in positions[:5]]
            assert np.array_equal(single, native_scores[:5])


def numpy_quantise(rows: Any) -> tuple[Any, Any, Any, Any]:
    """The int8 copy as _int8dot.c defines it, in numpy: float32 scale and codes, float64 bounds."""
    x = rows.astype(np.float32)
    finite = np.isfinite(x).all(axis=1)
    x = np.where(finite[:, None], x, np.float32(0))
    scale = np.abs(x).max(axis=1) / np.float32(127)
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = np.where(scale[:, None] > 0, np.clip(np.rint(x / scale[:, None]), -127, 127), np.float32(0))
    rest = x.astype(np.float64) - scale.astype(np.float64)[:, None] * codes
    error = np.sqrt((rest**2).sum(axis=1))
    coded = scale.astype(np.float64) * np.sqrt((codes.astype(np.float64) ** 2).sum(axis=1))
    norm = np.maximum(np.sqrt((x.astype(np.float64) ** 2).sum(axis=1)), coded)
    return codes.astype(np.int8), scale, np.where(finite, error, np.inf), np.where(finite, norm, np.inf)


def test_the_int8_copy_is_numpys_and_its_bounds_are_never_below_the_true_ones() -> None:
    _native()
    rng = np.random.default_rng(4)
    for d in (1, 2, 7, 16, 33, 384):
        rows = (rng.standard_normal((300, d)) * rng.choice([1e-41, 1e-30, 1e-3, 1.0, 1e30], (300, 1))).astype(
            np.float32
        )
        rows[0] = 0.0
        rows[1, 0] = np.nan
        rows[2, -1] = -np.inf
        rows[3] = np.float32(0.5) * np.float32(127 / 127)  # every value at the scale: codes of 127
        codes, scale, error, norm = quantise(np, rows)
        want_codes, want_scale, want_error, want_norm = numpy_quantise(rows)
        assert np.array_equal(codes, want_codes) and scale.tobytes() == want_scale.tobytes()
        assert np.all(error >= want_error) and np.all(norm >= want_norm)  # rounded up: still bounds
        finite = np.isfinite(want_error)
        # Within a float32 step of the true ones (subnormal steps are 1.4e-45 apart).
        assert np.allclose(error[finite], want_error[finite], rtol=1e-6, atol=3e-45)
        assert np.allclose(norm[finite], want_norm[finite], rtol=1e-6, atol=3e-45)
        assert finite.tolist()[:4] == [True, False, False, True] and codes[3].tolist() == [127] * d


def test_the_int8_bound_holds_for_every_row() -> None:
    native = _native()
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((5000, 384)).astype(np.float32)
    rows[:100] *= 1e-30  # near the float32 range's small end
    rows[100:200] = 0.0
    rows[200:300] = rng.choice([-1.0, 1.0], (100, 384)).astype(np.float32)  # every value at the scale
    codes, scale, error, bound = quantise(np, rows)
    for seed in range(20):
        query = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        code = QueryCode(np, query)
        approx = np.empty(len(rows), dtype=np.float32)
        native.approx(code.codes, codes, scale, code.factor, approx)
        upper = _twopass.upper_bounds(np, approx, code, error, bound, from_int8=True)
        exact = exact_scores(np, query, rows, np.arange(len(rows)))
        assert np.all(exact <= upper)
        # and from below: the same bound around the int8 score
        assert np.all(exact >= approx - (upper - approx))


# ---- the index against a full sort --------------------------------------------------------------------------


class Store:
    """Own and context vectors with stamps, read by ``VectorIndex.refresh`` as the SQLite tables would be."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.own: dict[int, tuple[Any, str | None, int]] = {}
        self.context: dict[int, tuple[Any, int]] = {}
        self.kept: dict[int, Any] = {}
        self.stamp = 0

    def put(self, rowid: int, vector: Any, speaker: str | None = None) -> None:
        if rowid in self.own and rowid not in self.context:
            self.kept[rowid] = self.own[rowid][0]  # the index keeps a row's context: here its first own vector
        self.stamp += 1
        self.own[rowid] = (np.asarray(vector, dtype=np.float32), speaker, self.stamp)

    def put_context(self, rowid: int, vector: Any) -> None:
        self.stamp += 1
        self.context[rowid] = (np.asarray(vector, dtype=np.float32), self.stamp)

    def refresh(self, index: VectorIndex) -> None:
        own = self.own
        context = self.context
        index.refresh(
            lambda after: [(r, v.tobytes(), s, t) for r, (v, s, t) in own.items() if t > after],
            lambda after: [(r, v.tobytes(), t) for r, (v, t) in context.items() if t > after],
            lambda what: max((t for *_, t in (own if what == "rowid" else context).values()), default=-1),
        )


def brute(index: VectorIndex, query: Any, k: int, speaker: str | None = None) -> tuple[list[int], Any]:
    """The reference: every row's exact score (numpy's loop), sorted, the lower rowid first among equals."""
    combined = np.ascontiguousarray(index.combined)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_twopass, "native", None)
        scores = exact_scores(np, np.asarray(query, dtype=np.float32), combined, np.arange(len(combined)))
    ids = index.rowids
    speakers = index.speakers
    allowed = np.ones(len(ids), dtype=bool)
    if speaker is not None and (speakers == speaker).any():
        allowed = speakers == speaker
    order = [i for i in np.lexsort((ids, -scores)) if allowed[i] and np.isfinite(scores[i])][:k]
    return ids[order].tolist(), scores[order]


def check(index: VectorIndex, query: Any, k: int, speaker: str | None = None) -> None:
    near = index.nearest(query, k, speaker)
    rowids, sims = brute(index, query, k, speaker)
    assert near.rowids.tolist() == rowids
    assert near.sims.tobytes() == np.asarray(sims, dtype=np.float32).tobytes()
    # The candidates' similarities are the same exact scores, gated alike.
    asked = np.concatenate([index.rowids[::7], [10**9]])
    found, values = near.similarities(asked)
    everyone = dict(zip(*brute(index, query, len(index.rowids), speaker), strict=True))
    assert found.tolist() == [r for r in asked.tolist() if r in everyone]
    assert values.tolist() == [everyone[r] for r in found.tolist()]


def unit(rng: np.random.Generator, n: int, d: int) -> Any:
    rows = rng.standard_normal((n, d)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("n", [1, 5, 150, 1000, 9000])
def test_random_stores_give_a_full_sorts_nearest_rows(path: str, n: int) -> None:
    rng = np.random.default_rng(n)
    store = Store(48)
    for rowid, vector in enumerate(unit(rng, n, 48), start=1):
        store.put(rowid, vector, ("Ann", "Bo", None)[rowid % 3])
    for rowid in range(1, n + 1, 2):
        store.put_context(rowid, unit(rng, 1, 48)[0])
    index = VectorIndex("t", 48)
    store.refresh(index)
    for query in unit(rng, 3, 48):
        for k in (1, 30, 150, n + 10):
            check(index, query, k)
        check(index, query, 40, "Bo")
        check(index, query, 40, "Nobody")


def test_near_ties_duplicates_and_zero_rows_keep_a_full_sorts_order(path: str) -> None:
    rng = np.random.default_rng(5)
    d = 384
    base = unit(rng, 1, d)[0]
    store = Store(d)
    rowid = 0
    for _ in range(600):  # within a few ulps of each other: the int8 bound cannot tell them apart
        rowid += 1
        store.put(rowid, base + rng.standard_normal(d).astype(np.float32) * 1e-7)
    for _ in range(300):  # exact duplicates: equal scores, the lower rowid first
        rowid += 1
        store.put(rowid, base)
    for _ in range(50):
        rowid += 1
        store.put(rowid, np.zeros(d))
    for vector in unit(rng, 3000, d):
        rowid += 1
        store.put(rowid, vector)
    index = VectorIndex("t", d)
    store.refresh(index)
    for query in (base, unit(rng, 1, d)[0], -base):
        for k in (1, 150, 700, 1000):
            check(index, query, k)


def test_a_store_the_bound_cannot_split_is_scored_whole(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(10)
    base = unit(rng, 1, 32)[0]
    store = Store(32)
    for rowid in range(1, 12_001):  # every row within the int8 bound of every other: all may be the nearest
        store.put(rowid, base + rng.standard_normal(32).astype(np.float32) * 1e-6, ("Ann", "Bo")[rowid % 2])
    index = VectorIndex("t", 32)
    store.refresh(index)
    scored: list[int] = []
    exact = _twopass.exact_scores
    monkeypatch.setattr(_vectorindex, "exact_scores", lambda *a: scored.append(len(a[3])) or exact(*a))
    check(index, base, 150)
    check(index, base, 150, "Bo")
    assert max(scored) >= 6_000  # the second pass took every row of the gate


def test_broken_rows_and_a_zero_question_are_scored_exactly(path: str) -> None:
    rng = np.random.default_rng(6)
    store = Store(32)
    for rowid, vector in enumerate(unit(rng, 2000, 32), start=1):
        store.put(rowid, vector)
    store.put(2001, np.full(32, np.nan))
    store.put(2002, np.full(32, np.inf))
    store.put(2003, np.full(32, 1e37))  # finite, but its score overflows float32
    store.put(2004, np.full(32, 1e-44))  # subnormal
    index = VectorIndex("t", 32)
    store.refresh(index)
    query = unit(rng, 1, 32)[0]
    check(index, query, 150)
    assert not {2001, 2002} & set(index.nearest(query, 3000).rowids.tolist())
    zero = np.zeros(32, dtype=np.float32)
    near = index.nearest(zero, 10)
    assert near.rowids.tolist() == brute(index, zero, 10)[0] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


def test_one_speaker_and_fewer_rows_than_asked(path: str) -> None:
    rng = np.random.default_rng(7)
    store = Store(16)
    for rowid, vector in enumerate(unit(rng, 300, 16), start=1):
        store.put(rowid, vector, "Ann" if rowid in (5, 77, 250) else "Bo")
    index = VectorIndex("t", 16)
    store.refresh(index)
    query = unit(rng, 1, 16)[0]
    check(index, query, 150, "Ann")  # three rows in the gate
    near = index.nearest(query, 150, "Ann")
    assert sorted(near.rowids.tolist()) == [5, 77, 250]
    assert set(near.similarities(index.rowids)[0].tolist()) == {5, 77, 250}
    empty = VectorIndex("t", 16)
    assert empty.nearest(query, 5).rowids.tolist() == []
    by_speaker = index.nearest_by_speaker(query, ["Ann", "Bo", "Nobody"], 20)
    assert by_speaker[0].rowids.tolist() == brute(index, query, 20, "Ann")[0]
    assert by_speaker[1].rowids.tolist() == brute(index, query, 20, "Bo")[0]
    assert by_speaker[2].rowids.tolist() == [] and by_speaker[2].similarities(index.rowids)[0].tolist() == []


def test_rows_written_after_the_copy_was_made_are_scored_on_their_new_vectors(path: str) -> None:
    rng = np.random.default_rng(8)
    d = 64
    store = Store(d)
    for rowid in range(100, 3100, 2):  # even rowids first
        store.put(rowid, unit(rng, 1, d)[0], "Ann")
    index = VectorIndex("t", d)
    store.refresh(index)
    query = unit(rng, 1, d)[0]
    check(index, query, 150)
    # Older rowids arrive later (the worker's scan), own vectors are replaced, context vectors rewritten:
    # the best possible rows among them must be found on their new vectors.
    for rowid in range(101, 3101, 2):
        store.put(rowid, unit(rng, 1, d)[0], "Bo")
    for rowid in range(100, 400, 2):
        store.put(rowid, -query)  # were anything, are now the farthest
    for rowid in range(1000, 1300, 2):
        store.put_context(rowid, query)  # now among the nearest through their context
    store.put(1, query, "Cy")  # a new first rowid, the nearest of all
    store.refresh(index)
    check(index, query, 150)
    check(index, query, 150, "Ann")
    assert index.nearest(query, 1).rowids.tolist() == [1]
    assert np.array_equal(index.rowids, np.sort(index.rowids))
    # Every row's int8 copy is its float32 row's, whichever write touched it last.
    if path == "native":
        n = len(index.rowids)
        codes, scale, error, bound = quantise(np, np.ascontiguousarray(index.combined))
        assert np.array_equal(index._q8[:n], codes) and np.array_equal(index._scale[:n], scale)
        assert np.array_equal(index._err[:n], error) and np.array_equal(index._bound[:n], bound)
    own = {r: v for r, (v, _, _) in store.own.items()}
    for at, rowid in enumerate(index.rowids.tolist()):
        context = store.context[rowid][0] if rowid in store.context else store.kept.get(rowid, own[rowid])
        assert np.allclose(index.combined[at], own[rowid] + context, atol=1e-6)


def nearest_bits() -> list[list[Any]]:
    """The nearest rows of five questions over a seeded 20,000-row store, with their similarities' exact bits."""
    rng = np.random.default_rng(9)
    store = Store(384)
    for rowid, vector in enumerate(unit(rng, 20000, 384), start=1):
        store.put(rowid, vector, ("Ann", "Bo")[rowid % 2])
    index = VectorIndex("t", 384)
    store.refresh(index)
    out = []
    for query in unit(rng, 5, 384):
        near = index.nearest(query, 150, "Bo")
        out.append([near.rowids.tolist(), near.sims.tobytes().hex()])
    return out


CHILD = """
import json, sys
from aleph_memory import _twopass
sys.path.insert(0, sys.argv[1])
from test_vector_twopass import nearest_bits
assert _twopass.native is None, "ALEPH_NO_SPEEDUPS=1 must keep the native kernels out"
print(json.dumps(nearest_bits()))
"""


def test_without_the_native_module_the_nearest_rows_and_scores_are_the_same_bits(tmp_path: Path) -> None:
    _native()
    env = {**os.environ, "ALEPH_NO_SPEEDUPS": "1"}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == nearest_bits()
