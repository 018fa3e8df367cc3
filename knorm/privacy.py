"""Privacy accounting: trade-off functions, Gaussian DP and composition (docs/design.md §7).

* f-DP trade-off functions: :func:`tradeoff_eps_delta` (``f_{ε,δ}``) and
  :func:`tradeoff_gdp` (``G_μ``).
* μ-GDP ↔ (ε, δ): :func:`gdp_delta` (``δ(ε)`` for all ε), :func:`gdp_epsilon` (its inverse)
  and :func:`gdp_mu_for` (the smallest μ meeting a given (ε, δ)).
* Composition: :func:`gdp_compose` (``√Σμ_i²``), :func:`group_gdp` (``kμ``),
  :func:`basic_composition` and :func:`advanced_composition` for (ε, δ)-DP, and
  :func:`group_privacy` for (ε, δ)-DP.
* Claims: :class:`PrivacyClaim`, what a mechanism promises, as data (every mechanism's
  ``privacy``; also importable as ``knorm.PrivacyClaim`` and ``knorm.mechanisms.PrivacyClaim``).
* Budgets: :class:`BudgetAccountant` composes the releases of any number of mechanisms
  on one data set (basic composition) and refuses a release that would exceed its
  budget (:class:`BudgetExceededError`).
* Interop (optional extra ``pip install 'knorm[accounting]'``): :func:`epsilon_delta_dp_event`,
  :meth:`BudgetAccountant.to_dp_event` and ``PrivacyClaim.to_dp_event`` export claims as
  Google dp-accounting ``DpEvent`` objects, to be composed by its RDP or PLD accountants.

Arguments must be finite real numbers (bools, strings, complex, NaN and ±inf are refused
with a ValueError naming the argument); the one infinite value accepted is a
:class:`BudgetAccountant`'s budget ``epsilon=inf`` (no limit). A result that would leave
float64 (``e^ε`` of a huge ε, ``kμ`` past 1.8e308) is refused the same way, never returned
as inf or NaN; δ's are computed so that they saturate at 1 exactly where the math does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from ._validate import as_real_array, check_str, is_int, is_real, positive_int, short_repr
from .errors import BudgetExceededError, LargeEpsilonWarning

__all__ = ["tradeoff_eps_delta", "tradeoff_gdp", "gdp_delta", "gdp_epsilon", "gdp_mu_for", "gdp_compose",
           "group_gdp", "basic_composition", "advanced_composition", "group_privacy", "gaussian_mu",
           "BudgetAccountant", "BudgetExceededError", "Spend", "epsilon_delta_dp_event", "PrivacyClaim",
           "LARGE_EPSILON", "LargeEpsilonWarning"]

NEIGHBOURS = "‖x − x'‖₁ ≤ 1"  # the adjacency every claim uses (the data's ℓ₁ distance)
MAX_ANSWERS = 2**53  # answers a claim may count (exact in float64)
LARGE_EPSILON = 20.0  # ε per answer past this: answers essentially exact (LargeEpsilonWarning; claims say so)


def _real(name: str, v: Any) -> float:
    """A real scalar (Python or numpy, 0-d arrays included) as float; bools and strings refused."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if not is_real(v):
        raise ValueError(f"{name} must be a real number, got {short_repr(v)}")
    try:
        return float(v)
    except OverflowError:  # a Python int past float64
        raise ValueError(f"{name} = {short_repr(v)} is too large for float64") from None


def _array(name: str, v: ArrayLike, hi: float = np.inf) -> NDArray[np.float64]:
    """Real, finite values in ``[0, hi]`` as a float array (any shape), or a ValueError naming ``name``."""
    a = as_real_array(name, v)
    if a.dtype.kind == "b":
        raise ValueError(f"{name} must be real numbers, not bools, got {short_repr(v)}")
    try:
        a = a.astype(np.float64)
    except OverflowError:
        raise ValueError(f"{name} holds integers too large for float64") from None
    bad = ~(np.isfinite(a) & (a >= 0) & (a <= hi))
    if np.any(bad):
        want = "in [0, 1]" if hi == 1 else "non-negative finite numbers"
        first = float(np.atleast_1d(a)[np.atleast_1d(bad)][0])
        raise ValueError(f"{name} must be {want}, got {short_repr(first)}"
                         + (f" (an entry of shape {a.shape})" if a.ndim else ""))
    return a


def _count(name: str, k: Any) -> tuple[int, float]:
    """A positive integer count and its float value (refused past float64)."""
    k = positive_int(name, k)
    try:
        return k, float(k)
    except OverflowError:
        raise ValueError(f"{name} = {short_repr(k)} is too large for float64") from None


def _finite(value: float, what: str) -> float:
    """``value`` as float if finite, else a ValueError saying which arguments overflowed ``what``."""
    if not np.isfinite(value):
        raise ValueError(f"{what} exceeds float64 (about 1.8e308)")
    return float(value)


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
    a = _array("alpha", alpha, hi=1.0)
    with np.errstate(over="ignore", invalid="ignore"):  # e^ε·α for a huge ε: −inf, or α = 0 exactly
        first = np.where(a > 0, 1 - delta - np.exp(eps) * a, 1 - delta)
    return np.maximum(0.0, np.maximum(first, np.exp(-eps) * (1 - delta - a)))


def tradeoff_gdp(alpha: ArrayLike, mu: float) -> NDArray[np.float64]:
    """``G_μ(α) = Φ(Φ⁻¹(1 − α) − μ)``: the trade-off of N(0,1) vs N(μ,1)."""
    mu = _nonneg("mu", mu)
    a = _array("alpha", alpha, hi=1.0)
    from scipy import stats  # here, not at import: scipy.stats takes ≈ 1 s to import, and a release needs none of it

    return stats.norm.cdf(stats.norm.ppf(1 - a) - mu)


def gaussian_mu(sensitivity: float, sigma: float) -> float:
    """Gaussian noise N(0, σ²) on a query of ℓ₂ sensitivity Δ is (Δ/σ)-GDP."""
    sens = _nonneg("sensitivity", sensitivity)
    sd = _real("sigma", sigma)
    if not (np.isfinite(sd) and sd > 0):
        raise ValueError(f"sigma must be a positive finite number, got {sd}")
    mu = _finite(sens / sd, f"sensitivity/sigma = {sens:g}/{sd:g}")
    if mu == 0 and sens > 0:  # Δ/σ below 5e-324: claiming 0-GDP would be wrong
        raise ValueError(f"sensitivity/sigma = {sens:g}/{sd:g} underflows float64 (below 5e-324)")
    return mu


def gdp_delta(epsilon: ArrayLike, mu: float) -> float | NDArray[np.float64]:
    """``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``: μ-GDP ⇔ (ε, δ(ε))-DP for all ε >= 0."""
    mu = _nonneg("mu", mu)
    eps = _array("epsilon", epsilon)
    if mu == 0:
        return np.zeros_like(eps) if eps.ndim else 0.0
    # ε/μ may overflow to inf for a tiny μ: both terms are then 0 (no NaN: the exponent
    # ε + log Φ(−ε/μ − μ/2) <= ε/2 − ε²/(2μ²) − μ²/8 <= 0, so e^(…) never overflows)
    with np.errstate(over="ignore", divide="ignore"):
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
        if not np.isfinite(hi):  # ε ≈ μ²/2: past float64 for μ beyond ~1e154
            raise ValueError(f"mu = {mu:g}: the ε with δ(ε) <= {delta:g} exceeds float64 (about 1.8e308)")
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-13))


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The largest μ such that μ-GDP implies (ε, δ)-DP."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta, closed=False)
    # δ(ε; μ) increases from 0 (μ → 0) to 1 (μ → ∞): bracket the root by powers of 2
    lo = hi = 1.0
    if gdp_delta(eps, 1.0) < delta:
        while gdp_delta(eps, hi) < delta:  # μ ≈ √(2ε) at most: finite for every finite ε
            lo, hi = hi, 2 * hi
    else:
        while gdp_delta(eps, lo) >= delta:  # μ ≈ δ·√(2π) at least: > 0 for every δ > 0
            lo, hi = lo / 2, lo
    return float(optimize.brentq(lambda m: gdp_delta(eps, m) - delta, lo, hi, xtol=min(1e-14, lo * 1e-14)))


def gdp_compose(*mus: float) -> float:
    """Composition of μ_i-GDP mechanisms is ``√(Σ μ_i²)``-GDP (computed scale-free)."""
    arr = np.array([_nonneg("mus", m) for m in _items("mus", mus)], dtype=np.float64)
    top = float(arr.max()) if arr.size else 0.0
    if top == 0.0:
        return 0.0
    return _finite(top * np.sqrt(np.sum((arr / top) ** 2)), "the composed μ of mus")


def _items(name: str, values: Any) -> list[Any]:
    """The entries of a scalar, a sequence or an array (nested ones flattened), as given."""
    try:
        return list(np.ravel(np.asarray(values, dtype=object)))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} could not be read as a list of numbers: {exc}") from None


def group_gdp(mu: float, k: int) -> float:
    """A μ-GDP mechanism is kμ-GDP for groups of size k."""
    mu = _nonneg("mu", mu)
    _, kf = _count("k", k)
    return _finite(mu * kf, f"k·mu = {kf:g}·{mu:g}")


def basic_composition(epsilons: ArrayLike, deltas: ArrayLike | None = None) -> tuple[float, float]:
    """k mechanisms (ε_i, δ_i)-DP compose to (Σε_i, Σδ_i)-DP."""
    eps = np.array([_nonneg("epsilons", e) for e in _items("epsilons", epsilons)], dtype=np.float64)
    dl = np.zeros_like(eps) if deltas is None else np.array([_prob("deltas", d) for d in _items("deltas", deltas)],
                                                             dtype=np.float64)
    if len(dl) != len(eps):
        raise ValueError(f"epsilons and deltas must have the same length, got {len(eps)} and {len(dl)}")
    with np.errstate(over="ignore"):
        total = _finite(eps.sum(), "the sum of epsilons")
    return total, float(min(1.0, dl.sum()))


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> tuple[float, float]:
    """k-fold composition of (ε, δ)-DP is (ε', kδ + δ')-DP (Dwork, Rothblum & Vadhan) with
    ``ε' = ε √(2k ln(1/δ')) + k ε (e^ε − 1)``."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta)
    k, kf = _count("k", k)
    dp = _prob("delta_prime", delta_prime, closed=False)
    with np.errstate(over="ignore"):
        e = eps * np.sqrt(2 * kf * -np.log(dp)) + kf * eps * np.expm1(eps)
    e = _finite(e, f"the composed ε of epsilon = {eps:g}, k = {k} and delta_prime = {dp:g}")
    return e, float(min(1.0, kf * delta + dp))


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(ε, δ)-DP for individuals gives (kε, min(1, k e^{(k−1)ε} δ))-DP for groups of size k
    (the δ in log space: it saturates at 1 without overflow)."""
    eps = _nonneg("epsilon", epsilon)
    delta = _prob("delta", delta)
    k, kf = _count("k", k)
    group_eps = _finite(kf * eps, f"k·epsilon = {kf:g}·{eps:g}")
    if delta == 0:
        return group_eps, 0.0
    log_delta = np.log(kf) + (kf - 1) * eps + np.log(delta)  # may be +inf: then δ = 1
    return group_eps, float(min(1.0, np.exp(min(log_delta, 0.0))))


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
    eps = _nonneg("epsilon", epsilon)
    dl = _prob("delta", delta)
    dpa = dp_events()
    if dl > 0:
        return dpa.UnsupportedDpEvent()
    if eps == 0:
        return dpa.NoOpDpEvent()
    return dpa.DiscreteLaplaceDpEvent(noise_parameter=eps, sensitivity=1)


@dataclass(frozen=True)
class PrivacyClaim:
    """What a mechanism promises, as data.

    ``notion``: "pure ε-DP" or "(ε, δ)-DP"; ``neighbours``: the adjacency;
    ``sampling``: "exact" or "mcmc-approximate" (MCMC draws are only approximately
    from the target law, so the guarantee is approximate too); ``composition``: how
    the claim was composed, if it was; ``answers``: how many answers on the same data
    it covers (0: nothing released yet); ``noise_source``: "os-entropy", "seed" (a
    reproducible, NOT private run) or "generator" (caller-supplied: private only if it
    was seeded from OS entropy); ``certified``: False when an MCMC sampler run behind
    the answers failed its convergence check and the caller accepted it anyway;
    ``datasets``: how many disjoint data sets (regions) each answer was released on at once
    (``release_each``: parallel composition, one answer per data set, costs one answer's ε and δ;
    1 otherwise).
    """

    mechanism: str
    epsilon: float
    delta: float
    notion: str
    sampling: str
    neighbours: str = NEIGHBOURS
    composition: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    answers: int = 1
    noise_source: str = "os-entropy"
    certified: bool = True
    datasets: int = 1

    @property
    def exact(self) -> bool:
        return self.sampling == "exact"

    @property
    def epsilon_per_answer(self) -> float:
        """ε of one answer (the claim's ε over its answers; ε itself for 0 or 1 answers)."""
        return self.epsilon / self.answers if self.answers > 1 else self.epsilon

    @property
    def approximate(self) -> bool:
        """MCMC sampling: the guarantee holds only approximately (the draws are not exactly uniform)."""
        return not self.exact

    @property
    def private(self) -> bool:
        """False when the noise came from a known seed: anyone with the seed can subtract it."""
        return self.noise_source != "seed"

    def composed(self, k: int) -> PrivacyClaim:
        """The claim of ``k`` answers on the same data: basic composition, ``(kε, min(1, kδ))``;
        ``k`` an integer in [0, 2^53] (floats and bools are refused, not rounded)."""
        if not is_int(k) or not 0 <= k <= MAX_ANSWERS:
            raise ValueError(f"k must be an integer in [0, 2^53] (0: nothing released), got {short_repr(k)}")
        k = int(k)
        how = f"basic composition of {k} answer{'s' if k != 1 else ''} at ε = {self.epsilon:g}"
        how += f", δ = {self.delta:g} each" if self.delta else " each"
        if self.composition:
            how += f" (each: {self.composition})"
        return replace(self, epsilon=k * self.epsilon, delta=min(1.0, k * self.delta), answers=k,
                       composition=how)

    def parallel(self, k: int, basis: str = "") -> PrivacyClaim:
        """The claim of one answer on each of ``k`` disjoint data sets at once (parallel composition).

        The data is the tuple ``X = (x_1, …, x_k)``; neighbours differ in one data set by
        ``‖x_i − x'_i‖₁ ≤ 1`` (one record added or removed in one region, every record in one region).
        Answer i uses x_i alone and its own noise, so only one answer's law changes between
        neighbours: the batch is ``(ε, δ)``-DP with the ε, δ of one answer (McSherry 2009). Its
        DpEvent is one answer's. ``k`` an integer in [1, 2^53]; ``basis``: why the data sets are
        known to be disjoint (said in ``composition``)."""
        if not is_int(k) or not 1 <= k <= MAX_ANSWERS:
            raise ValueError(f"k must be an integer in [1, 2^53] (the number of data sets), got {short_repr(k)}")
        check_str("basis", basis)
        k = int(k)
        if k == 1:
            return self
        how = f"parallel composition over {k} disjoint data sets{f' ({basis})' if basis else ''}, one answer each"
        if self.composition:
            how += f" (each: {self.composition})"
        return replace(self, datasets=k, composition=how, neighbours=f"{self.neighbours} in one of {k} disjoint data sets")

    def to_dp_event(self) -> Any:
        """The claim as a Google dp-accounting ``DpEvent`` (``pip install 'knorm[accounting]'``).

        One answer: ``LaplaceDpEvent(b/Δ₁)`` for Laplace noise of scale b on a query of
        ℓ₁ sensitivity Δ₁ (details ``scale``, ``l1_sensitivity``; ε = Δ₁/b; the shift of
        d-dimensional Laplace noise by ‖v‖₁ ≤ Δ₁ is dominated by the shift of one coordinate
        by Δ₁), ``GaussianDpEvent(σ/Δ₂)`` for Gaussian noise (details ``sigma``,
        ``l2_sensitivity``; rotation invariance makes it one-dimensional), otherwise
        :func:`knorm.privacy.epsilon_delta_dp_event` of (ε, δ) (for pure ε-DP claims such as
        K-norm and NIM the pair of randomized response, tight for ε-DP).
        ``answers`` = k > 1: ``SelfComposedDpEvent(·, k)``;
        ``datasets`` > 1 (parallel composition) changes nothing: one answer's event per answer;
        0: ``NoOpDpEvent``; noise from a known seed: ``NonPrivateDpEvent``. An MCMC claim
        is exported as its ε: the event, like the claim, assumes exact uniform draws.
        Compose with dp-accounting's ``PLDAccountant()`` (or ``RdpAccountant`` for Laplace and
        Gaussian events).
        """
        dpa = dp_events()
        if not self.private:
            return dpa.NonPrivateDpEvent()
        if self.answers == 0:
            return dpa.NoOpDpEvent()
        eps1, dl1 = self.epsilon / self.answers, self.delta / self.answers  # one answer (see composed)
        d = self.details
        if self.exact and dl1 == 0 and d.get("scale") and d.get("l1_sensitivity") \
                and np.isclose(d["l1_sensitivity"] / d["scale"], eps1, rtol=1e-9, atol=0):
            event = dpa.LaplaceDpEvent(noise_multiplier=float(d["scale"] / d["l1_sensitivity"]))
        elif self.exact and d.get("sigma") and d.get("l2_sensitivity"):
            event = dpa.GaussianDpEvent(noise_multiplier=float(d["sigma"] / d["l2_sensitivity"]))
        else:
            event = epsilon_delta_dp_event(eps1, dl1)
        return event if self.answers == 1 else dpa.SelfComposedDpEvent(event, int(self.answers))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for summaries and output files)."""
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, "delta": self.delta, "notion": self.notion,
                "sampling": self.sampling, "approximate": self.approximate, "certified": self.certified,
                "answers": self.answers, "noise_source": self.noise_source, "private": self.private,
                "datasets": self.datasets, "neighbours": self.neighbours, "composition": self.composition,
                "details": self.details}

    def __str__(self) -> str:
        if not self.private:
            head = "NOT PRIVATE (noise from a known seed: a reproducible run) — otherwise "
        else:
            head = ""
        s = f"{head}{self.mechanism}: {self.notion} with ε = {self.epsilon:g}"
        if self.delta:
            s += f", δ = {self.delta:g}"
        s += f" for {self.answers} answer{'s' if self.answers != 1 else ''}"
        if self.datasets > 1:
            s += f" on each of {self.datasets} disjoint data sets"
        if self.exact:
            s += " (exact sampling"
        else:
            s += " (approximate: MCMC sampling" + ("" if self.certified else ", UNCERTIFIED run accepted")
            if self.details.get("stationary_start"):  # what a release from a certified body rests on
                s += f", {self.details['stationary_start']}"
            if self.details.get("spacing"):  # the per-run path's draws: not W apart along a chain (issue 51)
                s += f", {self.details['spacing']}"
        if "grid_exponent" in self.details:  # every released number a multiple of 2^k (design §10.1)
            k = int(self.details["grid_exponent"])
            s += f"; answers on the grid 2^{k}" + (f" up to ±2^{k + 53}, float64's spacing beyond" if k + 53 < 1024 else "")
        s += f"; neighbours {self.neighbours})"
        if self.epsilon_per_answer > LARGE_EPSILON:
            s += f"; ε > {LARGE_EPSILON:g} per answer: the answers are essentially exact (no meaningful privacy)"
        if self.composition:
            s += f"; {self.composition}"
        return s


@dataclass(frozen=True)
class Spend:
    """One entry of a :class:`BudgetAccountant`: ``(ε, δ)`` spent, by what, and (when a
    mechanism spent it) the :class:`~knorm.mechanisms.PrivacyClaim` of the release."""

    epsilon: float
    delta: float
    label: str = ""
    claim: PrivacyClaim | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _nonneg("epsilon", self.epsilon))
        object.__setattr__(self, "delta", _prob("delta", self.delta))

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
    mechanisms, adaptive or not). ``epsilon=inf`` (the default) sets no ε limit. A spend
    that would exceed the budget raises :class:`BudgetExceededError` and records nothing;
    a spend's δ may exceed 1 (k answers at δ each compose to kδ), which then counts as
    δ = 1 and exceeds any budget δ < 1. Pass it to a mechanism as
    ``accountant=``; mechanisms check it before drawing noise.
    """

    # slack for floating-point sums: ten releases at ε = 0.1 fit a budget of 1
    _SLACK = 1e-12
    _MAKING = threading.Lock()  # makes each accountant's own lock once

    def _mutex(self) -> Any:
        """This accountant's re-entrant lock (made on first use, never pickled): a spend's check and
        its record are one step, so threads sharing the accountant never pass the budget together."""
        lock = self.__dict__.get("_lock")
        if lock is None:
            with BudgetAccountant._MAKING:
                lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

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
        """Raise :class:`BudgetExceededError` if spending ``(epsilon, delta)`` would exceed the budget.

        ``delta`` may exceed 1 (a composition of δ's, kδ): it counts as ``min(1, delta)``.
        Returns ``(epsilon, min(1, delta))``."""
        eps = _nonneg("epsilon", epsilon)
        asked = _nonneg("delta", delta)
        dl = min(1.0, asked)
        e, d = self.total
        if e + eps > self.epsilon * (1 + self._SLACK) or min(1.0, d + dl) > self.delta * (1 + self._SLACK) + 1e-300:
            raise BudgetExceededError(
                f"budget exceeded: spending epsilon = {eps:g}, delta = {asked:g} on top of ε = {e:g}, δ = {d:g} "
                f"would pass the budget ε = {self.epsilon:g}, δ = {self.delta:g}")
        if not np.isfinite(e + eps):  # an unlimited budget: the total itself must stay a number
            raise ValueError(f"epsilon = {eps:g} on top of ε = {e:g} spent: the total exceeds float64")
        return eps, dl

    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              claim: PrivacyClaim | None = None) -> tuple[float, float]:
        """Record a release of ``(epsilon, delta)`` after :meth:`check` (``claim``: the
        release's :class:`~knorm.mechanisms.PrivacyClaim`, kept for :meth:`to_dp_event`)."""
        check_str("label", label)
        if claim is not None and not isinstance(claim, PrivacyClaim):
            raise TypeError(f"claim must be None or a knorm.PrivacyClaim, got {type(claim).__name__}")
        with self._mutex():
            eps, dl = self.check(epsilon, delta)
            self.spends.append(Spend(eps, dl, label, claim))
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
        with self._mutex():
            self.spends = []

    def __repr__(self) -> str:
        e, d = self.total
        return (f"BudgetAccountant(spent ε = {e:g}, δ = {d:g} of ε = {self.epsilon:g}, δ = {self.delta:g}; "
                f"{len(self.spends)} spend(s))")
