"""Released numbers on a public power-of-two grid: the defence against floating-point side
channels (docs/design.md §10.1).

A float ``fl(Fx + n)`` carries low-order bits whose attainable set depends on x (Mironov, CCS
2012: numpy's Laplace ``log(2U)`` with U on the 2⁻⁵³ grid names x with certainty). Every
mechanism here instead releases ``round_γ(a + n)``: the exact real sum of the two float64s
``a = fl(Fx)`` and ``n`` (the noise) rounded to the nearest point of ``γZ`` (ties to even),
computed exactly (:func:`snap_sum`, an error-free two-sum). The grid ``γ = 2^k`` is chosen from
the public noise scale s alone (:func:`grid_exponent`: ``2^k ≤ s·2⁻¹⁰ < 2^(k+1)``), so it never
depends on x; the rounding adds variance ``γ²/12 ≤ s²·2⁻²⁰/12`` per answer. A released value is
then a multiple of γ whose low-order bits are zero: which grid points x can produce no longer
depends on x (design §10.1 bounds the rest).

The grid's range is ``±2^(k+53)`` (``grid_range``): every multiple of γ there is a float64.
Nothing is clamped: a sum beyond the range is rounded to float64's own spacing there,
``2^(⌊log₂|v|⌋−52) ≥ 2γ`` (a coarser grid of powers of two, fixed and public, at a relative
``2⁻⁵³``): the released value is then the correctly rounded ``fl(a + n)``. A noise scale too
small for any grid ``2^10`` below it (``s < 2^(MIN_EXP+GRID_BITS)``) is refused by name.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray

GRID_BITS = 10  # γ = 2^k with 2^k <= s·2^-10: the grid 2^10–2^11 times finer than the noise scale s
RANGE_BITS = 53  # every multiple of γ within ±2^(k+53) is a float64; beyond, float64's spacing (>= 2γ)
MIN_EXP = -1000  # γ >= 2^-1000: far above the subnormals (2^-1022), so γ/2 and the residuals stay normal
ROUNDING = ("round-to-nearest-even of the exact sum fl(Fx) + noise onto the float64 multiples of grid: "
            "grid·Z within ±grid_range, float64's own spacing (2^-52 of the value, coarser than grid) beyond; "
            "nothing clamped")


def grid_exponent_of(numerator: float, denominator: float, epsilon: float | None = None) -> int:
    """The k of the grid ``γ = 2^k`` for the public noise scale ``s = numerator/denominator`` (positive
    finite floats), without forming the quotient (it may leave float64): ``2^k <= s·2^-GRID_BITS < 2^(k+1)``.

    A scale below ``2^(MIN_EXP+GRID_BITS)`` (≈ 1e-298) has no such grid above the subnormals: a
    one-line ValueError naming ``epsilon`` (the scale's source) instead of a grid coarser than the
    noise, which would round every answer to Fx plus a rounding error larger than the noise."""
    m1, e1 = np.frexp(float(numerator))
    m2, e2 = np.frexp(float(denominator))
    _, e3 = np.frexp(float(m1) / float(m2))  # in (0.5, 2)
    k = int(e1) - int(e2) + int(e3) - 1 - GRID_BITS
    what = "the noise scale" if epsilon is None else f"epsilon={float(epsilon):.3g} gives a noise scale that"
    if k < MIN_EXP:
        raise ValueError(f"{what} is below 2^{MIN_EXP + GRID_BITS} (about 1e-298): float64 answers cannot lie on "
                         f"a public grid 2^{GRID_BITS} times finer than such noise (docs/design.md §10.1); "
                         "use a smaller epsilon or a larger scale of F")
    if k + GRID_BITS > 1023:
        raise ValueError(f"{what} is beyond float64's range (2^1024): use a larger epsilon or a smaller scale of F")
    return k


def grid_exponent(scale: float, epsilon: float | None = None) -> int:
    """:func:`grid_exponent_of` of a scale ``s > 0`` that is a float64: ``2^k <= s·2^-GRID_BITS < 2^(k+1)``."""
    return grid_exponent_of(float(scale), 1.0, epsilon)


def grid_range(k: int) -> float:
    """``2^(k+RANGE_BITS)``: every multiple of ``2^k`` up to it in size is a float64 (the largest
    finite float64 where that passes float64's range)."""
    return float(np.ldexp(1.0, k + RANGE_BITS)) if k + RANGE_BITS <= 1023 else float(np.finfo(np.float64).max)


def grid_details(k: int) -> dict[str, Any]:
    """What a claim says of the grid: ``grid`` = γ = 2^k, ``grid_exponent`` = k, ``grid_range`` =
    2^(k+53) (γZ within it; float64's coarser spacing beyond), ``rounding``."""
    return {"grid": float(np.ldexp(1.0, k)), "grid_exponent": int(k), "grid_range": grid_range(k),
            "rounding": ROUNDING}


@njit(cache=True)
def _snap_kernel(a, n, k, out):  # pragma: no cover (compiled)
    """``out[i·p + j] = round_γ(a[j] + n[i·p + j])`` with p = len(a): the loop of :func:`snap_sum`."""
    g = math.ldexp(1.0, k)
    inv = math.ldexp(1.0, -k)
    half = math.ldexp(1.0, k - 1)
    coarse = math.ldexp(1.0, k + RANGE_BITS - 1) if k + RANGE_BITS - 1 <= 1023 else math.inf
    p = a.size
    for i in range(n.size // p):
        for j in range(p):
            x = a[j]
            y = n[i * p + j]
            s = x + y
            if not math.isfinite(s):  # an overflowed sum stays ±inf (or NaN): the caller refuses it
                out[i * p + j] = s
                continue
            if abs(s) >= coarse:  # ulp(s) >= γ: s, the correctly rounded real sum, is the nearest float64
                out[i * p + j] = s  # multiple of γ (every float64 here is one)
                continue
            bb = s - x
            e = (x - (s - bb)) + (y - bb)  # two-sum: x + y = s + e exactly
            q = np.rint(s * inv)  # s·2^-k and q·2^k: exact scalings by powers of two
            r = s - q * g  # exact: |s| < 2^(k+52), so ulp(s) <= γ/2, |q| <= 2^52 and |r| <= γ/2
            if e > half - r:
                q += 1.0
            elif -e > half + r:
                q -= 1.0
            out[i * p + j] = q * g + 0.0  # −0.0 → +0.0: the sign of a zero would tell the sign of the real value


def snap_sum(a: ArrayLike, n: ArrayLike, k: int) -> NDArray[np.float64]:
    """``round_γ(a + n)``, γ = 2^k: the exact real sum of the float64s a and n rounded to the
    nearest float64 multiple of γ (ties to even); ``+0.0`` for zero. Never clamped.

    Exact: ``s = fl(a + n)``. Where ``|s| >= 2^(k+52)``, ``ulp(s) >= γ``: every float64 there is a
    multiple of γ and s, the correctly rounded sum, is the answer. Below, Knuth's two-sum gives the
    error ``e`` (``a + n = s + e`` exactly); ``q = rint(s/γ)``, ``r = s − qγ`` are exact (``ulp(s) <= γ/2``,
    ``|q| <= 2^52``); then q moves by one where ``r + e`` passes ``±γ/2`` (compared exactly: ``γ/2 ∓ r``
    is exact wherever ``|e|`` could reach it). A non-finite sum stays non-finite (the callers refuse
    it). One compiled pass over the answers (a: one value or one per column).
    """
    a = np.asarray(a, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if a.ndim == 1 and a.size and n.ndim >= 1 and n.shape[-1] == a.size and a.flags.c_contiguous \
            and n.flags.c_contiguous:  # the release's case, Fx (d,) and noise (d,) or (m, d): no copies
        out = np.empty(n.shape)
        _snap_kernel(a, n.reshape(-1), int(k), out.reshape(-1))
        return out
    shape = np.broadcast_shapes(a.shape, n.shape)
    if a.ndim <= 1 and shape and (a.ndim == 0 or a.shape[0] == shape[-1]):
        period = np.ascontiguousarray(np.broadcast_to(a, shape[-1:]))  # a repeats along the rows
    else:
        period = np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1)
    flat = np.ascontiguousarray(np.broadcast_to(n, shape)).reshape(-1)
    out = np.empty(flat.size)
    if flat.size:
        _snap_kernel(period.reshape(-1) if period.size else np.zeros(1), flat, int(k), out)
    return out.reshape(shape)


def snap(v: ArrayLike, k: int) -> NDArray[np.float64]:
    """``round_γ(v)`` of float64 values (exact; :func:`snap_sum` with a zero addend)."""
    return snap_sum(v, 0.0, k)


def on_grid(v: ArrayLike, k: int) -> bool:
    """True when every value is a finite multiple of ``2^k`` (what a release satisfies)."""
    v = np.asarray(v, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        return False
    with np.errstate(over="ignore"):  # v·2^-k past float64: v >= 2^(1024+k), a multiple of 2^k anyway
        u = np.ldexp(v, -k)
    return bool(np.all(~np.isfinite(u) | (u == np.rint(u))))


def row_extent(F: NDArray[np.float64]) -> float:
    """The smallest ``max_j |F_ij|`` over F's non-zero rows: the extent of ``K = F·B₁ⁿ`` along
    its thinnest answer coordinate (a public noise scale is this over ε); 1.0 for F = 0."""
    m = np.maximum(F.max(axis=1), -F.min(axis=1)) if F.size else np.zeros(0)  # no |F| copy of F
    m = m[m > 0]
    return float(m.min()) if m.size else 1.0
