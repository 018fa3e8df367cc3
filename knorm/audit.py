"""Empirical privacy audit: a statistical lower bound on ε from samples (MATH.md §7).

For neighbouring inputs the mechanism's outputs P (on x) and Q (on x') must satisfy
``P(S) <= e^ε Q(S) + δ`` for every event S. The audit draws samples from both, uses a
*training* half to pick the event (a threshold ``{T > t}`` or ``{T < t}`` on a scalar
statistic T: the output itself, or a projection for vector outputs) whose
Clopper–Pearson ε bound is largest on that half, then on the *held-out* half bounds ``P(S)`` from below and
``Q(S)`` from above with Clopper–Pearson intervals (each at 1 − α/2):

    ε_LB = ln((P_low(S) − δ) / Q_high(S)),

a lower bound on the true ε that holds with probability at least 1 − α: the event and
its direction (P vs Q or Q vs P) are chosen on the training half only, and each of the
two one-sided bounds fails with probability <= α/2. A mechanism whose claim is below
ε_LB is caught; a correct one is caught with probability <= α.
"""

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._rng import as_generator


@dataclass
class AuditResult:
    """``epsilon_lower_bound`` holds with probability >= ``confidence``.

    ``event``: the chosen test (statistic, side, threshold, direction);
    ``p_hat`` / ``q_hat``: held-out frequencies of the event under the two inputs;
    ``n``: held-out samples per input.
    """

    epsilon_lower_bound: float
    confidence: float
    delta: float
    event: dict
    p_hat: float
    q_hat: float
    n: int

    def refutes(self, claimed_epsilon):
        return self.epsilon_lower_bound > claimed_epsilon


def clopper_pearson(k, n, alpha):
    """Two-sided 1 − alpha Clopper–Pearson interval for k successes in n trials."""
    lo = 0.0 if k == 0 else stats.beta.ppf(alpha / 2, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(1 - alpha / 2, k + 1, n - k)
    return float(lo), float(hi)


def _statistics(A, B, rng, n_proj):
    """Scalar statistics of vector outputs: coordinates, mean-difference direction, random projections."""
    if A.ndim == 1:
        return [("output", A, B)]
    out = [(f"coordinate {j}", A[:, j], B[:, j]) for j in range(min(A.shape[1], n_proj))]
    diff = A.mean(0) - B.mean(0)
    if np.any(diff):
        u = diff / np.linalg.norm(diff)
        out.append(("mean-difference projection", A @ u, B @ u))
    for i in range(n_proj):
        u = rng.standard_normal(A.shape[1])
        u /= np.linalg.norm(u)
        out.append((f"random projection {i}", A @ u, B @ u))
    return out


def _best_event(a, b, delta, quantiles, alpha):
    """On training data: the threshold event with the largest Clopper–Pearson ε bound.

    Ranking by the bound itself (not the raw ratio) avoids far-tail events whose few
    hits give weak held-out bounds.
    """
    ts = np.unique(np.quantile(np.concatenate([a, b]), quantiles))
    best = (-np.inf, None)
    for side in ("greater", "less"):
        ka = np.array([(a > t).sum() if side == "greater" else (a < t).sum() for t in ts])
        kb = np.array([(b > t).sum() if side == "greater" else (b < t).sum() for t in ts])
        p_low = np.where(ka > 0, stats.beta.ppf(alpha / 2, np.maximum(ka, 1), len(a) - ka + 1), 0.0)
        q_high = np.where(kb < len(b), stats.beta.ppf(1 - alpha / 2, kb + 1, np.maximum(len(b) - kb, 1)), 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.where(p_low - delta > 0, np.log((p_low - delta) / q_high), -np.inf)
        i = int(np.argmax(val))
        if val[i] > best[0]:
            best = (float(val[i]), (side, float(ts[i])))
    return best


def audit(sample_p, sample_q, *, n=20000, delta=0.0, alpha=0.05, n_proj=4, rng=None):
    """Lower-bound the ε of a mechanism from its outputs on two neighbouring inputs.

    ``sample_p(k)`` / ``sample_q(k)``: k outputs of the mechanism on x and on x'
    (shape (k,) or (k, dim)). ``n`` samples are drawn from each, half to choose the
    test, half to evaluate it. Returns an :class:`AuditResult`.
    """
    if n < 100:
        raise ValueError(f"n must be at least 100, got {n}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    gen = as_generator(rng)
    A = np.asarray(sample_p(n), float)
    B = np.asarray(sample_q(n), float)
    if A.shape != B.shape or A.shape[0] != n:
        raise ValueError(f"the samplers must return {n} outputs of equal shape; got {A.shape} and {B.shape}")
    half = n // 2
    quantiles = np.linspace(0.005, 0.995, 199)
    stats_list = _statistics(A, B, gen, n_proj)
    # choose, on the training halves, the best event over statistics and both directions
    best = (-np.inf, None)
    for name, a, b in stats_list:
        for direction, (x, y) in (("P vs Q", (a, b)), ("Q vs P", (b, a))):
            val, ev = _best_event(x[:half], y[:half], delta, quantiles, alpha)
            if ev is not None and val > best[0]:
                best = (val, {"statistic": name, "side": ev[0], "threshold": ev[1], "direction": direction,
                              "data": (x[half:], y[half:])})
    if best[1] is None:
        return AuditResult(0.0, 1 - alpha, delta, {}, 0.0, 0.0, n - half)
    ev = best[1]
    x, y = ev.pop("data")
    hit_x = x > ev["threshold"] if ev["side"] == "greater" else x < ev["threshold"]
    hit_y = y > ev["threshold"] if ev["side"] == "greater" else y < ev["threshold"]
    # one event, chosen on the training halves, is evaluated on held-out data; each
    # one-sided Clopper–Pearson bound fails with probability <= α/2, so jointly <= α
    p_low, _ = clopper_pearson(int(hit_x.sum()), len(x), alpha)
    _, q_high = clopper_pearson(int(hit_y.sum()), len(y), alpha)
    lb = np.log((p_low - delta) / q_high) if p_low - delta > 0 else 0.0
    return AuditResult(float(max(lb, 0.0)), 1 - alpha, delta, ev, float(hit_x.mean()), float(hit_y.mean()),
                       len(x))
