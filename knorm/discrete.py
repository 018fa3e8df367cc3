"""Discrete mechanisms of the source material (docs/design.md §7), vectorised over respondents.

* :class:`RandomizedResponse` -- two-coin (ln 3-DP) or k-ary with parameter ε: report
  the truth w.p. ``e^ε/(e^ε + k − 1)``, else one of the other k − 1 values uniformly.
* :class:`FiniteDomainMechanism` -- m + 1 values; report the truth w.p. ``1 − m·p`` and
  each other value w.p. p, with the smallest p for (ε, δ)-DP: ``p = (1 − δ)/(m + e^ε)``.

Both are local mechanisms: neighbours are one respondent's value changing. Both give
unbiased estimators of the true value frequencies from the reports. Probabilities are
computed from ``e^{−ε}`` so that any ε (even ε ≥ 710, where ``e^ε`` overflows) works.
Each :meth:`release` answers every respondent once; ``privacy`` composes the calls.
"""

import numpy as np

from ._rng import as_generator
from ._validate import is_int, is_real
from .mechanisms._base import Accounted, PrivacyClaim, check_epsilon

LOCAL = "one respondent's value changes"


def _values(v, k):
    arr = np.asarray(v)
    if arr.dtype.kind not in "biu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"values must be integers in [0, {k}), got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= k):
        raise ValueError(f"values must lie in [0, {k}); got range [{arr.min()}, {arr.max()}]")
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
        if not is_int(k) or k < 2:
            raise ValueError(f"k must be an integer >= 2, got {k!r}")
        self.k = int(k)
        self.epsilon = check_epsilon(epsilon)
        # e^ε/(e^ε + k − 1) = 1/(1 + (k − 1)e^{−ε}): no overflow for large ε
        w = np.exp(-self.epsilon)
        self.p_truth = 1.0 / (1.0 + (self.k - 1) * w)
        self.p_other = w / (1.0 + (self.k - 1) * w)
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
        v = _values(values, self.k)
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
        probabilities, so ``π̂_j = (f̂_j − q)/(p − q)``.
        """
        r = _values(reports, self.k).ravel()
        if r.size == 0:
            raise ValueError("no reports")
        f = np.bincount(r, minlength=self.k) / r.size
        return (f - self.p_other) / (self.p_truth - self.p_other)


class FiniteDomainMechanism(Accounted):
    """Report the true value of {0, …, m} w.p. ``1 − m·p``, each other value w.p. p.

    (ε, δ)-DP iff ``p >= (1 − δ)/(m + e^ε)``; this uses the smallest such p. Expected
    error in the discrete metric is ``m·p``, which meets the lower bound
    ``(1 − δ)·κ·m/(m + e^ε)`` (κ = 1, the distance between distinct values).
    """

    def __init__(self, m, *, epsilon, delta=0.0, rng=None, accountant=None):
        if not is_int(m) or m < 1:
            raise ValueError(f"m must be a positive integer (m + 1 values), got {m!r}")
        self.m = int(m)
        self.epsilon = check_epsilon(epsilon)
        if not is_real(delta) or not 0.0 <= delta < 1.0:
            raise ValueError(f"delta must be a number in [0, 1), got {delta!r}")
        self.delta = float(delta)
        # (1 − δ)/(m + e^ε) = (1 − δ)e^{−ε}/(1 + m e^{−ε}): no overflow for large ε
        w = np.exp(-self.epsilon)
        self.p = (1.0 - self.delta) * w / (1.0 + self.m * w)
        self.p_truth = 1.0 - self.m * self.p
        self._rng = as_generator(rng)
        self._init_accounting(rng, accountant)
        self._claim = PrivacyClaim("finite domain", self.epsilon, self.delta,
                                    "pure ε-DP (local)" if self.delta == 0 else "(ε, δ)-DP (local)", "exact",
                                    neighbours=LOCAL, details={"m": self.m, "p": self.p})

    def release(self, values):
        """One report per respondent (same shape as ``values``); counts as one answer each."""
        v = _values(values, self.m + 1)
        self._check_budget(1)
        out = _report_other(v, self._rng.random(v.shape) < self.p_truth, self.m + 1, self._rng)
        self._spend(1)
        return out

    def expected_error(self):
        """``P(report ≠ truth) = m·p`` (exact)."""
        return self.m * self.p

    def lower_bound(self, kappa=1.0):
        """``(1 − δ)·κ·m/(m + e^ε)``: no (ε, δ)-DP mechanism on m + 1 values errs less."""
        return kappa * self.m * self.p  # = (1 − δ)κm/(m + e^ε), without overflow

    def privacy_profile(self, epsilon):
        """Exact δ(ε') of this mechanism: ``max(0, 1 − m p − e^{ε'} p)``.

        ``e^{ε'}p = (1 − δ)e^{ε'−ε}/(1 + m e^{−ε})`` is computed without overflow.
        """
        w = np.exp(-self.epsilon)
        tail = (1.0 - self.delta) * np.exp(min(float(epsilon) - self.epsilon, 709.0)) / (1.0 + self.m * w)
        return max(0.0, self.p_truth - tail)

    def estimate_frequencies(self, reports):
        """Unbiased: E f̂_j = p + (1 − (m+1)p)·π_j, so ``π̂_j = (f̂_j − p)/(1 − (m+1)p)``."""
        r = _values(reports, self.m + 1).ravel()
        if r.size == 0:
            raise ValueError("no reports")
        f = np.bincount(r, minlength=self.m + 1) / r.size
        return (f - self.p) / (1.0 - (self.m + 1) * self.p)
