"""Post-processing of released answers that costs no privacy (issues 10, 42, 50).

Every function here reads only the released answers and the public workload F (and, for
:func:`project_to_total`, a total count N that the caller declares public), so by
post-processing its output carries exactly the privacy claim of the answers it was given.

Each is the Euclidean (or, with a covariance, Mahalanobis) projection of the answers ``a``
onto a closed convex set that contains the true answers ``Fx``, so it never moves them
farther from ``Fx``: ``‖P(a) − Fx‖ <= ‖a − Fx‖`` for every draw of the noise.

* :func:`least_squares`: onto the column space of F (``x`` any real vector);
* :func:`nonnegative`: onto ``{Fx : x >= 0}`` (a histogram of counts);
* :func:`project_to_total`: onto ``N·conv(f_i)`` (x >= 0, ``Σx = N``) or, with
  ``nonnegative=False``, onto ``N·K``, ``K = F·B₁ⁿ`` (``‖x‖₁ <= N``; Nikolov, Talwar and
  Zhang 2013).

Answers are one vector (d,) or a batch (m, d); the result has the same shape (an empty
batch (0, d) gives an empty result). Rows are projected independently, each scaled by its own
power of two: a batch gives each row's own result, to the bit.

Exactly consistent tables where that is free. For a workload of small integer entries (times
one power of two: marginals, ranges, counts) x̂ can be rounded to a power-of-two grid on which
``F x̂`` is exact in float64 (:func:`exact_grid`): tables then agree to the last bit. The
rounding moves answer i by at most ``Σ_j |F_ij|·2^(j−1)``, which grows with the row's largest
count; it is used only where that is at most ``2^-GRID_BITS`` (2⁻¹⁰) of the row's grain, the
largest power of two dividing all its answers. For knorm's releases that is the public grid
``γ <= s·2⁻¹⁰`` (docs/design.md §10.1) or a multiple of it, so almost always at most 2⁻²⁰ of
the noise scale s; a row of exact integers (noise below the answers' float spacing, say
counts of 10⁸ at ε = 10¹²) has grain 1 and may move by 2⁻¹⁰. Elsewhere
(a count of 10¹³ at ε = 10⁴, raw float noise, other F) the answers are the plain float
projection, consistent to float rounding only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg, optimize

from ._blas import thin_svd
from ._validate import as_real_array, check_flag, is_int, is_real, short_repr
from .body.hull import _exponent, validate_matrix

__all__ = ["least_squares", "least_squares_matrix", "nonnegative", "project_to_total", "propagate"]


def _answers(F: NDArray[np.float64], answers: ArrayLike) -> tuple[NDArray[np.float64], bool]:
    """``answers`` as a float (m, d) array matching F, and whether it was one vector."""
    a = as_real_array("answers", answers)
    if a.ndim not in (1, 2) or a.shape[-1] != F.shape[0]:
        raise ValueError(f"answers must have shape ({F.shape[0]},) or (m, {F.shape[0]}) to match F with "
                         f"{F.shape[0]} rows; got {a.shape}")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError("answers contains NaN or infinite entries")
    return np.atleast_2d(a), a.ndim == 1


def _whitener(covariance: ArrayLike | None, d: int) -> NDArray[np.float64] | None:
    """Lower Cholesky factor L of the noise covariance (Σ = LLᵀ), or None for Σ ∝ I.

    ``covariance`` is a (d, d) symmetric positive definite matrix or a (d,) vector of
    positive variances (a diagonal Σ)."""
    if covariance is None:
        return None
    c = as_real_array("covariance", covariance).astype(np.float64)
    if not np.all(np.isfinite(c)):
        raise ValueError("covariance contains NaN or infinite entries")
    top = float(np.max(np.abs(c))) if c.size else 0.0
    if top > 0:  # Σ and aΣ (a > 0) give the same estimate: scale to max |Σ| in [0.5, 1)
        c = np.ldexp(c, -int(np.frexp(top)[1]))
    if c.shape == (d,):
        if np.any(c <= 0):
            raise ValueError("covariance (a vector of variances) must be positive "
                             "(and within float64's range of each other)")
        return np.sqrt(c)
    if c.shape != (d, d):
        raise ValueError(f"covariance must have shape ({d}, {d}) or ({d},) to match F with {d} rows; got {c.shape}")
    if not np.allclose(c, c.T, rtol=1e-10, atol=0.0):
        raise ValueError("covariance must be symmetric")
    try:
        return linalg.cholesky(c, lower=True)
    except linalg.LinAlgError:
        raise ValueError("covariance must be positive definite (its Cholesky factorisation failed)") from None


def least_squares(F: ArrayLike, answers: ArrayLike, *, covariance: ArrayLike | None = None,
                  return_x: bool = False) -> NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Consistent answers ``F x̂``, ``x̂ = argmin_x (a − Fx)ᵀ Σ⁻¹ (a − Fx)`` (generalised least squares).

    Without ``covariance`` (Σ ∝ I) this is the orthogonal projection of ``a`` onto the
    column space of F: ``F x̂ = P a``, ``P = F F⁺``, and for unbiased noise e,
    ``E‖P e‖² = trace(P Cov(e)) <= E‖e‖²``. With Σ the answers are whitened by its Cholesky
    factor L (``L⁻¹a``, ``L⁻¹F``) and projected: for rank(F) = n, ``F x̂`` is the best linear
    unbiased estimate of Fx (Gauss–Markov), with covariance ``F (FᵀΣ⁻¹F)⁻¹ Fᵀ``.

    Never farther from the truth: for every x, ``‖F x̂ − Fx‖_Σ <= ‖a − Fx‖_Σ + η`` (``‖v‖_Σ = ‖L⁻¹v‖``),
    η the computed residual's component along F's range (0 for the exact projection). x̂ comes
    from one SVD of ``L⁻¹F`` and one step of iterative refinement, and η is checked: at most
    :data:`RANGE_ULPS` float spacings of the largest magnitude involved (``|L⁻¹a|``,
    ``|L⁻¹F||x̂|``), else ValueError. Add the exactness grid's rounding where it is used (at
    most ``2^-GRID_BITS`` of the row's grain per answer; module docstring).

    ``x̂`` (minimum-norm when F is rank deficient) is returned too with ``return_x=True``.
    Rows of a batch are projected independently (each row's result, to the bit).
    """
    F = validate_matrix(F)
    a, one = _answers(F, answers)
    check_flag("return_x", return_x)
    L = _whitener(covariance, F.shape[0])
    e_f = _exponent(F)
    Fs = np.ldexp(F, -e_f)

    def white(v: NDArray[np.float64]) -> NDArray[np.float64]:
        if L is None:
            return v
        w = v / (L if v.ndim == 1 else L[:, None]) if L.ndim == 1 else linalg.solve_triangular(L, v, lower=True)
        if not np.all(np.isfinite(w)):
            raise ValueError("covariance is too ill-conditioned: whitening F and the answers leaves float64")
        return w

    Fw = white(Fs)
    # F's range in Σ's metric from one SVD (the same for every row); rank cut-off as numpy's
    # matrix_rank: LAPACK's default (eps) keeps directions of ≈ 1e-15 off a rank-deficient F's range
    U, s, Vt = thin_svd(Fw, scipy_first=True)
    keep = s > (s[0] if s.size else 0.0) * max(Fw.shape) * np.finfo(np.float64).eps
    U, s, V = U[:, keep], s[keep], Vt[keep].T
    spread = np.abs(Fs).sum(axis=1)

    def fit(row: NDArray[np.float64]) -> NDArray[np.float64]:
        b = white(row)
        x = V @ ((U.T @ b) / s)  # minimum-norm solution of Fw x ≈ b
        x = x + V @ ((U.T @ (b - white(Fs @ x))) / s)  # one step of iterative refinement
        eta = float(np.linalg.norm(U.T @ (b - white(Fs @ x))))
        if not eta <= RANGE_ULPS * float(np.spacing(max(np.abs(b).max(), (np.abs(Fw) @ np.abs(x)).max()))):
            raise ValueError("F and covariance: the least-squares residual is not orthogonal to F's range within "
                             f"{RANGE_ULPS} float spacings of the answers (the whitened F is too ill-conditioned)")
        return _on_grid(x, Fs, row, spread)

    return _rows(a, Fs, e_f, fit, return_x, one)


def least_squares_matrix(F: ArrayLike, *, covariance: ArrayLike | None = None) -> NDArray[np.float64]:
    """The (d, d) matrix P with ``least_squares(F, a, covariance=Σ) = P a`` (up to float rounding and
    the exactness grid's, at most ``2^-GRID_BITS`` of the row's grain per answer): least squares is
    linear in the answers. Without Σ, ``P = U Uᵀ``, the orthogonal projection onto F's range (U from
    the same SVD and rank cut-off as :func:`least_squares`); with Σ = LLᵀ, ``P = L U Uᵀ L⁻¹`` (U: the
    range of ``L⁻¹F``). A function of F (and Σ) only: public. Post-processed noise ``P e`` has
    covariance ``P Cov(e) Pᵀ`` (:func:`propagate`): per-answer standard errors ``√diag``."""
    F = validate_matrix(F)
    d = F.shape[0]
    L = _whitener(covariance, d)
    Fs = np.ldexp(F, -_exponent(F))
    if L is None:
        Fw = Fs
    elif L.ndim == 1:
        Fw = Fs / L[:, None]
    else:
        Fw = linalg.solve_triangular(L, Fs, lower=True)
    U, s, _ = thin_svd(Fw, scipy_first=True)
    U = U[:, s > (s[0] if s.size else 0.0) * max(Fw.shape) * np.finfo(np.float64).eps]
    Q = U @ U.T
    if L is None:
        return Q
    if L.ndim == 1:
        return L[:, None] * Q / L[None, :]
    return L @ linalg.solve_triangular(L, Q.T, lower=True, trans="T").T  # L Q L⁻¹


def propagate(P: ArrayLike, covariance: ArrayLike) -> NDArray[np.float64]:
    """``P Σ Pᵀ``: the covariance of ``P e`` for noise e of covariance Σ, a (d, d) matrix or a (d,)
    vector of variances (a diagonal Σ); P (k, d) a linear post-processing map
    (:func:`least_squares_matrix`). The per-answer standard errors are ``√diag``."""
    M = as_real_array("P", P).astype(np.float64)
    if M.ndim != 2 or not np.all(np.isfinite(M)):
        raise ValueError(f"P must be a finite 2-D matrix (k, d), got shape {M.shape}")
    d = M.shape[1]
    c = as_real_array("covariance", covariance).astype(np.float64)
    if c.shape not in ((d,), (d, d)) or not np.all(np.isfinite(c)):
        raise ValueError(f"covariance must be a finite ({d},) vector of variances or a ({d}, {d}) matrix to match P "
                         f"with {d} columns; got shape {c.shape}")
    out: NDArray[np.float64] = (M * c[None, :]) @ M.T if c.ndim == 1 else M @ c @ M.T
    return (out + out.T) / 2


RANGE_ULPS = 64  # least squares: the residual's component along F's range, in float spacings of max(|L⁻¹a|, |L⁻¹F||x̂|)
GRID_BITS = 10  # the exactness grid moves an answer by at most 2^-GRID_BITS of its row's grain
EXACT_BITS = 20  # F exactly consistent when its entries are integers below 2^20 times one power of two


def _lowest_bit(v: NDArray[np.float64]) -> int | None:
    """The largest k with every entry of ``v`` an integer multiple of ``2^k`` (None when v is all zero)."""
    nz = np.abs(v[v != 0])
    if not nz.size:
        return None
    mant, e = np.frexp(nz)  # nz = mant·2^e, mant·2^53 an integer: its lowest set bit is 2^(e−53+tz)
    M = np.ldexp(mant, 53).astype(np.int64)
    return int(np.min(e - 53 + np.log2(M & -M).astype(np.int64)))


def exact_grid(Fs: NDArray[np.float64], xs: NDArray[np.float64]) -> int | None:
    """The exponent j such that ``xs`` rounded to multiples of ``2^j`` has an exact product with ``Fs``
    (every product and partial sum of ``Fs @ x`` a float64), or None where Fs's entries are not
    integers ``m`` times one power of two ``2^u`` with ``|m| < 2^20`` (0/1 marginals, ranges, counts,
    ±1, small integers and halves qualify; 0.1 does not).

    With ``x`` on ``2^j``, each ``F_ij x_j`` is a multiple of ``2^(u+j)`` and every partial sum of
    them, within an answer or across answers (a table's total, a margin), is at most
    ``S = Σ_i Σ_j |F_ij|·|x_j|`` plus the rounding's growth in size; ``j`` is chosen so that
    ``S < 2^(u+j+52)`` (and d·n < 2^32 entries, so the growth stays below 2^(u+j+51)): every such sum
    is exact, in any order (BLAS, FMA, numpy's pairwise sums). The rounding moves x by at most
    ``2^(j−1) ≈ 2⁻⁵² S/2^u``: whether that is small enough is :func:`_on_grid`'s test."""
    u = _lowest_bit(Fs)  # every entry an integer multiple of 2^u
    if u is None or not xs.size:
        return None
    if float(np.max(np.abs(Fs))) >= np.ldexp(1.0, u + EXACT_BITS) or Fs.size >= 2 ** (52 - EXACT_BITS):
        return None
    with np.errstate(over="ignore"):
        S = float(np.sum(np.abs(xs) @ np.abs(Fs).T, axis=-1).max())
    if not np.isfinite(S) or S == 0.0:
        return None
    # S < 2^(u+j+52), and the rounding adds at most d·n·|m|·2^(u+j−1) < 2^(u+j+51) (d·n·|m| < 2^52)
    return int(np.frexp(S)[1]) - u - 52


def _on_grid(xs: NDArray[np.float64], Fs: NDArray[np.float64], row: NDArray[np.float64],
             spread: NDArray[np.float64]) -> NDArray[np.float64]:
    """``xs`` on :func:`exact_grid`'s grid (``Fs @ x`` then exact: exactly consistent answers) when that
    moves no answer by more than ``2^-GRID_BITS`` of ``row``'s grain (the largest power of two dividing
    all its answers), else ``xs`` unchanged. ``spread``: the row sums of ``|Fs|``; answer i moves by
    at most ``spread_i·2^(j−1)``."""
    j, g = exact_grid(Fs, xs), _lowest_bit(row)
    if j is None or g is None or float(spread.max()) * np.ldexp(1.0, j - 1) > np.ldexp(1.0, g - GRID_BITS):
        return xs
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(np.rint(np.ldexp(xs, -j)), j) + 0.0


def _rows(a: NDArray[np.float64], Fs: NDArray[np.float64], e_f: int,
          fit: Callable[[NDArray[np.float64]], NDArray[np.float64]], need_x: bool, one: bool
          ) -> NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(F x̂, x̂)`` row by row: each row scaled exactly by its own power of two to max |·| in
    [0.5, 1), ``xs = fit(row)`` solved for the scaled F ``Fs`` (x̂ = xs·2^(e_a − e_f)); the same
    operations on every row, so a batch gives each row's own result to the bit. A result past
    float64 is refused."""
    out, X = np.zeros(a.shape), np.zeros((len(a), Fs.shape[1]))
    for i, row in enumerate(a):
        e_a = _exponent(row)
        xs = fit(np.ldexp(row, -e_a))
        with np.errstate(over="ignore"):
            out[i], X[i] = np.ldexp(Fs @ xs, e_a), np.ldexp(xs, e_a - e_f)
    if not np.all(np.isfinite(out)):
        raise ValueError("answers: the projected answers exceed float64 (about 1.8e308)")
    if need_x and not np.all(np.isfinite(X)):
        raise ValueError("F and answers: x̂ exceeds float64 (F is tiny next to the answers); "
                         "use return_x=False")
    if one:
        out, X = out[0], X[0]
    return (out, X) if need_x else out


def _nnls(A: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """``argmin_{u >= 0} ‖Au − b‖`` by Lawson–Hanson (scipy), with room for large active sets."""
    return optimize.nnls(A, b, maxiter=50 * A.shape[1])[0]


def nonnegative(F: ArrayLike, answers: ArrayLike, *, return_x: bool = False
                ) -> NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Consistent answers ``F x̂`` with ``x̂ = argmin_{x >= 0} ‖a − Fx‖₂`` (a histogram of counts).

    The projection of ``a`` onto the convex cone ``{Fx : x >= 0}``, which contains the true
    answers of any histogram: ``‖F x̂ − Fx‖ <= ‖a − Fx‖`` for every draw and every x >= 0
    (NNLS's solution, up to its float rounding and the exactness grid's, at most
    ``2^-GRID_BITS`` of the row's grain per answer). ``F x̂`` is unique; ``x̂``
    (``return_x=True``) need not be when F is rank deficient. Rows are independent.
    """
    F = validate_matrix(F)
    a, one = _answers(F, answers)
    check_flag("return_x", return_x)
    e_f = _exponent(F)
    Fs = np.ldexp(F, -e_f)
    spread = np.abs(Fs).sum(axis=1)
    return _rows(a, Fs, e_f, lambda row: _on_grid(_nnls(Fs, row), Fs, row, spread), return_x, one)


def project_to_total(F: ArrayLike, answers: ArrayLike, total: float, *, nonnegative: bool = True,
                     return_x: bool = False) -> NDArray[np.float64] | tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The point of ``N·K`` closest (ℓ₂) to the answers, for a PUBLIC total count N.

    N must not be computed from the data: declare it (a count published elsewhere) or
    release it with its own ε (e.g. ``LaplaceMechanism(np.ones((1, n)), epsilon=ε₀)``,
    ``Δ₁ = 1``) charged to the same accountant; the result then carries both claims
    (basic composition). ``total=x.sum()`` would put the private total, un-noised, into
    every answer.

    ``nonnegative=True``: histograms ``x >= 0`` with ``Σx = N``, so ``N·K = N·conv(f_i)`` (the
    columns of F); ``False``: ``‖x‖₁ <= N`` and ``N·K = N·conv(±f_i)`` (Nikolov–Talwar–Zhang's
    projection). Both contain Fx, so ``‖ŷ − Fx‖ <= ‖a − Fx‖`` for every draw.

    Solved exactly by one non-negative least squares: with ``w = N v``, ``v`` in the simplex,
    ``‖Fw − a‖ = N ‖G v‖`` for ``G = F − a 1ᵀ/N``; over ``u = t v >= 0`` the objective
    ``‖G u‖² + (1ᵀu − 1)² = t²‖Gv‖² + (t − 1)²`` has minimum ``‖Gv‖²/(1 + ‖Gv‖²)`` over t, which
    increases with ``‖Gv‖``, so ``v = u/1ᵀu`` for the NNLS solution u (G scaled to unit size).
    The result is exact up to about 1e-15·N·max|F| (absolute), NNLS's precision.
    """
    F = validate_matrix(F)
    a, one = _answers(F, answers)
    if not is_real(total) or (is_int(total) and total >= 2**1024) or not np.isfinite(float(total)) or total < 0:
        raise ValueError(f"total must be a finite number >= 0 (the public count N), got {short_repr(total)}")
    for name, flag in (("nonnegative", nonnegative), ("return_x", return_x)):
        check_flag(name, flag)
    N = float(total)
    C = F if nonnegative else np.hstack([F, -F])
    n = F.shape[1]
    out, xs = np.zeros_like(a), np.zeros((len(a), n))
    if N > 0:
        # G = C − a/N up to a positive factor, computed as (N·C − a)·2^-e with N·C and a
        # scaled by powers of two first: no overflow or underflow whatever N, F and a are
        e_c = int(np.frexp(np.max(np.abs(C)))[1])
        Cs = np.ldexp(C, -e_c)
        for i, row in enumerate(a):
            top = float(np.max(np.abs(row)))
            e = max(int(np.frexp(N)[1]) + e_c, int(np.frexp(top)[1]) if top > 0 else -1075)
            G = np.ldexp(N, e_c - e) * Cs - np.ldexp(row, -e)[:, None]
            scale = float(np.max(np.abs(G)))
            if scale == 0.0:  # every column equals a/N: a is in N·K already
                v = np.full(C.shape[1], 1.0 / C.shape[1])
            else:
                u = _nnls(np.vstack([G / scale, np.ones((1, C.shape[1]))]), np.r_[np.zeros(F.shape[0]), 1.0])
                v = u / u.sum()
            w = N * v
            xs[i] = w if nonnegative else w[:n] - w[n:]
            with np.errstate(over="ignore"):
                out[i] = C @ w
        if not np.all(np.isfinite(out)):
            raise ValueError(f"total = {N:g}: the projected answers total·F exceed float64 (about 1.8e308)")
    if one:
        out, xs = out[0], xs[0]
    return (out, xs) if return_x else out
