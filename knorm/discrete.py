"""Discrete mechanisms of the source material (docs/design.md §7), vectorised over respondents.

* :class:`RandomizedResponse` -- two-coin (ln 3-DP) or k-ary with parameter ε: report
  the truth w.p. ``e^ε/(e^ε + k − 1)``, else one of the other k − 1 values uniformly.
* :class:`FiniteDomainMechanism` -- m + 1 values; report the truth w.p. ``1 − m·p`` and
  each other value w.p. p, with the smallest p for (ε, δ)-DP: ``p = (1 − δ)/(m + e^ε)``.

Both are local mechanisms: neighbours are one respondent's value changing. Both give
unbiased estimators of the true value frequencies from the reports. Probabilities are
computed from ``e^{−ε}`` and ``1 − e^{−ε}`` (``expm1``) so that any finite ε > 0 works
(ε ≥ 710, where ``e^ε`` overflows, and ε = 1e-300, where ``e^{−ε}`` rounds to 1); an
estimate that leaves float64 (ε below about 1e-308) is refused, never returned as ±inf.
Domains hold at most 2^53 values (integers exact in float64).
Each :meth:`release` answers every respondent once; ``privacy`` composes the calls.
"""

import numpy as np

from ._rng import as_generator
from ._validate import check_memory, is_int, is_real, records_array, short_repr
from .mechanisms._base import Accounted, PrivacyClaim, check_epsilon
from .privacy import _nonneg

LOCAL = "one respondent's value changes"
MAX_VALUES = 2**53  # domain sizes: integers exact in float64


def _size(name, value, low, high=MAX_VALUES):
    """A domain-size integer in ``[low, high]``, or a ValueError naming ``name``."""
    if not is_int(value) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {short_repr(value)}")
    return int(value)


def _estimate(reports, size, parameter, numerator, denominator, epsilon):
    """``(f·numerator[0] − numerator[1]) / denominator`` for the report frequencies f over
    ``size`` values (memory checked first, naming ``parameter = (name, value)`` of the
    domain size); a non-finite estimate is refused."""
    check_memory(*parameter, 24 * size)
    r = _values("reports", reports, size).ravel()
    if r.size == 0:
        raise ValueError("no reports: reports is empty")
    f = np.bincount(r, minlength=size) / r.size
    with np.errstate(over="ignore"):
        out = (f * numerator[0] - numerator[1]) / denominator
    if not np.all(np.isfinite(out)):
        raise ValueError(f"epsilon = {epsilon:g} is too small: the unbiased estimate exceeds float64")
    return out


def _values(name, v, k):
    """``v`` as int64 codes in ``[0, k)`` (integers, bools, or integral floats), else a ValueError naming ``name``."""
    arr = records_array(name, v)
    integral = arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
    if arr.dtype.kind not in "biu" and not integral:
        raise ValueError(f"{name} must be integers in [0, {k}), got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= k):
        raise ValueError(f"{name} must lie in [0, {k}); some do not (which, is not shown: they may be private)")
    return arr.astype(np.int64)


def _report_other(truth, keep, k, rng):
    """Where ``keep`` is False, replace truth by a uniform value among the other k − 1."""
    other = rng.integers(0, k - 1, size=truth.shape)
    other += other >= truth  # skip the true value
    return np.where(keep, truth, other)


class RandomizedResponse(Accounted):
    """Randomized response over k values (k = 2: yes/no).

    ``RandomizedResponse(k=2, epsilon=ε)``: truthful w.p. ``e^ε/(e^ε + k − 1)``.
    ``RandomizedResponse.two_coin()``: flip a coin; heads, answer truthfully; tails, flip
    again and answer "yes" on heads. Truthful w.p. 3/4, so ε = ln 3.
    """

    def __init__(self, *, k=2, epsilon, rng=None, accountant=None):
        self.k = _size("k", k, 2)
        self.epsilon = check_epsilon(epsilon)
        # e^ε/(e^ε + k − 1) = 1/(1 + (k − 1)e^{−ε}): no overflow for large ε
        w = np.exp(-self.epsilon)
        self._denominator = 1.0 + (self.k - 1) * w
        self.p_truth = 1.0 / self._denominator
        self.p_other = w / self._denominator
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)
        self._two_coin = False
        self._claim = PrivacyClaim("randomized response", self.epsilon, 0.0, "pure ε-DP (local)", "exact",
                                    neighbours=LOCAL, details={"k": self.k, "p_truth": self.p_truth})

    @classmethod
    def two_coin(cls, *, rng=None, accountant=None):
        rr = cls(k=2, epsilon=np.log(3.0), rng=rng, accountant=accountant)
        rr._two_coin = True
        return rr

    def release(self, values):
        """One report per respondent (same shape as ``values``); counts as one answer each."""
        v = _values("values", values, self.k)
        self._check_budget(1)
        if self._two_coin:
            first = self._rng.random(v.shape) < 0.5
            second = (self._rng.random(v.shape) < 0.5).astype(np.int64)
            out = np.where(first, v, second)
        else:
            out = _report_other(v, self._rng.random(v.shape) < self.p_truth, self.k, self._rng)
        self._spend(1)
        return out

    def estimate_frequencies(self, reports):
        """Unbiased estimate of the fraction of respondents holding each value.

        E[report frequency of j] = q + (p − q)·π_j with p, q the truth / other
        probabilities, so ``π̂_j = (f̂_j − q)/(p − q)``, computed as
        ``(f̂_j (1 + (k − 1)e^{−ε}) − e^{−ε}) / (1 − e^{−ε})`` (no cancellation at small ε).
        """
        w = np.exp(-self.epsilon)
        return _estimate(reports, self.k, ("k", self.k), (self._denominator, w), -np.expm1(-self.epsilon), self.epsilon)


class FiniteDomainMechanism(Accounted):
    """Report the true value of {0, …, m} w.p. ``1 − m·p``, each other value w.p. p.

    (ε, δ)-DP iff ``p >= (1 − δ)/(m + e^ε)``; this uses the smallest such p. Expected
    error in the discrete metric is ``m·p``, which meets the lower bound
    ``(1 − δ)·κ·m/(m + e^ε)`` (κ = 1, the distance between distinct values).
    """

    def __init__(self, m, *, epsilon, delta=0.0, rng=None, accountant=None):
        self.m = _size("m", m, 1, MAX_VALUES - 1)
        self.epsilon = check_epsilon(epsilon)
        if not is_real(delta) or not 0.0 <= delta < 1.0:
            raise ValueError(f"delta must be a number in [0, 1), got {short_repr(delta)}")
        self.delta = float(delta)
        # (1 − δ)/(m + e^ε) = (1 − δ)e^{−ε}/(1 + m e^{−ε}): no overflow for large ε
        w = np.exp(-self.epsilon)
        self.p = (1.0 - self.delta) * w / (1.0 + self.m * w)
        self.p_truth = (1.0 + self.m * self.delta * w) / (1.0 + self.m * w)  # = 1 − m·p, no cancellation
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)
        self._claim = PrivacyClaim("finite domain", self.epsilon, self.delta,
                                    "pure ε-DP (local)" if self.delta == 0 else "(ε, δ)-DP (local)", "exact",
                                    neighbours=LOCAL, details={"m": self.m, "p": self.p})

    def release(self, values):
        """One report per respondent (same shape as ``values``); counts as one answer each."""
        v = _values("values", values, self.m + 1)
        self._check_budget(1)
        out = _report_other(v, self._rng.random(v.shape) < self.p_truth, self.m + 1, self._rng)
        self._spend(1)
        return out

    def expected_error(self):
        """``P(report ≠ truth) = m·p`` (exact)."""
        return self.m * self.p

    def lower_bound(self, kappa=1.0):
        """``(1 − δ)·κ·m/(m + e^ε)``: no (ε, δ)-DP mechanism on m + 1 values errs less."""
        return _nonneg("kappa", kappa) * self.m * self.p  # = (1 − δ)κm/(m + e^ε), without overflow

    def privacy_profile(self, epsilon):
        """Exact δ(ε') of this mechanism: ``max(0, 1 − m p − e^{ε'} p)``.

        ``e^{ε'}p = (1 − δ)e^{ε'−ε}/(1 + m e^{−ε})`` is computed without overflow.
        """
        eps = _nonneg("epsilon", epsilon)
        w = np.exp(-self.epsilon)
        tail = (1.0 - self.delta) * np.exp(min(eps - self.epsilon, 709.0)) / (1.0 + self.m * w)
        return max(0.0, self.p_truth - tail)

    def estimate_frequencies(self, reports):
        """Unbiased: E f̂_j = p + (1 − (m+1)p)·π_j, so ``π̂_j = (f̂_j − p)/(1 − (m+1)p)``, computed
        as ``(f̂_j (1 + m e^{−ε}) − (1 − δ)e^{−ε}) / (1 − e^{−ε} + (m + 1)δ e^{−ε})`` (no cancellation)."""
        w = np.exp(-self.epsilon)
        return _estimate(reports, self.m + 1, ("m", self.m), (1.0 + self.m * w, (1.0 - self.delta) * w),
                         -np.expm1(-self.epsilon) + (self.m + 1) * self.delta * w, self.epsilon)
