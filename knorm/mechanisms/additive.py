"""Laplace and Gaussian baselines with sensitivities computed from F (docs/design.md §4.1, §4.2)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from ..privacy import BudgetAccountant

from ._base import (ErrorEstimate, Mechanism, PrivacyClaim, check_delta, check_epsilon, check_n_samples, check_size,
                    mc_norm_estimate)


def l1_sensitivity(F: ArrayLike) -> float:
    """Δ₁ = max_i ‖f_i‖₁ (the ℓ₁ change of Fx between neighbours ‖x − x'‖₁ ≤ 1)."""
    return float(np.max(np.abs(np.asarray(F, float)).sum(axis=0)))


def l2_sensitivity(F: ArrayLike) -> float:
    """Δ₂ = max_i ‖f_i‖₂."""
    return float(np.max(np.linalg.norm(np.asarray(F, float), axis=0)))


def expected_norm_gaussian(d: int, sigma: float) -> float:
    """``E‖N(0, σ² I_d)‖₂ = σ √2 Γ((d+1)/2) / Γ(d/2)`` (chi distribution mean)."""
    return float(sigma * np.sqrt(2.0) * np.exp(special.gammaln((d + 1) / 2) - special.gammaln(d / 2)))


class LaplaceMechanism(Mechanism):
    """``Fx + Lap(Δ₁/ε)^d``; pure ε-DP with Δ₁ = max column ℓ₁ norm of F.

    >>> m = LaplaceMechanism(F, epsilon=1.0); m.release(x); m.privacy  # ε for one answer
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, rng: np.random.Generator | int | None = None,
                 accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = l1_sensitivity(self.F)
        self.scale = self.sensitivity / self.epsilon
        if not np.isfinite(self.scale):
            raise ValueError(f"epsilon = {self.epsilon:g} is too small: the Laplace scale Δ₁/ε overflows float64")
        self._claim = PrivacyClaim("Laplace", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"l1_sensitivity": self.sensitivity, "scale": self.scale})

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)
        return self._one_or_many(self._rng.laplace(0.0, self.scale, size=(m or 1, self.d)), m)

    def expected_squared_error(self) -> float:
        """``E‖noise‖₂² = 2 d b²`` with b = Δ₁/ε (exact)."""
        return 2.0 * self.d * self.scale**2

    def expected_error(self, n_samples: int = 200_000) -> ErrorEstimate:
        """``E‖noise‖₂``: no closed form; Monte Carlo over exact Laplace draws (≈ √(2d)·b)."""
        n_samples = check_n_samples(n_samples)
        rng = np.random.default_rng(self._rng.integers(2**63))
        draws = rng.laplace(0.0, self.scale, size=(n_samples, self.d))
        return mc_norm_estimate(draws, method=f"Monte Carlo, {n_samples} exact draws")


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest σ with ``Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) <= δ`` (Balle & Wang 2018).

    The left side is the exact privacy profile δ(ε) of the Gaussian mechanism, i.e.
    docs/design.md §7's μ-GDP conversion with μ = Δ/σ; it decreases in σ.
    """

    def excess(log_sigma: float) -> float:
        s = np.exp(log_sigma)
        a = sensitivity / (2 * s) - epsilon * s / sensitivity
        b = -sensitivity / (2 * s) - epsilon * s / sensitivity
        return special.ndtr(a) - np.exp(epsilon + special.log_ndtr(b)) - delta

    # bracket the root in log σ, widening until the signs differ (or σ leaves float64)
    lo, hi = np.log(sensitivity) - 20.0, np.log(sensitivity) + 20.0
    while excess(lo) <= 0.0:
        lo -= 20.0
        if lo < -740.0:
            raise ValueError(f"epsilon = {epsilon:g}, delta = {delta:g}: the Gaussian σ underflows float64")
    while excess(hi) > 0.0:
        hi += 20.0
        if hi > 709.0:
            raise ValueError(f"epsilon = {epsilon:g}, delta = {delta:g}: the Gaussian σ overflows float64")
    return float(np.exp(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14)))


class GaussianMechanism(Mechanism):
    """``Fx + N(0, σ² I)``; (ε, δ)-DP with Δ₂ = max column ℓ₂ norm of F.

    ``calibration="analytic"`` (default) solves the exact privacy profile for the
    smallest σ, valid for every ε > 0; ``"classic"`` uses σ = Δ₂ √(2 ln(1.25/δ))/ε and
    requires ε < 1.
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, delta: float, calibration: str = "analytic",
                 rng: np.random.Generator | int | None = None, accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        if calibration not in ("analytic", "classic"):
            raise ValueError(f"calibration must be 'analytic' or 'classic', got {calibration!r}")
        self.calibration = calibration
        self.sensitivity = l2_sensitivity(self.F)
        if calibration == "classic":
            if self.epsilon >= 1.0:
                raise ValueError(f"the classic Gaussian calibration needs epsilon < 1 (got {self.epsilon}); "
                                 "use calibration='analytic'")
            self.sigma = self.sensitivity * np.sqrt(2 * np.log(1.25 / self.delta)) / self.epsilon
        else:
            self.sigma = analytic_gaussian_sigma(self.sensitivity, self.epsilon, self.delta)
        if not np.isfinite(self.sigma):
            raise ValueError(f"epsilon = {self.epsilon:g} is too small: the Gaussian σ overflows float64")
        self._claim = PrivacyClaim("Gaussian", self.epsilon, self.delta, "(ε, δ)-DP", "exact",
                                    details={"l2_sensitivity": self.sensitivity, "sigma": self.sigma,
                                             "calibration": calibration})

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)
        return self._one_or_many(self._rng.normal(0.0, self.sigma, size=(m or 1, self.d)), m)

    def expected_squared_error(self) -> float:
        return self.d * self.sigma**2

    def expected_error(self) -> ErrorEstimate:
        """``E‖N(0, σ²I_d)‖₂ = σ√2 Γ((d+1)/2)/Γ(d/2)`` (exact)."""
        return ErrorEstimate(expected_norm_gaussian(self.d, self.sigma), 0.0, True, "chi-distribution mean")
