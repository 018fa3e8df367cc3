"""Released numbers on a public power-of-two grid: the defence against floating-point side
channels (docs/design.md §10.1).

A float ``fl(Fx + n)`` carries low-order bits whose attainable set depends on x (Mironov, CCS
2012: numpy's Laplace ``log(2U)`` with U on the 2⁻⁵³ grid names x with certainty). Every
mechanism here instead releases ``round_γ(a + n)``: the exact real sum of the two float64s
``a = fl(Fx)`` and ``n`` (the noise) rounded to the nearest point of ``γZ`` (ties to even),
computed exactly (:func:`snap_sum`, an error-free two-sum), then clamped to ``±2^50·γ`` (at
most ``2^1023``). The grid ``γ = 2^k`` is chosen from the public noise scale s alone
(:func:`grid_exponent`: ``2^k ≤ s·2⁻¹⁰ < 2^(k+1)``), so it never depends on x; the rounding
adds variance ``γ²/12 ≤ s²·2⁻²⁰/12`` per answer. A released value is then a multiple of γ whose low-order bits are
zero: which grid points x can produce no longer depends on x (design §10.1 bounds the rest).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray

GRID_BITS = 10  # γ = 2^k with 2^k <= s·2^-10: the grid 2^10–2^11 times finer than the noise scale s
CLAMP_BITS = 50  # released values clamped to ±2^50·γ: every sum and residual below is exact there
MIN_EXP = -1000  # γ >= 2^-1000: far above the subnormals (2^-1022), so γ/2 and the residuals stay normal


def grid_exponent(scale: float) -> int:
    """The k of the grid ``γ = 2^k`` for a public noise scale ``s > 0``: ``2^k <= s·2^-GRID_BITS < 2^(k+1)``
    (at least ``2^-1000``)."""
    _, e = np.frexp(float(scale))  # scale = m·2^e, m in [0.5, 1): ⌊log2 s⌋ = e − 1
    return max(int(e) - 1 - GRID_BITS, MIN_EXP)


def clamp_exponent(k: int) -> int:
    """The exponent of the clamp ``B = 2^(k+CLAMP_BITS)``, at most 1023 (B stays a finite float64)."""
    return min(int(k) + CLAMP_BITS, 1023)


def grid_details(k: int) -> dict[str, Any]:
    """What a claim says of the grid: ``grid`` = γ, ``grid_exponent`` = k, ``clamp`` = 2^50·γ."""
    return {"grid": float(np.ldexp(1.0, k)), "grid_exponent": int(k),
            "clamp": float(np.ldexp(1.0, clamp_exponent(k))),
            "rounding": "round-to-nearest-even of the exact sum fl(Fx) + noise onto grid·Z, clamped to ±clamp"}


@njit(cache=True)
def _snap_kernel(a, n, k, out):  # pragma: no cover (compiled)
    """``out[i·p + j] = round_γ(a[j] + n[i·p + j])`` with p = len(a): the loop of :func:`snap_sum`."""
    g = math.ldexp(1.0, k)
    inv = math.ldexp(1.0, -k)
    half = math.ldexp(1.0, k - 1)
    bound = math.ldexp(1.0, min(k + CLAMP_BITS, 1023))
    top = math.ldexp(1.0, CLAMP_BITS)
    p = a.size
    for i in range(n.size // p):
        for j in range(p):
            x = a[j]
            y = n[i * p + j]
            s = x + y
            if not math.isfinite(s):  # an overflowed sum stays ±inf (or NaN): the caller refuses it
                out[i * p + j] = s
                continue
            bb = s - x
            e = (x - (s - bb)) + (y - bb)  # two-sum: x + y = s + e exactly
            if s > bound:
                s, e = bound, 0.0
            elif s < -bound:
                s, e = -bound, 0.0
            q = np.rint(s * inv)  # s·2^-k and q·2^k: exact scalings by powers of two
            r = s - q * g  # exact: |s| <= 2^(k+50), so ulp(s) <= γ/4 and |r| <= γ/2
            if e > half - r:
                q += 1.0
            elif -e > half + r:
                q -= 1.0
            q = min(max(q, -top), top)
            out[i * p + j] = q * g + 0.0  # −0.0 → +0.0: the sign of a zero would tell the sign of the real value


def snap_sum(a: ArrayLike, n: ArrayLike, k: int) -> NDArray[np.float64]:
    """``round_γ(a + n)``, γ = 2^k: the exact real sum of the float64s a and n rounded to the
    nearest multiple of γ (ties to even), clamped to ``±2^(k+CLAMP_BITS)``; ``+0.0`` for zero.

    Exact: ``s = fl(a + n)`` and its error ``e`` (Knuth's two-sum: ``a + n = s + e`` exactly);
    ``q = rint(s/γ)``, ``r = s − qγ`` (both exact while ``|s| <= 2^(k+50)``, as ``ulp(s) <= γ/4``);
    then q moves by one where ``r + e`` passes ``±γ/2`` (compared exactly: ``γ/2 ∓ r`` is exact
    wherever ``|e|`` could reach it). A non-finite sum stays non-finite (the callers refuse it rather
    than release the clamp). One compiled pass over the answers (a: one value or one per column).
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
    """True when every value is a multiple of ``2^k`` within the clamp (what a release satisfies)."""
    v = np.asarray(v, dtype=np.float64)
    return bool(np.all(np.isfinite(v)) and np.all(np.abs(v) <= np.ldexp(1.0, clamp_exponent(k)))
                and np.all(np.ldexp(v, -k) == np.rint(np.ldexp(v, -k))))


def row_extent(F: NDArray[np.float64]) -> float:
    """The smallest ``max_j |F_ij|`` over F's non-zero rows: the extent of ``K = F·B₁ⁿ`` along
    its thinnest answer coordinate (a public noise scale is this over ε); 1.0 for F = 0."""
    m = np.maximum(F.max(axis=1), -F.min(axis=1)) if F.size else np.zeros(0)  # no |F| copy of F
    m = m[m > 0]
    return float(m.min()) if m.size else 1.0
