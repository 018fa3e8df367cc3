"""Rounding: iterative covariance estimation of Uniform(K) (MATH.md §3).

The walks run in the isotropic image ``T⁻¹K`` of the body, where ``T Tᵀ ≈ Σ`` is the
covariance of Uniform(K) in span coordinates. Uniformity is preserved by linear maps,
and ``T⁻¹K = (T⁻¹F)·B₁ⁿ`` is again a symmetric hull, so the same exact oracle serves.
"""

from dataclasses import dataclass

import numpy as np

from ..body.hull import Frame
from .chains import Chain, default_params, run_chains

ROUNDING_SEED = 20191  # rounding is a deterministic function of the body (see Rounding)


@dataclass
class Rounding:
    """Result of :func:`round_body`.

    ``T`` (r×r, lower triangular): frame coordinates ``z = T⁻¹ y`` (y in span units);
    ``frame``: the rounded body; ``covariance``: the estimate ``T Tᵀ`` of Cov(Uniform K)
    in span units; ``iterations``; ``eigen_spread``: max/min eigenvalue of the last
    in-frame covariance estimate (≈ 1 when isotropic, up to sampling noise);
    ``points``: the last in-frame sample (used to start chains).
    """

    T: np.ndarray
    frame: Frame
    covariance: np.ndarray
    iterations: int
    eigen_spread: float
    points: np.ndarray

    def to_span(self, Z):
        return np.asarray(Z) @ self.T.T


def _frame_for(base, T):
    return Frame(np.linalg.solve(T, base.Ft.T).T)


def round_body(base, *, chains=4, samples_per_dim=20, max_iter=8, spread_tol=3.0, workers=None):
    """Estimate Cov(Uniform K) by billiard walks in successively rounded frames.

    Starts from ``Σ₀ = F Fᵀ / n``; each iteration runs ``chains`` billiard chains
    (warm-up 4·r steps, then every 4th step),
    collects ``samples_per_dim·r`` points, estimates the in-frame covariance ``S`` and
    updates ``T ← T·chol(S)``. Stops when the eigenvalue spread of S is below
    ``spread_tol`` (sampling noise of the estimate alone gives about 2 at 20 points
    per dimension) or after ``max_iter`` iterations. Seeded with a fixed seed: the
    rounding of a body is deterministic, so caching it never changes seeded results.
    """
    r = base.r
    rng = np.random.default_rng(ROUNDING_SEED)
    Fr = base.Ft.T
    T = np.linalg.cholesky(Fr @ Fr.T / base.n + 1e-12 * np.eye(r))
    n_points = max(samples_per_dim * r, 100)
    per_chain = -(-n_points // chains)
    thin = 4
    warmup = 4 * r
    pts = None
    spread = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        frame = _frame_for(base, T)
        gens = rng.spawn(chains)
        if pts is None:
            starts = [np.zeros(r)] * chains
        else:
            starts = [p for p in pts[:chains]]
        cs = [Chain(frame, x0, g) for x0, g in zip(starts, gens)]
        params = default_params("billiard", frame)
        run_chains(cs, "billiard", warmup, warmup, params, workers)
        rec = run_chains(cs, "billiard", per_chain * thin, thin, params, workers)
        Z = rec.reshape(-1, r)
        S = np.cov(Z, rowvar=False).reshape(r, r)
        ev = np.linalg.eigvalsh(S)
        spread = float(ev[-1] / ev[0])
        L = np.linalg.cholesky(S)
        pts_frame = np.linalg.solve(L, Z.T).T
        T = T @ L
        pts = pts_frame[-chains:]
        if spread < spread_tol:
            break
    return Rounding(T=T, frame=_frame_for(base, T), covariance=T @ T.T, iterations=it,
                    eigen_spread=spread, points=pts)
