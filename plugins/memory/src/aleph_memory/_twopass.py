"""Two passes over the vectors: an int8 copy picks the rows that can be near, float32 scores them exactly.

The vector signal needs the ``k`` rows with the highest similarity ``query . x_i`` (``x_i`` a row's own plus context
vector) out of up to 100,000 rows of 384 floats. Reading 153.6 MB of float32 for every question is the memory bus's
work (about 6 ms here). With the native kernels (``_int8dot.c``, compiled by ``plugins/memory/hatch_build.py``):

1. each row is also kept as int8 with a scale (``x_i ~ s_i * c_i``, symmetric, per row), its quantisation error
   ``e_i = ||x_i - s_i c_i||`` and a norm bound ``r_i >= max(||x_i||, s_i ||c_i||)``, computed when the row is written;
2. the question is rounded to int16 (``query ~ t * g``, its rounding error ``||query - t g||``) and the kernel takes
   ``a_i = s_i t (g . c_i)`` for every row: an exact integer sum over a quarter of the bytes;
3. ``|query . x_i - a_i| <= ||query|| e_i + ||query - t g|| r_i`` (Cauchy-Schwarz, twice), plus the float rounding of
   both scores, a few ulps of ``||query|| r_i``: :func:`upper_bounds` adds them all to ``a_i``;
4. the rows with the highest ``a_i`` (a few more than ``k``) are scored exactly; the ``k``-th highest of those exact
   scores is a floor every answer reaches, so every row whose upper bound reaches that floor is scored exactly and
   the ``k`` highest of them are the answer. No row the bound leaves out can beat it: the result is the exact top
   ``k``, ties included, not an approximation.

The exact score is one formula everywhere (:func:`exact_scores`): float32 products ``query[k] * x_i[k]`` summed in
order ``k = 0 .. d-1`` into a float32 starting at 0. BLAS sums in blocks whose shape depends on how many rows are in
the product, so its floats differ in the last bit from one call to another; this sum does not. Without the native
module (no compiler at install, or ``ALEPH_NO_SPEEDUPS=1``) numpy's float32 product over every row replaces the int8
pass, bounded the same way, and the shortlist is scored with the same formula in numpy: the same rows and the same
floats, more slowly.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType
from typing import Any

from aleph_memory._vectorselect import top_positions

__all__ = [
    "QueryCode",
    "exact_scores",
    "native",
    "quantise",
    "row_norms",
    "select",
    "speedups_disabled",
    "upper_bounds",
    "vectors_check",
]

logger = logging.getLogger("aleph.memory")

FIRST_EXTRA = 0.5
"""The first shortlist holds ``k`` plus this share of ``k`` rows (at least 16 more) by their int8 score."""
RESCORE_ALL = 0.25
"""When more than this share of the rows (and more than 4,096) may still be among the nearest (scores so close
that the int8 bound cannot tell them apart), every row is scored exactly: the second pass would cost as much."""

EXACT_CHUNK = 4096
"""Rows scored at a time by numpy's exact sum (its running sums take a float per product)."""
_U = 2.0**-24
"""float32's unit roundoff."""


def speedups_disabled() -> bool:
    """True when ``ALEPH_NO_SPEEDUPS`` asks for the pure-Python path (any value but empty or ``0``)."""
    return os.environ.get("ALEPH_NO_SPEEDUPS", "") not in ("", "0")


def _load() -> ModuleType | None:
    if speedups_disabled():
        logger.debug("memory: ALEPH_NO_SPEEDUPS is set: the vector index scores every row with numpy")
        return None
    try:
        # By name: the compiled module imports nothing, and an import statement would read to
        # tests/meta/test_structure.py as an edge of the package's import graph.
        return importlib.import_module("aleph_memory._int8dot")
    except ImportError as exc:  # not built: no C compiler at install
        logger.debug("memory: native vector kernels not available (%s): every row is scored with numpy", exc)
        return None


native: ModuleType | None = _load()


def vectors_check() -> tuple[str, str]:
    """``aleph doctor``'s ``memory.vectors``: whether the nearest rows are found by the native two passes."""
    if native is not None:
        return "ok", f"native vector kernels loaded ({native.kernel()}): two passes over the vectors"
    why = "ALEPH_NO_SPEEDUPS is set" if speedups_disabled() else "not built at install (no C compiler)"
    return "warn", (
        f"native vector kernels not loaded ({why}): every row is scored with numpy, the same results more slowly "
        "(a hybrid search at 100,000 items took 24 ms against 16 here); reinstall aleph-memory where gcc is installed"
    )


def quantise(np: Any, rows: Any) -> tuple[Any, Any, Any, Any]:
    """(codes int8, scale, error, norm bound) of float32 ``rows`` (m x d), each row scaled by its largest value.

    The native kernel's (this is its wrapper; the numpy twin that tests it is in tests/memory). A row with a value
    that is not finite gets codes 0 and an infinite error and norm bound: its int8 score says nothing, so it is
    always scored exactly (and then never chosen, its exact score not being finite either).
    """
    if native is None:
        raise RuntimeError("quantise needs the native kernels (aleph_memory._int8dot)")
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    codes = np.empty(rows.shape, dtype=np.int8)
    scale, error, norm = (np.empty(len(rows), dtype=np.float32) for _ in range(3))
    native.quantise(rows, codes, scale, error, norm)
    return codes, scale, error, norm


def row_norms(np: Any, rows: Any) -> Any:
    """Each row's norm, rounded up (inf for a row that is not finite, or whose squares overflow float32).

    A float32 sum of d squares is within ``d u`` of the true one (relative), its root within half that: the
    factor ``1 + 2 (d + 2) u`` covers both and the final rounding.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        squares = np.einsum("ij,ij->i", rows, rows)
        out = np.sqrt(squares) * np.float32(1 + 2 * (rows.shape[1] + 2) * _U)
    out[~np.isfinite(out)] = np.inf
    return out.astype(np.float32, copy=False)


class QueryCode:
    """A question vector rounded to int16 for the int8 pass, with what the rounding may cost.

    ``usable`` is False for a vector that is zero or not finite: the caller scores every row exactly.
    """

    def __init__(self, np: Any, query: Any) -> None:
        q = query.astype(np.float64)
        d = len(q)
        self.query = np.ascontiguousarray(query, dtype=np.float32)
        self.norm = float(np.sqrt(q @ q)) * (1 + 1e-9) if d else 0.0
        # The int32 sum of d products of an int16 and an int8 must not overflow (the kernel checks it too).
        top = min(32767, (2**31 - 1) // (128 * max(d, 1)))
        peak = float(np.abs(q).max()) if d else 0.0
        self.usable = bool(d) and np.isfinite(peak) and peak > 0 and np.isfinite(self.norm)
        if not self.usable:
            return
        self.factor = float(np.float32(peak / top))
        codes = np.clip(np.rint(q / self.factor), -top, top)
        self.codes = codes.astype(np.int16)
        rest = q - self.factor * codes
        self.rest = float(np.sqrt(rest @ rest)) * (1 + 1e-9)


def upper_bounds(np: Any, scores: Any, code: QueryCode, error: Any, norm: Any, *, from_int8: bool) -> Any:
    """Each row's highest possible exact score, given ``scores`` (its int8 score, or numpy's float32 product).

    ``from_int8``: ``scores`` are the int8 pass's (quantisation error ``||query|| e_i + ||query - t g|| r_i``);
    else they are a float32 product's, whose only error is rounding. Both add the rounding of two float32 sums of
    ``d`` products (``(d + 16) u ||query|| r_i``, ``u = 2^-24``, with room for the bound's own arithmetic).
    """
    d = len(code.query)
    ulps = 2.5 * (d + 16) * _U * code.norm
    with np.errstate(invalid="ignore", over="ignore"):  # a broken row's bound is inf or NaN: always rescored
        out = np.multiply(norm, np.float32(ulps + (code.rest if from_int8 else 0.0)))
        if from_int8:
            out += error * np.float32(code.norm)
        out += scores
        out += np.float32(1e-37)  # rounding in the subnormal range is absolute
    return out


def exact_scores(np: Any, query: Any, rows: Any, positions: Any) -> Any:
    """The exact score of the rows at ``positions``: ``sum_k query[k] * rows[p][k]``, in order, in float32.

    ``rows``: the index's n x d float32 rows (any layout). The native kernel and the numpy loop below give the same
    bits: each product rounded to float32, then added to a running float32 sum that starts at 0.
    """
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    out = np.empty(len(positions), dtype=np.float32)
    if not len(positions):
        return out
    if native is not None and rows.flags.c_contiguous:
        native.exact(query, rows, positions, out)
        return out
    with np.errstate(invalid="ignore", over="ignore"):  # a broken row's score is NaN or inf, as in C
        for start in range(0, len(positions), EXACT_CHUNK):
            at = positions[start : start + EXACT_CHUNK]
            terms = rows[at] * query  # the products, m x d
            # A running sum is sequential by definition (each partial sum is an output), in the order k = 0 ..
            # d-1 the native kernel adds in; + 0.0 turns a sum of negative zeros into the kernel's +0.0.
            out[start : start + len(at)] = np.add.accumulate(terms, axis=1)[:, -1] + np.float32(0.0)
    return out


def select(np: Any, scores: Any, upper: Any, k: int, exact: Any) -> tuple[Any, Any]:
    """(positions, exact scores) of the ``k`` rows with the highest exact score, highest first.

    ``scores`` rank the rows roughly (-inf: outside the gate), ``upper`` bounds each row's exact score from above
    (NaN or inf: unknown, always scored), ``exact(positions)`` scores rows exactly. Fewer than ``k`` when fewer rows
    have a finite exact score; between equal scores the lower position first (``top_positions``' contract).
    """
    n = len(scores)
    first = top_positions(np, scores, k + max(16, int(k * FIRST_EXTRA)))
    values = exact(first)
    finite = values[np.isfinite(values)]
    if len(finite) >= k:
        floor = np.partition(finite, len(finite) - k)[len(finite) - k]
        # Every row that can reach the floor (NaN: no bound; -inf rows are outside the gate).
        rows = np.flatnonzero(~(upper < floor))
    else:  # fewer than k finite among the first: any row of the gate may be among the nearest
        rows = np.flatnonzero(~np.isneginf(scores))
    if len(rows) > max(4096, int(n * RESCORE_ALL)):
        rows = np.flatnonzero(~np.isneginf(scores))
    values = _known_or_exact(np, rows, first, values, exact)
    order = top_positions(np, values, k)  # rows ascend: equal scores keep the lower position first
    return rows[order], values[order]


def _known_or_exact(np: Any, rows: Any, scored: Any, values: Any, exact: Any) -> Any:
    """The exact scores of ``rows``: those of ``scored`` already known (``values``), the others computed."""
    order = np.argsort(scored)
    scored, values = scored[order], values[order]
    at = np.minimum(np.searchsorted(scored, rows), max(len(scored) - 1, 0))
    known = scored[at] == rows if len(scored) else np.zeros(len(rows), dtype=bool)
    out = np.empty(len(rows), dtype=np.float32)
    out[known] = values[at[known]]
    out[~known] = exact(rows[~known])
    return out
