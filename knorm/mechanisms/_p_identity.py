"""HDMM's p-Identity search (McKenna et al. 2018), for :mod:`knorm.mechanisms.strategy`.

For ``A = [I; Θ]/c``, ``c = 1 + 1ᵀΘ`` (Δ₁ = 1), the exact error factor and its gradient,

    f(Θ) = ‖F A⁺‖_F² = tr(FᵀF (AᵀA)⁻¹),

minimised over Θ >= 0 by L-BFGS-B from fixed starts (:func:`_search_p_identity`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg, optimize

from .._blas import on_one_blas_thread
from .._validate import as_real_array, positive_int

__all__ = ["p_identity_objective", "p_identity_inverse"]


def p_identity_objective(theta: NDArray[np.float64],
                         gram: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """``f(Θ) = ‖F A⁺‖_F² = trace(FᵀF (AᵀA)⁻¹)`` for ``A = [I; Θ] D``, ``D = diag(1/c)``,
    ``c = 1 + 1ᵀΘ`` (every column of A has ℓ₁ norm 1), and its gradient in Θ.

    With ``Ĝ = diag(c) FᵀF diag(c)``, ``X = I + ΘᵀΘ`` and ``K = I + ΘΘᵀ``: ``f = trace(X⁻¹Ĝ)``,
    ``X⁻¹ = I − ΘᵀK⁻¹Θ`` (Woodbury); ``∇f = 2·1 qᵀ − 2 Θ X⁻¹ Ĝ X⁻¹`` with ``q_j = (X⁻¹Ĝ)_jj / c_j``.
    With ``V = K⁻¹ΘĜ = ΘX⁻¹Ĝ`` (as ``ΘΘᵀ = K − I``): ``f = tr Ĝ − Σ Θ∘V``, ``diag(X⁻¹Ĝ) = diag Ĝ −
    Σ_k Θ_k∘V_k`` and ``Θ X⁻¹ĜX⁻¹ = V − (VΘᵀ)K⁻¹Θ``: one O(n²p) product (ΘĜ) per call, the rest
    O(np²). Returns ``(f, ∇f)``.
    """
    theta, gram = as_real_array("theta", theta).astype(np.float64), as_real_array("gram", gram).astype(np.float64)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or not np.all(np.isfinite(gram)):
        raise ValueError(f"gram must be a finite square matrix FᵀF, got shape {gram.shape}")
    if theta.ndim != 2 or theta.shape[1] != gram.shape[0] or not np.all(np.isfinite(theta)) or np.any(theta < 0):
        raise ValueError(f"theta must be a finite (p, {gram.shape[0]}) matrix with entries >= 0, got shape "
                         f"{theta.shape}")
    return _p_identity_fg(theta, gram, np.diag(gram).copy())


def _p_identity_fg(theta: NDArray[np.float64], gram: NDArray[np.float64], gdiag: NDArray[np.float64],
                   factor: NDArray[np.float64] | None = None) -> tuple[float, NDArray[np.float64]]:
    """:func:`p_identity_objective` without its checks (``gdiag``: the Gram's diagonal; ``factor``:
    an L (k × n) with ``LᵀL = gram``, for ``ΘĜ`` in O(npk) instead of O(n²p) when k is small)."""
    c = 1.0 + theta.sum(axis=0)
    p = len(theta)
    # K = I + ΘΘᵀ has eigenvalues >= 1: its explicit inverse is accurate, and two p × p × n products
    # cost a fraction of two triangular solves with n right-hand sides
    Kinv = linalg.cho_solve(linalg.cho_factor(np.eye(p) + theta @ theta.T, check_finite=False), np.eye(p),
                            check_finite=False)
    TG = (theta * c) @ gram if factor is None else ((theta * c) @ factor.T) @ factor
    V = Kinv @ (TG * c)  # K⁻¹ΘĜ = Θ X⁻¹Ĝ
    diag = gdiag * c * c - np.sum(theta * V, axis=0)  # diag(X⁻¹Ĝ)
    TM = V - (V @ theta.T) @ (Kinv @ theta)  # Θ X⁻¹ Ĝ X⁻¹
    grad = 2.0 * (diag / c)[None, :] - 2.0 * TM
    return float(np.sum(diag)), grad


def p_identity_inverse(theta: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(AᵀA)⁻¹ = diag(c) (I − Θᵀ(I + ΘΘᵀ)⁻¹Θ) diag(c)`` for ``A = [I; Θ]/c``, ``c = 1 + 1ᵀΘ`` (n × n)."""
    c = 1.0 + theta.sum(axis=0)
    Xinv = np.eye(theta.shape[1]) - theta.T @ linalg.cho_solve(linalg.cho_factor(np.eye(len(theta)) + theta @ theta.T),
                                                              theta)
    return Xinv * np.outer(c, c)


@on_one_blas_thread  # as the search: one QR, on a loaded machine 20× faster on one thread
def _p_identity_solver(theta: NDArray[np.float64], gram: NDArray[np.float64]
                       ) -> tuple[float, Callable[[NDArray[np.float64]], NDArray[np.float64]]]:
    """``(tr(G (AᵀA)⁻¹), z ↦ A⁺z)`` for ``A = [I; Θ]/c`` from the R of A's QR decomposition (A is well
    conditioned where the search's Woodbury form loses digits to large Θ): ``tr(R⁻ᵀ G R⁻¹)`` and
    ``A⁺z = R⁻¹R⁻ᵀ(z₁ + Θᵀz₂)/c`` for z of shape (m, n + p): O(n²) per vector."""
    n = theta.shape[1]
    c = 1.0 + theta.sum(axis=0)
    R = linalg.qr(np.vstack([np.eye(n), theta]) / c, mode="r")[0][:n]
    half = linalg.solve_triangular(R, gram, trans="T")  # R⁻ᵀG
    value = float(np.trace(linalg.solve_triangular(R, half.T, trans="T")))  # tr(R⁻ᵀ G R⁻¹)

    def solve(z: NDArray[np.float64]) -> NDArray[np.float64]:
        u = (z[:, :n] + z[:, n:] @ theta) / c  # Aᵀz
        return np.asarray(linalg.solve_triangular(R, linalg.solve_triangular(R, u.T, trans="T")).T, dtype=np.float64)
    return value, solve


MAX_STARTS = 1000  # starting points of a p-Identity search, at most


def _check_starts(starts: int | None, n: int) -> int:
    """Starting points of the p-Identity search: ``None`` is 8 for n <= 256, 4 for n <= 512 (a few
    seconds in all; the landscape has many local minima: on prefix 256 the first start ends 0.8%
    above the best of 8, on all ranges over 64 cells 19% above) and 1 above (the starts' spread is
    0.3% at n = 1024, and each costs 13 s or more)."""
    if starts is None:
        return 8 if n <= 256 else 4 if n <= 512 else 1
    starts = positive_int("starts", starts)
    if starts > MAX_STARTS:  # each start is a whole search: more would run for days, never answer
        raise ValueError(f"starts must be at most {MAX_STARTS} (each start is a whole search), got {starts}")
    return starts


def _check_theta(theta: ArrayLike, n: int, p: int | None) -> NDArray[np.float64]:
    """A given Θ: real (not bool), finite, >= 0, shape (p, n) (p as given, if given), with a finite
    column scaling ``1 + 1ᵀΘ``."""
    t = as_real_array("theta", theta)
    if t.dtype.kind == "b":
        raise ValueError("theta must be real numbers (a float array), got dtype bool")
    t = t.astype(np.float64)
    if t.ndim != 2 or t.shape[1] != n or t.shape[0] < 1 or t.shape[0] > n or (p is not None and t.shape[0] != p):
        want = f"({p}, {n})" if p is not None else f"(p, {n}) with 1 <= p <= {n}"
        raise ValueError(f"theta must have shape {want}, got {t.shape}")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError("theta must hold finite entries >= 0")
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(1.0 + t.sum(axis=0))):
            raise ValueError("theta's column sums must be finite (its strategy scales columns by 1 + 1ᵀΘ)")
    return np.ascontiguousarray(t, dtype=np.float64)


def _factor_pays(n: int, rank: int) -> bool:
    """Whether p-Identity's search on n cells works on a Gram factor of this rank: rank <= n/3 (and
    n >= 48, where the factor's eigendecomposition is worth its call)."""
    return n >= 48 and rank <= n // 3


def _low_rank_factor(gram: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """``L = diag(√λ) Qᵀ`` (k × n) over the eigenvalues λ of the Gram above ``n·eps·max λ``, when
    k <= n/3 (else None): ``LᵀL`` is the Gram up to rounding, and the search's dominant product ΘĜ
    costs 2npk instead of n²p (a marginal workload's Gram has the rank of F: 95 of 1,152 cells on
    2-way marginals over (2,3,3,4,4,4)). One eigendecomposition, n³, about what two of the search's
    thousand objective calls cost. The search's result is still judged on the Gram itself."""
    n = gram.shape[0]
    if not _factor_pays(n, n // 3):
        return None
    lam, Q = np.linalg.eigh(gram)
    keep = lam > n * np.finfo(float).eps * max(float(lam[-1]), 0.0)
    if not _factor_pays(n, int(keep.sum())):
        return None
    return np.ascontiguousarray((Q[:, keep] * np.sqrt(lam[keep])).T)


@on_one_blas_thread  # thousands of small products: see the docstring
def _search_p_identity(gram: NDArray[np.float64], p: int, maxiter: int,
                       starts: int) -> tuple[NDArray[np.float64], float, dict[str, Any]]:
    """Θ (p × n, >= 0) minimising :func:`p_identity_objective` on ``gram`` by L-BFGS-B from ``starts``
    fixed starts, the best kept; Θ = 0 (the identity) if no start ends below it. Returns
    ``(Θ, f(Θ), details)``.

    Start k begins at uniform [0, 1) entries (seed k // 2, as HDMM's) and searches on
    ``gram/max|gram|`` (k even) or on ``gram`` as given (k odd: at unit scale, a 0/1 workload's own,
    as HDMM): the same minimiser, but L-BFGS-B's first projected step depends on the gradient's
    size, so the two reach different local minima (all ranges over 64 cells: 33227 and 32063 from
    the same start; over 32 cells the other way round).

    The search runs on one BLAS thread: its thousand objective calls are products of a few
    milliseconds each, and OpenBLAS's threads, woken for every one, wait on each other whenever
    another process holds a core (2-way marginals over (2,3,3,4,4,4), 150 steps on 2 shared
    cores: 58–65 s on two threads, 2.0–2.1 s on one)."""
    n = gram.shape[0]
    gdiag = np.diag(gram).copy()
    top = float(np.abs(gram).max())
    factor = _low_rank_factor(gram)

    def objective(scale: float) -> Callable[[NDArray[np.float64]], tuple[float, NDArray[np.float64]]]:
        G, gd = gram * scale, gdiag * scale
        L = None if factor is None else factor * np.sqrt(scale)

        def fun(t: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            f, g = _p_identity_fg(t.reshape(p, n), G, gd, L)
            return f, g.ravel()
        return fun
    identity = float(np.trace(gram))  # Θ = 0: ‖F‖_F²
    theta, value = np.zeros((p, n)), identity
    info: dict[str, Any] = {"iterations": 0, "converged": True, "message": "identity", "start_objectives": []}
    for k in range(starts):
        scale = 1.0 / top if k % 2 == 0 and top > 0 else 1.0
        res = optimize.minimize(objective(scale), np.random.default_rng(k // 2).random(p * n), jac=True,
                                method="L-BFGS-B", bounds=[(0.0, None)] * (p * n),
                                options={"maxiter": maxiter, "gtol": 0.0})
        t = np.maximum(res.x.reshape(p, n), 0.0)
        v = _p_identity_fg(t, gram, gdiag)[0]
        info["start_objectives"].append(v)
        info["iterations"] += int(res.nit)
        if v < value:
            theta, value = t, v
            info.update(converged=bool(res.success), message=str(res.message), best_start=k)
    return theta, value, {"identity_objective": identity, **info}
