"""Bounded 1-D Laplace and the Gaussian mechanism with a covariance matrix (docs/design.md §7)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..privacy import BudgetAccountant
from .._rng import as_generator
from .._validate import as_real_array, check_flag, short_repr
from ..body.hull import validate_matrix
from ._base import (Accounted, PrivacyClaim, check_delta, check_epsilon, check_finite_output, check_magnitude,
                    check_noise_scale, check_positive, check_size, finite_real)
from ._grid import grid_exponent, snap_sum


class BoundedLaplaceMechanism(Accounted):
    """Laplace noise for a 1-D statistic known to lie in ``D = [lower, upper]``.

    ``value + Lap(b)`` with ``b = diam(D)/(ε − ln(1 − δ))``. Any two values of D differ by
    at most diam(D), and Laplace's exact privacy profile at that scale is
    ``δ(ε) = 1 − e^{(ε − diam/b)/2} = 1 − √(1 − δ) <= δ``, so this is (ε, δ)-DP with less
    noise than the pure ε-DP scale diam/ε. With ``clip=True`` outputs are clipped to D:
    post-processing, free of privacy cost. (Conditioning the noise on D instead, the
    truncated "bounded Laplace", would need a further correction of b.)
    """

    def __init__(self, lower: float, upper: float, *, epsilon: float, delta: float, clip: bool = True,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        lower, upper = finite_real("lower", lower), finite_real("upper", upper)
        if not lower < upper:
            raise ValueError(f"need lower < upper, got lower = {lower}, upper = {upper}")
        self.lower, self.upper = lower, upper
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.clip = check_flag("clip", clip)
        with np.errstate(over="ignore", under="ignore"):  # refused just below
            width = np.float64(upper) - np.float64(lower)  # may overflow: [-1e308, 1e308]
            scale = width / (self.epsilon - np.log1p(-self.delta))
        self.scale = check_noise_scale(float(scale), self.epsilon,
                                       f"the Laplace scale for the domain width upper − lower = {width:g}")
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)
        self._claim = PrivacyClaim("bounded-data Laplace", self.epsilon, self.delta, "(ε, δ)-DP", "exact",
                                    neighbours="any two values in D",
                                    details={"scale": self.scale, "domain": [lower, upper], "clip": self.clip})

    def _grid_k_of(self) -> int:
        return grid_exponent(self.scale, self.epsilon)

    def privacy_profile(self, epsilon: float) -> float:
        """Exact δ(ε') of Laplace(b) for shifts up to diam(D): ``max(0, 1 − e^{(ε' − diam/b)/2})``."""
        eps = finite_real("epsilon", epsilon, "a finite number >= 0")
        if eps < 0:
            raise ValueError(f"epsilon must be a finite number >= 0, got {short_repr(epsilon)}")
        with np.errstate(over="ignore"):  # e^{large} − 1 = inf: δ = 0
            return float(max(0.0, -np.expm1((eps - (self.upper - self.lower) / self.scale) / 2)))

    def release(self, value: float, size: int | None = None) -> float | NDArray[np.float64]:
        """Private value(s) for a true ``value`` in D."""
        try:  # the value is private: no message shows it
            v = finite_real("value", value)
        except ValueError:
            raise ValueError(f"value must be a finite real number in [{self.lower}, {self.upper}]") from None
        if not (self.lower <= v <= self.upper):
            raise ValueError(f"value lies outside the domain [{self.lower}, {self.upper}] (not shown: it is private)")
        m = check_size(size, 1)
        self._check_grid()  # the domain is public: its bound, not the value, decides (no data-dependent refusal)
        check_magnitude(max(abs(self.lower), abs(self.upper)), self._release_grid(), "value", "max(|lower|, |upper|)")
        self._check_budget(m or 1)
        noise = self._rng.laplace(0.0, self.scale, size=m or 1)
        out = check_finite_output(snap_sum(v, noise, self._release_grid()), "the answer")  # on the grid (§10.1)
        self._spend(m or 1)
        if self.clip:
            out = np.clip(out, self.lower, self.upper)
        return float(out[0]) if m is None else out


class CovarianceGaussianMechanism(Accounted):
    """``Q(x) + c·N(0, M)`` with ``c = √(2 ln(2/δ))·Δ/ε`` and ``Δ = sup ‖M^{-1/2}(Q(x) − Q(x'))‖₂``.

    (ε, δ)-DP for ε <= 1. Give Δ directly, or build from a workload with
    :meth:`from_workload` (neighbours ``‖x − x'‖₁ <= 1``: ``Δ = max_i ‖M^{-1/2} f_i‖₂``).
    Shaping the noise by M lets it follow the geometry of the query (e.g. M ∝ the
    covariance of Uniform(K)).
    """

    F: NDArray[np.float64]  # the workload, set by from_workload only

    def __init__(self, M: ArrayLike, sensitivity: float, *, epsilon: float, delta: float,
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        M = validate_matrix(M, "M")
        if M.shape[0] != M.shape[1] or not np.allclose(M, M.T, rtol=1e-10, atol=1e-12 * np.abs(M).max()):
            raise ValueError(f"M must be a symmetric square matrix, got shape {M.shape}")
        try:
            self._L = np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            raise ValueError("M must be positive definite") from None
        self.M = M
        self.epsilon = check_epsilon(epsilon)
        if self.epsilon > 1:
            raise ValueError(f"this calibration needs epsilon <= 1, got {self.epsilon}")
        self.delta = check_delta(delta)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        with np.errstate(over="ignore", under="ignore"):  # refused just below
            c = np.sqrt(2 * (np.log(2.0) - np.log(self.delta))) * (np.float64(self.sensitivity) / self.epsilon)
        self.c = check_noise_scale(float(c), self.epsilon,
                                   "the noise scale c = √(2 ln(2/delta))·sensitivity/epsilon")
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)
        self._claim = PrivacyClaim("Gaussian (covariance M)", self.epsilon, self.delta, "(ε, δ)-DP", "exact",
                                    details={"sensitivity_M": self.sensitivity, "c": self.c})

    @classmethod
    def from_workload(cls, F: ArrayLike, M: ArrayLike, *, epsilon: float, delta: float,
                      rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None
                      ) -> CovarianceGaussianMechanism:
        F = validate_matrix(F)
        M = validate_matrix(M, "M")
        if M.shape != (F.shape[0], F.shape[0]):
            raise ValueError(f"M must be {F.shape[0]}×{F.shape[0]} to match F, got {M.shape}")
        try:
            L = np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            raise ValueError("M must be positive definite") from None
        # ‖M^{-1/2} f‖₂ = ‖L^{-1} f‖₂ for M = L Lᵀ
        delta_m = float(np.max(np.linalg.norm(np.linalg.solve(L, F), axis=0)))
        mech = cls(M, delta_m, epsilon=epsilon, delta=delta, rng=rng, accountant=accountant)
        mech.F = F
        return mech

    def _grid_k_of(self) -> int:
        return grid_exponent(self.c * float(np.sqrt(np.min(np.diag(self.M)))), self.epsilon)  # the smallest coordinate's σ

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.M.shape[0])
        z = check_finite_output(self._rng.standard_normal((m or 1, self.M.shape[0])) @ self._L.T * self.c, "noise")
        return z[0] if m is None else z

    def release(self, answer: ArrayLike, size: int | None = None) -> NDArray[np.float64]:
        """``answer + noise`` for a true answer vector Q(x) (length dim M); ``size`` answers cost size·ε."""
        a = as_real_array("answer", answer).astype(np.float64)
        if a.shape != (self.M.shape[0],) or not np.all(np.isfinite(a)):
            raise ValueError(f"answer must be a finite vector of length {self.M.shape[0]}")
        m = check_size(size, self.M.shape[0])
        self._check_grid()
        check_magnitude(float(np.max(np.abs(a))), self._release_grid(), "answer", "max|answer|")
        self._check_budget(m or 1)
        out = check_finite_output(snap_sum(a, self.sample_noise(size), self._release_grid()), "the answer")
        self._spend(m or 1)
        return out
