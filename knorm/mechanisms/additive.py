"""Laplace and Gaussian baselines with sensitivities computed from F (docs/design.md §4.1, §4.2)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from ..privacy import BudgetAccountant

from .._validate import check_flag, positive_int, short_repr
from ..body.hull import validate_matrix
from ..body.marginal_ops import as_marginal, column_counts
from ._base import (ErrorEstimate, Mechanism, PrivacyClaim, check_delta, check_epsilon, check_finite_output,
                    check_noise_scale, check_positive, check_size, in_float_range, mc_expected_norm, scaled,
                    unit_exponent)
from ._grid import grid_exponent
from .uncertainty import LaplaceLaw, NoiseLaw, NormalLaw


def _column_norms(F: ArrayLike, ord: int) -> tuple[float, int]:
    """``(max_i ‖f_i‖ on F·2^-e, e)``: F's largest column norm at unit scale and its power-of-two scale.
    A marginal workload known by its structure: ``|scale·2^-e|·c`` (ℓ₁) or ``·√c`` (ℓ₂), c the most
    queries any cell is in."""
    match = as_marginal(F)
    if match is not None:
        e = unit_exponent(np.array([match.scale]))
        c = float(np.max(column_counts(match)))
        return abs(float(np.ldexp(match.scale, -e))) * (c if ord == 1 else float(np.sqrt(c))), e
    F = validate_matrix(F)
    e = unit_exponent(F)
    return float(np.max(np.linalg.norm(np.ldexp(F, -e), ord=ord, axis=0))), e


def _sensitivity(F: ArrayLike, ord: int) -> float:
    unit, e = _column_norms(F, ord)
    value = scaled(unit, e)
    if not np.isfinite(value):
        raise ValueError(f"F: its largest column ℓ{ord} norm (≈ 2^{e + np.log2(unit):.0f}) overflows float64")
    return value


def l1_sensitivity(F: ArrayLike) -> float:
    """Δ₁ = max_i ‖f_i‖₁ (the ℓ₁ change of Fx between neighbours ‖x − x'‖₁ ≤ 1)."""
    return _sensitivity(F, 1)


def l2_sensitivity(F: ArrayLike) -> float:
    """Δ₂ = max_i ‖f_i‖₂ (computed at unit scale: no square over- or underflows)."""
    return _sensitivity(F, 2)


def expected_norm_gaussian(d: int, sigma: float) -> float:
    """``E‖N(0, σ² I_d)‖₂ = σ √2 Γ((d+1)/2) / Γ(d/2)`` (chi distribution mean)."""
    d, sigma = positive_int("d", d), check_positive("sigma", sigma)
    if d > 2**53:
        raise ValueError(f"d must be a dimension of at most 2^53, got {d}")
    with np.errstate(over="ignore"):
        value = float(sigma * np.sqrt(2.0) * np.exp(special.gammaln((d + 1) / 2) - special.gammaln(d / 2)))
    if not np.isfinite(value):
        raise ValueError(f"sigma = {sigma:g} is too large: E‖N(0, σ²I_d)‖₂ overflows float64")
    return value


class LaplaceMechanism(Mechanism):
    """``Fx + Lap(Δ₁/ε)^d``; pure ε-DP with Δ₁ = max column ℓ₁ norm of F.

    >>> m = LaplaceMechanism(F, epsilon=1.0); m.release(x); m.privacy  # ε for one answer
    """

    def __init__(self, F: ArrayLike, *, epsilon: float, rng: np.random.Generator | int | None = None,
                 accountant: BudgetAccountant | None = None) -> None:
        super().__init__(F, rng, accountant)
        self.epsilon = check_epsilon(epsilon)
        unit, e = _column_norms(self.workload_source, 1)
        self.sensitivity = l1_sensitivity(self.workload_source)
        self.scale = check_noise_scale(scaled(unit, e, self.epsilon), self.epsilon, "the Laplace scale Δ₁/ε")
        self.rms_error()  # refused here if ‖noise‖ itself leaves float64
        self._claim = PrivacyClaim("Laplace", self.epsilon, 0.0, "pure ε-DP", "exact",
                                    details={"l1_sensitivity": self.sensitivity, "scale": self.scale})

    def _grid_k_of(self) -> int:
        return grid_exponent(self.scale, self.epsilon)  # 2^k <= b·2^-10: Mironov's snapping with a grid far finer than b

    def _noise_law(self) -> NoiseLaw:
        """i.i.d. ``Lap(b)`` per answer: SE ``√2·b``, interval ``±b·ln(1/(1−level))``, both exact."""
        return LaplaceLaw(self.scale, self.d)

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)
        return self._one_or_many(check_finite_output(self._rng.laplace(0.0, self.scale, size=(m or 1, self.d)),
                                                      "the noise"), m)

    def rms_error(self) -> float:
        """``√E‖noise‖₂² = √(2d)·b`` with b = Δ₁/ε (exact; no square is formed)."""
        with np.errstate(over="ignore"):
            return in_float_range(float(np.sqrt(2.0 * self.d) * self.scale), "the rms error", self.epsilon)

    def expected_squared_error(self) -> float:
        """``E‖noise‖₂² = 2 d b²`` with b = Δ₁/ε (exact)."""
        with np.errstate(over="ignore", under="ignore"):
            return in_float_range(float(2.0 * self.d * np.float64(self.scale) ** 2), "the expected squared error",
                                  self.epsilon)

    def expected_error(self, n_samples: int = 200_000, *, rms: bool = False) -> ErrorEstimate:
        """``E‖noise‖₂``: no closed form; Monte Carlo over exact Laplace draws (≈ √(2d)·b). ``rms=True``:
        ``√E‖noise‖₂² = √(2d)·b``, exact (:meth:`rms_error`)."""
        if check_flag("rms", rms):
            return self._rms_estimate()
        rng = np.random.default_rng(self._rng.integers(2**63))
        def draw(m: int) -> NDArray[np.float64]:
            return rng.laplace(0.0, 1.0, size=(m, self.d))
        return mc_expected_norm(draw, n_samples, self.d, self.scale, f"Monte Carlo, {n_samples} exact draws")


def _unit_gaussian_log_sigma(epsilon: float, delta: float) -> tuple[float, str]:
    """``(log σ₁, calibration)``: the smallest σ₁ with ``Φ(1/2σ₁ − εσ₁) − e^ε Φ(−1/2σ₁ − εσ₁) <= δ``
    (unit sensitivity), "analytic"; or, where float64 cannot evaluate that difference to
    ``RELIABLE``·δ at the root (tiny ε with tiny δ: both terms agree to more digits than it
    holds), the classic σ₁ = √(2 ln(1.25/δ))/ε (valid for ε < 1, larger), "classic"."""

    def terms(log_sigma: float) -> tuple[float, float, float]:
        s = np.exp(log_sigma)
        with np.errstate(over="ignore", under="ignore"):
            a = 1.0 / (2 * s) - epsilon * s
            b = -1.0 / (2 * s) - epsilon * s
            log_u = epsilon + float(special.log_ndtr(b))
            return float(special.ndtr(a)), float(np.exp(log_u)), log_u

    def excess(log_sigma: float) -> float:
        t, u, _ = terms(log_sigma)
        return t - u - delta

    # bracket the root in log σ₁, widening until the signs differ (or σ₁ leaves float64)
    lo, hi = -20.0, 20.0
    while excess(lo) <= 0.0:
        lo -= 20.0
        if lo < -700.0:
            raise ValueError(f"epsilon = {epsilon:g}, delta = {delta:g}: the Gaussian σ per unit of sensitivity "
                             "underflows float64")
    while excess(hi) > 0.0:
        hi += 20.0
        if hi > 700.0:
            raise ValueError(f"epsilon = {epsilon:g}, delta = {delta:g}: the Gaussian σ per unit of sensitivity "
                             "overflows float64")
    root = float(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14))
    t, u, log_u = terms(root)
    rounding = 8 * np.finfo(float).eps * (t + u * (1.0 + abs(log_u)))  # bound on the error of t − u
    if rounding <= RELIABLE * delta:
        step = 1e-13  # the root to the safe side: the computed excess at least its error bound below 0
        while excess(root) > -rounding:
            root += step
            step *= 2.0
        return root, "analytic"
    if epsilon >= 1.0:
        raise ValueError(f"epsilon = {epsilon:g}, delta = {delta:g}: the exact Gaussian privacy profile cannot be "
                         "evaluated in float64 here; use a larger delta")
    return 0.5 * float(np.log(2 * (np.log(1.25) - np.log(delta)))) - float(np.log(epsilon)), "classic"


RELIABLE = 1e-6  # the analytic root is kept where t − u is known to within this fraction of δ


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest σ with ``Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) <= δ`` (Balle & Wang 2018).

    The left side is the exact privacy profile δ(ε) of the Gaussian mechanism, i.e.
    docs/design.md §7's μ-GDP conversion with μ = Δ/σ; it decreases in σ and depends on
    Δ/σ alone, so σ = Δ·σ₁ with σ₁ solved at Δ = 1 (any scale of Δ works).
    """
    sensitivity = check_positive("sensitivity", sensitivity)
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    log_unit, _ = _unit_gaussian_log_sigma(epsilon, delta)
    m, e = np.frexp(sensitivity)
    sigma = scaled(float(m) * np.exp(log_unit), int(e))
    return check_noise_scale(sigma, epsilon, "the Gaussian σ = sensitivity·σ₁(epsilon, delta)")


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
        if not isinstance(calibration, str) or calibration not in ("analytic", "classic"):
            raise ValueError(f"calibration must be 'analytic' or 'classic', got {short_repr(calibration)}")
        self.calibration = calibration  # what was asked; details["calibration"]: what was used
        unit, e = _column_norms(self.workload_source, 2)
        self.sensitivity = l2_sensitivity(self.workload_source)
        used = calibration
        if calibration == "classic":
            if self.epsilon >= 1.0:
                raise ValueError(f"the classic Gaussian calibration needs epsilon < 1 (got {self.epsilon}); "
                                 "use calibration='analytic'")
            sigma = scaled(unit * np.sqrt(2 * (np.log(1.25) - np.log(self.delta))), e, self.epsilon)
        else:
            log_unit, used = _unit_gaussian_log_sigma(self.epsilon, self.delta)
            sigma = scaled(unit * np.exp(log_unit), e)
        self.sigma = check_noise_scale(sigma, self.epsilon, "the Gaussian σ")
        self.rms_error()  # refused here if ‖noise‖ itself leaves float64
        self._claim = PrivacyClaim("Gaussian", self.epsilon, self.delta, "(ε, δ)-DP", "exact",
                                    details={"l2_sensitivity": self.sensitivity, "sigma": self.sigma,
                                             "calibration": used})

    def _grid_k_of(self) -> int:
        return grid_exponent(self.sigma, self.epsilon)

    def _noise_law(self) -> NoiseLaw:
        """``N(0, σ²)`` per answer: SE σ, interval ``±Φ⁻¹((1+level)/2)·σ``, both exact."""
        return NormalLaw(self.sigma, self.d)

    def sample_noise(self, size: int | None = None) -> NDArray[np.float64]:
        m = check_size(size, self.d)
        return self._one_or_many(check_finite_output(self._rng.normal(0.0, self.sigma, size=(m or 1, self.d)),
                                                      "the noise"), m)

    def rms_error(self) -> float:
        """``√E‖noise‖₂² = √d·σ`` (exact; no square is formed)."""
        with np.errstate(over="ignore"):
            return in_float_range(float(np.sqrt(self.d) * self.sigma), "the rms error", self.epsilon)

    def expected_squared_error(self) -> float:
        """``E‖noise‖₂² = d·σ²`` (exact)."""
        with np.errstate(over="ignore", under="ignore"):
            return in_float_range(float(self.d * np.float64(self.sigma) ** 2), "the expected squared error",
                                  self.epsilon)

    def expected_error(self, *, rms: bool = False) -> ErrorEstimate:
        """``E‖N(0, σ²I_d)‖₂ = σ√2 Γ((d+1)/2)/Γ(d/2)`` (exact); ``rms=True``: ``√E‖noise‖₂² = σ√d``."""
        if check_flag("rms", rms):
            return self._rms_estimate()
        try:
            value = expected_norm_gaussian(self.d, self.sigma)
        except ValueError:
            raise ValueError(f"the expected error overflows float64 at epsilon = {self.epsilon:g}") from None
        return ErrorEstimate(value, 0.0, True, "chi-distribution mean")
