"""Privacy accounting: trade-off functions, Gaussian DP and composition (docs/design.md §7).

* f-DP trade-off functions: :func:`tradeoff_eps_delta` (``f_{ε,δ}``) and
  :func:`tradeoff_gdp` (``G_μ``).
* μ-GDP ↔ (ε, δ): :func:`gdp_delta` (``δ(ε)`` for all ε), :func:`gdp_epsilon` (its inverse)
  and :func:`gdp_mu_for` (the smallest μ meeting a given (ε, δ)).
* Composition: :func:`gdp_compose` (``√Σμ_i²``), :func:`group_gdp` (``kμ``),
  :func:`basic_composition` and :func:`advanced_composition` for (ε, δ)-DP, and
  :func:`group_privacy` for (ε, δ)-DP.
* Budgets: :class:`BudgetAccountant` composes the releases of any number of mechanisms
  on one data set (basic composition) and refuses a release that would exceed its
  budget (:class:`BudgetExceededError`).
* Interop (optional extra ``pip install 'knorm[accounting]'``): :func:`epsilon_delta_dp_event`,
  :meth:`BudgetAccountant.to_dp_event` and ``PrivacyClaim.to_dp_event`` export claims as
  Google dp-accounting ``DpEvent`` objects, to be composed by its RDP or PLD accountants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

from ._validate import is_real

if TYPE_CHECKING:
    from .mechanisms._base import PrivacyClaim

__all__ = ["tradeoff_eps_delta", "tradeoff_gdp", "gdp_delta", "gdp_epsilon", "gdp_mu_for", "gdp_compose",
           "group_gdp", "basic_composition", "advanced_composition", "group_privacy", "gaussian_mu",
           "BudgetAccountant", "BudgetExceededError", "Spend", "epsilon_delta_dp_event"]


def _real(name: str, v: Any) -> float:
    """A real scalar (Python or numpy, 0-d arrays included) as float; bools and strings refused."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if not is_real(v):
        raise ValueError(f"{name} must be a real number, got {v!r}")
    return float(v)


def _nonneg(name: str, v: Any, allow_inf: bool = False) -> float:
    v = _real(name, v)
    if np.isnan(v) or v < 0 or (not allow_inf and not np.isfinite(v)):
        raise ValueError(f"{name} must be a non-negative finite number, got {v}")
    return v


def _prob(name: str, v: Any, closed: bool = True) -> float:
    v = _real(name, v)
    if not (0.0 <= v <= 1.0 if closed else 0.0 < v < 1.0):
        raise ValueError(f"{name} must be in {'[0, 1]' if closed else '(0, 1)'}, got {v}")
    return v


def tradeoff_eps_delta(alpha: ArrayLike, epsilon: float, delta: float = 0.0) -> NDArray[np.float64]:
    """``f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)}`` (vectorised in α)."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta)
    a = np.asarray(alpha, float)
    if np.any((a < 0) | (a > 1)):
        raise ValueError("alpha must lie in [0, 1]")
    return np.maximum(0.0, np.maximum(1 - delta - np.exp(eps) * a, np.exp(-eps) * (1 - delta - a)))


def tradeoff_gdp(alpha: ArrayLike, mu: float) -> NDArray[np.float64]:
    """``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)``: the trade-off of N(0,1) vs N(μ,1)."""
    mu = _nonneg("mu", mu)
    a = np.asarray(alpha, float)
    if np.any((a < 0) | (a > 1)):
        raise ValueError("alpha must lie in [0, 1]")
    return stats.norm.cdf(stats.norm.ppf(1 - a) - mu)


def gaussian_mu(sensitivity: float, sigma: float) -> float:
    """Gaussian noise N(0, σ²) on a query of ℓ₂ sensitivity Δ is (Δ/σ)-GDP."""
    if sigma <= 0 or sensitivity < 0:
        raise ValueError("need sigma > 0 and sensitivity >= 0")
    return float(sensitivity) / float(sigma)


def gdp_delta(epsilon: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``: μ-GDP ⇔ (ε, δ(ε))-DP for all ε >= 0."""
    mu = _nonneg("mu", mu)
    eps = np.asarray(epsilon, float)
    if np.any(eps < 0):
        raise ValueError("epsilon must be non-negative")
    if mu == 0:
        return np.zeros_like(eps) if eps.ndim else 0.0
    out = special.ndtr(-eps / mu + mu / 2) - np.exp(eps + special.log_ndtr(-eps / mu - mu / 2))
    out = np.maximum(out, 0.0)
    return out if out.ndim else float(out)


def gdp_epsilon(delta: float, mu: float) -> float:
    """The smallest ε with ``δ(ε) <= delta`` for a μ-GDP mechanism."""
    mu = _nonneg("mu", mu)
    delta = _prob("delta", delta, closed=False)
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-13))


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The largest μ such that μ-GDP implies (ε, δ)-DP."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta, closed=False)
    hi = 1.0
    while gdp_delta(eps, hi) < delta:
        hi *= 2
    return float(optimize.brentq(lambda m: gdp_delta(eps, m) - delta, 1e-12, hi, xtol=1e-14))


def gdp_compose(*mus: float) -> float:
    """Composition of μ_i-GDP mechanisms is ``√(Σ μ_i²)``-GDP."""
    arr = np.array([_nonneg("mu", m) for m in np.ravel(mus)])
    return float(np.sqrt(np.sum(arr**2)))


def group_gdp(mu: float, k: int) -> float:
    """A μ-GDP mechanism is kμ-GDP for groups of size k."""
    return float(_nonneg("mu", mu) * _positive_int("k", k))


def _positive_int(name: str, k: Any) -> int:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def basic_composition(epsilons: ArrayLike, deltas: ArrayLike | None = None) -> tuple[float, float]:
    """k mechanisms (ε_i, δ_i)-DP compose to (Σε_i, Σδ_i)-DP."""
    eps = np.array([_nonneg("epsilon", e) for e in np.ravel(epsilons)])
    dl = np.zeros_like(eps) if deltas is None else np.array([_prob("delta", d) for d in np.ravel(deltas)])
    if len(dl) != len(eps):
        raise ValueError("epsilons and deltas must have the same length")
    return float(eps.sum()), float(min(1.0, dl.sum()))


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> tuple[float, float]:
    """k-fold composition of (ε, δ)-DP is (ε', kδ + δ')-DP (Dwork, Rothblum & Vadhan) with
    ``ε' = ε √(2k ln(1/δ')) + k ε (e^ε − 1)``."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta)
    k = _positive_int("k", k)
    dp = _prob("delta_prime", delta_prime, closed=False)
    e = eps * np.sqrt(2 * k * np.log(1 / dp)) + k * eps * np.expm1(eps)
    return float(e), float(min(1.0, k * delta + dp))


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(ε, δ)-DP for individuals gives (kε, k e^{(k−1)ε} δ)-DP for groups of size k."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta)
    k = _positive_int("k", k)
    return float(k * eps), float(min(1.0, k * np.exp((k - 1) * eps) * delta))


def dp_events() -> Any:
    """dp-accounting's ``dp_event`` module (imported on first use; an optional extra)."""
    try:
        from dp_accounting import dp_event as dpa
    except ImportError:
        raise ImportError("DpEvent export needs dp-accounting, which is not installed: "
                          "pip install 'knorm[accounting]'") from None
    return dpa


def epsilon_delta_dp_event(epsilon: float, delta: float = 0.0) -> Any:
    """The dp-accounting ``DpEvent`` of a mechanism known only to be ``(ε, δ)``-DP.

    Pure ε-DP (δ = 0): ``DiscreteLaplaceDpEvent(noise_parameter=ε, sensitivity=1)``.
    Discrete Laplace noise ∝ e^{−ε|z|} on integers shifted by 1 has privacy loss
    ``ε(|z−1| − |z|) = ±ε`` only, +ε with probability ``e^ε/(1 + e^ε)``: the pair of binary
    randomized response, whose trade-off function is exactly ``f_{ε,0}``
    (:func:`tradeoff_eps_delta`). It dominates every ε-DP mechanism, and accountants
    compose it optimally (Kairouz, Oh & Viswanath 2015). ``ε = δ = 0``: ``NoOpDpEvent``.
    δ > 0: dp-accounting has no event for a bare (ε, δ) pair, so ``UnsupportedDpEvent``
    (its accountants then refuse the composition rather than under-count it).

    Compose these with dp-accounting's ``PLDAccountant()`` (its default neighbouring
    relation; its ``RdpAccountant`` takes the Laplace and Gaussian events but not this one).
    """
    dpa = dp_events()
    eps = _nonneg("epsilon", epsilon)
    dl = _prob("delta", delta)
    if dl > 0:
        return dpa.UnsupportedDpEvent()
    if eps == 0:
        return dpa.NoOpDpEvent()
    return dpa.DiscreteLaplaceDpEvent(noise_parameter=eps, sensitivity=1)


class BudgetExceededError(ValueError):
    """A release would take a :class:`BudgetAccountant` past its (ε, δ) budget."""


@dataclass(frozen=True)
class Spend:
    """One entry of a :class:`BudgetAccountant`: ``(ε, δ)`` spent, by what, and (when a
    mechanism spent it) the :class:`~knorm.mechanisms.PrivacyClaim` of the release."""

    epsilon: float
    delta: float
    label: str = ""
    claim: PrivacyClaim | None = field(default=None, compare=False, repr=False)

    def to_dp_event(self) -> Any:
        """The release as a dp-accounting ``DpEvent``: its claim's
        (``PrivacyClaim.to_dp_event``), else :func:`epsilon_delta_dp_event`."""
        if self.claim is not None:
            return self.claim.to_dp_event()
        return epsilon_delta_dp_event(self.epsilon, self.delta)


class BudgetAccountant:
    """A privacy budget for one data set, shared by the mechanisms that release from it.

    ``BudgetAccountant(epsilon=inf, delta=0.0)`` (keyword-only, as in diffprivlib):
    every release spends its ``(ε_i, δ_i)`` and the total is their basic composition
    ``(Σε_i, min(1, Σδ_i))`` (valid for any mix of pure and approximate DP
    mechanisms, adaptive or not). A spend that would exceed the budget raises
    :class:`BudgetExceededError` and records nothing. Pass it to a mechanism as
    ``accountant=``; mechanisms check it before drawing noise.
    """

    # slack for floating-point sums: ten releases at ε = 0.1 fit a budget of 1
    _SLACK = 1e-12

    def __init__(self, *, epsilon: float = float("inf"), delta: float = 0.0) -> None:
        self.epsilon = _nonneg("epsilon", epsilon, allow_inf=True)
        self.delta = _prob("delta", delta)
        self.spends: list[Spend] = []

    @property
    def total(self) -> tuple[float, float]:
        """``(Σε_i, min(1, Σδ_i))`` over everything spent so far."""
        return (float(sum(s.epsilon for s in self.spends)),
                float(min(1.0, sum(s.delta for s in self.spends))))

    @property
    def remaining(self) -> tuple[float, float]:
        """What is left of the budget: ``(ε − Σε_i, δ − Σδ_i)``, never negative."""
        e, d = self.total
        return max(0.0, self.epsilon - e), max(0.0, self.delta - d)

    def check(self, epsilon: float, delta: float = 0.0) -> tuple[float, float]:
        """Raise :class:`BudgetExceededError` if spending ``(epsilon, delta)`` would exceed the budget."""
        eps = _nonneg("epsilon", epsilon)
        dl = _prob("delta", delta)
        e, d = self.total
        if e + eps > self.epsilon * (1 + self._SLACK) or d + dl > self.delta * (1 + self._SLACK) + 1e-300:
            raise BudgetExceededError(
                f"budget exceeded: spending ε = {eps:g}, δ = {dl:g} on top of ε = {e:g}, δ = {d:g} "
                f"would pass the budget ε = {self.epsilon:g}, δ = {self.delta:g}")
        return eps, dl

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              claim: PrivacyClaim | None = None) -> tuple[float, float]:
        """Record a release of ``(epsilon, delta)`` after :meth:`check` (``claim``: the
        release's :class:`~knorm.mechanisms.PrivacyClaim`, kept for :meth:`to_dp_event`)."""
        eps, dl = self.check(epsilon, delta)
        self.spends.append(Spend(eps, dl, str(label), claim))
        return self.total

    def to_dp_event(self) -> Any:
        """Everything spent as one dp-accounting ``ComposedDpEvent`` (one event per spend,
        :meth:`Spend.to_dp_event`), for a tighter composition than :attr:`total`'s basic
        one: ``PLDAccountant().compose(acc.to_dp_event()).get_epsilon(δ)``.
        Needs the ``accounting`` extra."""
        dpa = dp_events()
        return dpa.ComposedDpEvent([s.to_dp_event() for s in self.spends])

    def reset(self) -> None:
        """Forget every spend (a new data set)."""
        self.spends = []

    def __repr__(self) -> str:
        e, d = self.total
        return (f"BudgetAccountant(spent ε = {e:g}, δ = {d:g} of ε = {self.epsilon:g}, δ = {self.delta:g}; "
                f"{len(self.spends)} spend(s))")
