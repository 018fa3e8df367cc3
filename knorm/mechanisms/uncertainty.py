"""Per-answer uncertainty of a mechanism's answers (issue 50 item 3): standard errors and central
confidence intervals for every answer, raw or after a linear post-processing map P (least squares).

Everything here is a function of the public workload F, ε (δ), the mechanism's public noise law
and public seeds, never of the data: it costs no privacy and may be published with the tables.
Each mechanism describes its noise by a :class:`NoiseLaw`:

* :class:`LaplaceLaw`: noise ``W z``, z i.i.d. ``Lap(b)`` (W = I: the Laplace mechanism; ``W = F A⁺``:
  the strategy mechanisms). SE ``√2·b·‖W_i‖₂`` exactly; the interval of a raw Laplace answer is
  ``±b·ln(1/(1−level))`` exactly; any other W by simulation of exact Laplace draws (public seed).
* :class:`NormalLaw`: Gaussian noise ``σ·W g``: SE ``σ‖W_i‖₂`` and the interval
  ``±Φ⁻¹((1+level)/2)·SE``, both exact (a linear map of Gaussian noise is Gaussian).
* :class:`RadialLaw`: K-norm's ``r·z``, ``r ~ Gamma(k+1, 1/ε)``, z uniform in K: SE²
  ``(k+1)(k+2)/ε²·E z_i²`` with E[zzᵀ] exact (an exact structure) or the certified pool's; the
  law of ``r·z_i`` is not normal: its interval solves ``mean_j G(t/|w_j|) = level`` (G the Gamma
  CDF, exact in r; ``w_j`` the i-th coordinate of P z_j over uniform draws z_j, exact or MCMC).
* :class:`DrawsLaw`: any other noise (NIM, the residual Gaussian mechanisms): Monte Carlo over the
  mechanism's own noise draws (never released), normal quantiles where the noise is Gaussian.

Each estimate carries its Monte-Carlo standard error (0 where exact). A release's answers are
``fl(Fx) + noise`` rounded to the public grid ``γ <= s·2⁻¹⁰`` (docs/design.md §10.1): that rounding,
at most ``γ/2`` per answer, and the exactness grid of least squares (at most ``2⁻¹⁰`` of the
row's grain) are ignored here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from .._validate import as_real_array, is_real, short_repr

UNCERTAINTY_SEED = 20250503  # public seed of the simulations that use exact draws
SIM_DRAWS = 20_000           # simulation draws of an exact law (intervals of a non-closed form)
MCMC_DRAWS = 4000            # uniform draws of an MCMC body (as expected_error)
MAX_SIM_VALUES = 2**27       # values one simulation may hold (1 GiB of float64)
LOGCONCAVE_KURTOSIS = 6.0    # E z⁴ <= 6 (E z²)² for a symmetric log-concave z (the Laplace law's)

Matrix = NDArray[np.float64]


def check_level(level: Any) -> float:
    """``level`` as a float in (0, 1), else a one-line ValueError naming it."""
    v = float(level) if is_real(level) else float("nan")
    if not 0.0 < v < 1.0:
        raise ValueError(f"level must be a number in (0, 1) (the intervals' coverage), got {short_repr(level)}")
    return v


@dataclass(frozen=True)
class AnswerErrors:
    """One number per answer: standard errors (``level`` None) or interval half-widths at ``level``.

    ``value`` (d,) in answer units; ``stderr`` (d,): each value's Monte-Carlo standard error (0 where
    ``exact``); ``method``: how it was computed. A function of F, ε and public seeds only."""

    value: NDArray[np.float64]
    stderr: NDArray[np.float64]
    exact: bool
    method: str
    level: float | None = None

    def summary(self) -> dict[str, Any]:
        """min / median / max over the answers (and the largest Monte-Carlo SE): JSON-ready."""
        v = self.value
        return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max()),
                "max_stderr": float(self.stderr.max()), "exact": self.exact, "method": self.method,
                "level": self.level}

    def __str__(self) -> str:
        s = self.summary()
        what = "standard error" if self.level is None else f"{self.level:g} interval half-width"
        mc = "" if self.exact else f" (Monte-Carlo SE ≤ {s['max_stderr']:.2g})"
        return (f"per-answer {what}: min {s['min']:.4g}, median {s['median']:.4g}, max {s['max']:.4g}{mc} "
                f"({self.method})")


def _row_norms(W: Matrix) -> NDArray[np.float64]:
    """‖W_i‖₂ of every row, at unit scale (no square over- or underflows)."""
    top = float(np.max(np.abs(W))) if W.size else 0.0
    if not 0.0 < top < np.inf:
        return np.linalg.norm(W, axis=1)
    e = int(np.frexp(top)[1])
    return np.ldexp(np.linalg.norm(np.ldexp(W, -e), axis=1), e)


def _check_draws(n: int, width: int) -> None:
    if n * width > MAX_SIM_VALUES:
        raise ValueError(f"n_samples={n} draws of {width} values exceed the {MAX_SIM_VALUES:.2g} values one "
                         "simulation may hold: ask for fewer")


def abs_quantiles(draws: Matrix, level: float, ess: float | None = None) -> tuple[NDArray[np.float64],
                                                                                 NDArray[np.float64]]:
    """Per column: the ``level`` quantile q of |draws| (the central interval ±q of symmetric noise) and
    its standard error, half the spread of the order statistics ``n·level ± √(n·level(1−level))``
    (a binomial ±1 SD band; ``ess`` effective draws of n)."""
    a = np.sort(np.abs(draws), axis=0)
    n = len(a)
    m = n if ess is None else max(2.0, min(float(ess), n))
    band = np.sqrt(m * level * (1 - level)) * n / m  # ±1 SD of the count below q, in draws
    idx = np.clip(np.array([level * n - band, level * n, level * n + band]).round().astype(int) - 1, 0, n - 1)
    lo, q, hi = a[idx[0]], a[idx[1]], a[idx[2]]
    return q, (hi - lo) / 2.0


class NoiseLaw(ABC):
    """A mechanism's noise law, answering per-answer SEs and half-widths after a map P (None: I)."""

    @abstractmethod
    def standard_errors(self, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        """Per-answer SE of ``P·noise``."""

    @abstractmethod
    def half_widths(self, level: float, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        """Per-answer q with ``Pr(|(P·noise)_i| <= q) = level``."""


def _after(P: Matrix | None, W: Matrix | None, d: int) -> Matrix:
    """``P W`` (None: the identity) as a matrix."""
    if W is None:
        return np.eye(d) if P is None else P
    return W if P is None else P @ W


def _where(P: Matrix | None) -> str:
    return "" if P is None else ", after the linear post-processing P (covariance P Σ Pᵀ)"


@dataclass
class LaplaceLaw(NoiseLaw):
    """Noise ``W z`` with z i.i.d. ``Lap(b)`` (``W`` None: the identity on d answers)."""

    b: float
    d: int
    W: Matrix | None = None

    def standard_errors(self, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        if P is None and self.W is None:
            se = np.full(self.d, np.sqrt(2.0) * self.b)
        else:
            se = np.sqrt(2.0) * self.b * _row_norms(_after(P, self.W, self.d))
        return AnswerErrors(se, np.zeros_like(se), True, "exact: √2·b·‖W_i‖₂ (Laplace noise W z, z ~ Lap(b))"
                            + _where(P))

    def half_widths(self, level: float, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        if P is None and self.W is None:
            q = np.full(self.d, -self.b * np.log1p(-level))
            return AnswerErrors(q, np.zeros_like(q), True, "exact: b·ln(1/(1−level)) (i.i.d. Laplace)", level)
        W = _after(P, self.W, self.d)
        n = SIM_DRAWS if n_samples is None else n_samples
        _check_draws(n, W.shape[0] + W.shape[1])
        z = np.random.default_rng(UNCERTAINTY_SEED).laplace(0.0, 1.0, size=(n, W.shape[1]))
        q, se = abs_quantiles(z @ W.T, level)
        return AnswerErrors(self.b * q, self.b * se, False,
                            f"simulation: {n} exact Laplace draws (public seed) of W z{_where(P)}", level)


@dataclass
class NormalLaw(NoiseLaw):
    """Gaussian noise ``σ·W g``, g ~ N(0, I) (``W`` None: the identity on d answers)."""

    sigma: float
    d: int
    W: Matrix | None = None

    def standard_errors(self, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        se = (np.full(self.d, self.sigma) if P is None and self.W is None
              else self.sigma * _row_norms(_after(P, self.W, self.d)))
        return AnswerErrors(se, np.zeros_like(se), True, "exact: σ·‖W_i‖₂ (Gaussian noise)" + _where(P))

    def half_widths(self, level: float, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        se = self.standard_errors(P, n_samples).value
        q = float(special.ndtri((1.0 + level) / 2.0)) * se
        return AnswerErrors(q, np.zeros_like(q), True, "exact: Φ⁻¹((1+level)/2)·SE (Gaussian noise)" + _where(P),
                            level)


@dataclass
class RadialLaw(NoiseLaw):
    """K-norm noise ``r·z``: ``r ~ Gamma(k+1, 1/ε)``, z ~ Uniform(K), with ``z = factor·ε·B Z`` for span
    coordinates Z (``basis`` B (d, k), orthonormal; ``factor = 2^e·unit/ε``), so everything is
    computed at ε = 1 on Z and scaled once by ``factor``.

    ``second``: E[ZZᵀ] (k × k), exact or the certified pool's, with ``ess`` the pool's effective draws
    (None: exact); ``draws(m)``: (m draws of Z, their ESS, whether exact)."""

    k: int
    factor: float
    basis: Matrix
    second: Matrix | None
    ess: float | None
    draws: Callable[[int], tuple[Matrix, float, bool]]
    how: str

    def standard_errors(self, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        r2 = (self.k + 1) * (self.k + 2)  # E r² at ε = 1
        B = self.basis if P is None else P @ self.basis
        if self.second is not None and n_samples is None:
            v = np.maximum(np.einsum("ij,jk,ik->i", B, self.second, B), 0.0)  # diag(B C Bᵀ), no d × d matrix
            se = self.factor * np.sqrt(r2 * v)
            if self.ess is None:
                return AnswerErrors(se, np.zeros_like(se), True,
                                    f"exact: √((k+1)(k+2)·E z_i²)/ε, E[zzᵀ] of {self.how}" + _where(P))
            # Var(z_i²) <= 5 (E z_i²)² (z_i symmetric log-concave): SE(√v) <= √v·√5/(2√ESS)
            rel = np.sqrt(LOGCONCAVE_KURTOSIS - 1.0) / (2.0 * np.sqrt(self.ess))
            return AnswerErrors(se, se * rel, False,
                                f"√((k+1)(k+2)·E z_i²)/ε, E[zzᵀ] from {self.how} (SE bound from its ESS "
                                f"{self.ess:.0f} and the log-concave kurtosis bound)" + _where(P))
        n = MCMC_DRAWS if n_samples is None else n_samples
        _check_draws(n, self.k + B.shape[0])
        Z, ess, exact = self.draws(n)
        w2 = (Z @ B.T) ** 2
        m = w2.mean(axis=0)
        se_m = w2.std(axis=0, ddof=1) / np.sqrt(ess)
        se = self.factor * np.sqrt(r2 * m)
        stderr = np.where(m > 0, se * se_m / (2.0 * np.where(m > 0, m, 1.0)), 0.0)
        return AnswerErrors(se, stderr, False, f"√((k+1)(k+2)·E z_i²)/ε, E z_i² from {len(Z)} "
                            f"{'exact' if exact else 'MCMC'} draws of {self.how} (ESS {ess:.0f})" + _where(P))

    def half_widths(self, level: float, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        B = self.basis if P is None else P @ self.basis
        n = (SIM_DRAWS if self.ess is None and self.second is not None else MCMC_DRAWS) if n_samples is None \
            else n_samples
        _check_draws(n, self.k + 3 * B.shape[0])
        Z, ess, exact = self.draws(n)
        q, se = gamma_mixture_quantiles(np.abs(Z @ B.T), self.k + 1, level, ess)
        return AnswerErrors(self.factor * q, self.factor * se, False,
                            f"simulation: Pr(r|z_i| <= t) = mean_j G(t/|z_ij|) (G the Gamma(k+1) CDF, exact in r) "
                            f"over {n} {'exact' if exact else 'MCMC'} uniform draws of {self.how} (ESS {ess:.0f})"
                            + _where(P), level)


def gamma_mixture_quantiles(A: Matrix, shape: float, level: float, ess: float,
                            iterations: int = 8) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per column i: the t with ``p(t) = mean_j G(t/A_ji) = level`` (G the Gamma(shape, 1) CDF: the law
    of ``r·|w_i|`` over the draws ``A_·i = |w|``, exact in r), by Newton's method on all columns at once
    from the empirical quantile of ``r_j·A_ji`` (fresh r_j, public seed), each step kept within a factor
    2; and its delta-method standard error ``sd_j(G(t/A_ji))/√ess / p'(t)``."""
    a = np.maximum(A, np.finfo(float).tiny)  # a zero draw: r·0 <= t always, G(t/tiny) = G(∞) = 1
    r = np.random.default_rng(UNCERTAINTY_SEED + 1).gamma(shape, 1.0, size=(len(A), 1))
    t = np.quantile(r * A, level, axis=0)

    def at(t: NDArray[np.float64]) -> tuple[Matrix, NDArray[np.float64]]:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            u = t[None, :] / a
            G = special.gammainc(shape, u)
            dens = np.nan_to_num(np.exp(special.xlogy(shape - 1, u) - u - special.gammaln(shape)) / a).mean(axis=0)
        return G, dens

    for _ in range(iterations):
        G, dens = at(t)
        step = np.where(dens > 0, (G.mean(axis=0) - level) / np.where(dens > 0, dens, 1.0), 0.0)
        t = np.clip(t - step, t / 2, 2 * t)
    G, dens = at(t)
    se = np.where(dens > 0, G.std(axis=0, ddof=1) / np.sqrt(ess) / np.where(dens > 0, dens, 1.0), 0.0)
    return t, se


@dataclass
class DrawsLaw(NoiseLaw):
    """Any noise, by Monte Carlo over the mechanism's own noise draws ``draw(m)`` (m, d) (never
    released); ``normal``: the noise is Gaussian (intervals from normal quantiles of the SE)."""

    draw: Callable[[int], Matrix]
    normal: bool
    how: str
    default: int = MCMC_DRAWS

    def _draws(self, P: Matrix | None, n_samples: int | None) -> Matrix:
        n = self.default if n_samples is None else n_samples
        E = self.draw(n)
        _check_draws(n, E.shape[1] + (0 if P is None else P.shape[0]))
        return E if P is None else E @ P.T

    def standard_errors(self, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        E = self._draws(P, n_samples)
        s = max(float(np.max(np.abs(E))), np.finfo(float).tiny)  # squares at unit scale
        m = np.mean((E / s) ** 2, axis=0)  # the mean is 0: the noise is symmetric
        se_m = np.std((E / s) ** 2, axis=0, ddof=1) / np.sqrt(len(E))
        se = s * np.sqrt(m)
        stderr = np.where(m > 0, se * se_m / (2.0 * np.where(m > 0, m, 1.0)), 0.0)
        return AnswerErrors(se, stderr, False, f"Monte Carlo: √mean(noise_i²) over {len(E)} {self.how}" + _where(P))

    def half_widths(self, level: float, P: Matrix | None, n_samples: int | None) -> AnswerErrors:
        if self.normal:
            e = self.standard_errors(P, n_samples)
            z = float(special.ndtri((1.0 + level) / 2.0))
            return AnswerErrors(z * e.value, z * e.stderr, False,
                                f"Φ⁻¹((1+level)/2)·SE (Gaussian noise), SE by {e.method}", level)
        E = self._draws(P, n_samples)
        q, se = abs_quantiles(E, level)
        return AnswerErrors(q, se, False, f"simulation: quantile of |noise_i| over {len(E)} {self.how}"
                            + _where(P), level)


def intervals(answers: ArrayLike, half: AnswerErrors) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(answers − q, answers + q)`` for answers (d,) or (m, d) and half-widths q (d,)."""
    a = as_real_array("answers", answers).astype(np.float64)
    d = len(half.value)
    if a.ndim not in (1, 2) or a.shape[-1] != d:
        raise ValueError(f"answers must have shape ({d},) or (m, {d}) (one answer per query), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("answers contains NaN or infinite entries")
    return a - half.value, a + half.value
