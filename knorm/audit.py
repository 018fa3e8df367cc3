"""Empirical privacy audit: a statistical lower bound on ε from samples (docs/design.md §7).

For neighbouring inputs the mechanism's outputs P (on x) and Q (on x') must satisfy
``P(S) <= e^ε Q(S) + δ`` for every event S. From ``N`` outputs (or windows of outputs)
under each input, with one-sided Clopper–Pearson bounds at level 1 − α/2 each,

    ε_LB = ln((P_low(S) − δ) / Q_high(S)),

a lower bound on the true ε that holds with probability at least 1 − α whenever S is
fixed before the held-out data are seen. Two ways to fix S:

* :func:`audit_event` — a *pre-registered* event on a window of ``m`` outputs (a
  function window → bool, e.g. :func:`fx_on_line` or :func:`repeated_answer`),
  evaluated on fresh windows; no training half. The claim to compare with is the claim
  of ``m`` answers (``m·ε`` under basic composition), not the claim of one answer.
* :func:`audit` — a threshold event ``{T > t}`` or ``{T < t}`` on a scalar statistic T
  (the output, a coordinate or a projection) chosen on a *training* half and bounded
  on the held-out half. Its thresholds cover a quantile grid and every order statistic
  beyond it, so events as rare as one training sample are visible.

Non-finite outputs are failures, not data: a mechanism must never emit NaN or ±inf.
Both audits then return ``epsilon_lower_bound = inf`` with ``failure`` naming the
sampler (so ``refutes(any claim)`` is True); they never silently return 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from scipy.spatial import KDTree

from ._rng import as_generator
from ._validate import as_real_array, check_memory, check_str, is_int, is_real, short_repr
from .privacy import _real


@dataclass
class AuditResult:
    """``epsilon_lower_bound`` holds with probability >= ``confidence``.

    ``event``: the test (statistic, side, threshold, direction; or the pre-registered
    event's name, window and hit counts); ``p_hat`` / ``q_hat``: held-out frequencies of
    the event under the two inputs; ``n``: held-out samples (windows) per input;
    ``p_low`` / ``q_high``: their one-sided Clopper–Pearson bounds at 1 − α/2 each.
    ``failure``: None, or why the audit stopped (a non-finite output): then
    ``epsilon_lower_bound`` is inf.
    """

    epsilon_lower_bound: float
    confidence: float
    delta: float
    event: dict[str, Any]
    p_hat: float
    q_hat: float
    n: int
    p_low: float = 0.0
    q_high: float = 1.0
    failure: str | None = None

    def refutes(self, claimed_epsilon: float) -> bool:
        """Whether the bound exceeds ``claimed_epsilon`` (>= 0; inf: no claim, never refuted)."""
        return self.epsilon_lower_bound > _epsilon_arg("claimed_epsilon", claimed_epsilon)

    def delta_lower_bound(self, epsilon: float) -> float:
        """``P_low − e^ε Q_high`` (>= 0): the release is not (ε, δ)-DP for smaller δ."""
        epsilon = _epsilon_arg("epsilon", epsilon)
        if self.failure is not None:
            return 1.0
        return float(max(0.0, self.p_low - math.exp(epsilon) * self.q_high)) if epsilon < 700 else 0.0


def _epsilon_arg(name: str, value: Any) -> float:
    """An ε to compare with: a real number >= 0 (inf allowed), else a ValueError naming ``name``."""
    if not is_real(value) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0 (inf allowed), got {short_repr(value)}")
    return _real(name, value)


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Clopper–Pearson bounds for k successes in n trials: ``(low, high)``.

    Each bound is one-sided at level 1 − α/2 (together, a two-sided 1 − α interval):
    ``scipy.stats.binomtest(k, n).proportion_ci(1 − α, method="exact")``.
    """
    n = _int_at_least("n", n, 1)
    if n > 2**53:  # counts exact in float64
        raise ValueError(f"n must be at most 2**53, got {n}")
    if not is_int(k) or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in [0, n] = [0, {n}], got {short_repr(k)}")
    if not (is_real(alpha) and 0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1), got {short_repr(alpha)}")
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=1 - alpha, method="exact")
    return float(ci.low), float(ci.high)


def _epsilon_bound(k_p: int, k_q: int, n_p: int, n_q: int, delta: float,
                   alpha: float) -> tuple[float, float, float]:
    """``(ε_LB, P_low, Q_high)`` with ε_LB = ln((P_low − δ)/Q_high), floored at 0."""
    p_low, _ = clopper_pearson(k_p, n_p, alpha)
    _, q_high = clopper_pearson(k_q, n_q, alpha)
    lb = math.log((p_low - delta) / q_high) if p_low - delta > 0 else 0.0
    return max(lb, 0.0), p_low, q_high


def _check_common(alpha: float, delta: float) -> None:
    if not (is_real(alpha) and 0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1), got {short_repr(alpha)}")
    if not (is_real(delta) and 0 <= delta < 1):
        raise ValueError(f"delta must be in [0, 1), got {short_repr(delta)}")


def _int_at_least(name: str, value: Any, low: int) -> int:
    if not is_int(value) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {short_repr(value)}")
    return int(value)


def _outputs(label: str, value: Any) -> NDArray[np.float64]:
    """A sampler's outputs as float64 (real numbers only: complex or text is refused, not cast)."""
    try:
        return as_real_array(f"{label}'s outputs", value).astype(np.float64)
    except OverflowError:
        raise ValueError(f"{label}'s outputs hold integers too large for float64") from None


def _failure(alpha: float, delta: float, n: int, event: dict[str, Any], message: str) -> AuditResult:
    return AuditResult(math.inf, 1 - alpha, delta, event, math.nan, math.nan, n, failure=message)


def _nonfinite_message(name: str, what: str) -> str:
    return f"{name} returned {what} that are not finite (NaN or ±inf); a mechanism must never emit them"


# ---------------------------------------------------------------- pre-registered events


def audit_event(event: Callable[[NDArray[np.float64]], bool], sample_p: Callable[[int], ArrayLike],
                sample_q: Callable[[int], ArrayLike], *, windows: int = 200, window: int = 20, delta: float = 0.0,
                alpha: float = 0.05, name: str | None = None) -> AuditResult:
    """Lower-bound ε with a pre-registered event on windows of outputs.

    ``event(W) -> bool`` for a window ``W`` of shape (window,) or (window, dim);
    ``sample_p(window)`` / ``sample_q(window)``: ``window`` outputs of the mechanism on
    x and on x', called ``windows`` times each (windows are assumed independent; for
    consecutive releases of one MCMC mechanism this holds only approximately). With
    ``k_p``, ``k_q`` hits: ε_LB = ln((P_low − δ)/Q_high) at one-sided levels 1 − α/2,
    valid with probability >= 1 − α because the event is fixed in advance. A window holds
    ``window`` answers on the same data, so compare ε_LB with their composed claim.
    A non-finite output stops the audit: ε_LB = inf and ``failure`` names the sampler.
    """
    if not callable(event):
        raise ValueError(f"event must be a function of a window of outputs, got {type(event).__name__}")
    if not (callable(sample_p) and callable(sample_q)):
        raise ValueError("sample_p and sample_q must be functions k -> k outputs")
    windows = _int_at_least("windows", windows, 1)
    window = _int_at_least("window", window, 2)
    check_memory("window", window, 8 * 8 * window)  # one window and its pair search, per dimension
    # the same bound as audit's n: no more outputs than one request could hold (days of sampling)
    check_memory("windows", windows, 8 * 2 * windows * window)
    _check_common(alpha, delta)
    name = check_str("name", name, allow_none=True) or getattr(event, "__name__", "event")
    hits = {}
    shape = None
    for label, sampler in (("sample_p", sample_p), ("sample_q", sample_q)):
        k = 0
        for i in range(windows):
            W = _outputs(label, sampler(window))
            if W.ndim not in (1, 2) or W.shape[0] != window or (shape is not None and W.shape != shape):
                want = f"{shape}" if shape is not None else f"({window},) or ({window}, dim)"
                raise ValueError(f"{label} must return windows of shape {want}; got {W.shape}")
            shape = W.shape
            bad = int(W.size - np.count_nonzero(np.isfinite(W)))
            if bad:
                return _failure(alpha, delta, windows, {"name": name, "window": window},
                                _nonfinite_message(label, f"{bad} of the {W.size} values in window {i}"))
            hit = event(W)
            if np.ndim(hit) != 0:
                raise ValueError(f"event must return one bool per window, got shape {np.shape(hit)}")
            k += bool(hit)
        hits[label] = k
    k_p, k_q = hits["sample_p"], hits["sample_q"]
    lb, p_low, q_high = _epsilon_bound(k_p, k_q, windows, windows, delta, alpha)
    ev = {"name": name, "window": window, "hits_p": k_p, "hits_q": k_q}
    return AuditResult(lb, 1 - alpha, delta, ev, k_p / windows, k_q / windows, windows, p_low, q_high)


def _as_rows(W: ArrayLike) -> NDArray[np.float64]:
    W = np.asarray(W, dtype=float)
    return W[:, None] if W.ndim == 1 else W


def repeated_answer(atol: float = 0.0) -> Callable[[NDArray[np.float64]], bool]:
    """Event: two outputs of the window agree within ``atol`` (max-norm; 0 = identical).

    A mechanism with continuous noise repeats an answer with probability 0, so any hit
    is a defect (e.g. a reused noise vector). It is evidence of privacy loss only when
    its frequency differs between x and x'; report the hits under both.
    """
    if not (is_real(atol) and 0 <= _real("atol", atol) < math.inf):
        raise ValueError(f"atol must be a finite number >= 0, got {short_repr(atol)}")
    atol = float(atol)

    def answer_repeated(W: NDArray[np.float64]) -> bool:
        return bool(KDTree(_as_rows(W)).query_pairs(r=float(atol), p=np.inf))

    answer_repeated.__name__ = f"answer repeated (atol={atol:g})"
    return answer_repeated


def fx_on_line(fx: ArrayLike, tol: float = 1e-9) -> Callable[[NDArray[np.float64]], bool]:
    """Event: the true answer ``fx`` lies on the line through two outputs of the window.

    With ``u_i = a_i − fx`` and unit directions ``û_i``, a pair hits when
    ``min(‖û_i − û_j‖, ‖û_i + û_j‖) <= tol`` (≈ the angle, in radians, between the lines
    from fx to a_i and to a_j), or when some ``a_i == fx``. K-norm noise ``r·z`` with a
    reused z and fresh r puts ``fx`` exactly on such a line; continuous noise in dim >= 2
    does so with probability 0. Under x' the auditor still tests the ``fx`` of x.
    """
    fx = np.atleast_1d(as_real_array("fx", fx)).astype(np.float64)
    if fx.ndim != 1 or not np.all(np.isfinite(fx)):
        raise ValueError(f"fx must be a finite 1-D vector (no NaN or inf), got shape {fx.shape}")
    if not (is_real(tol) and 0 < tol < 1):
        raise ValueError(f"tol must be in (0, 1), got {short_repr(tol)}")

    def on_line(W: NDArray[np.float64]) -> bool:
        W = _as_rows(W)
        if W.shape[1] != fx.size:
            raise ValueError(f"fx has {fx.size} entries but the outputs have {W.shape[1]}")
        U = W - fx
        norms = np.linalg.norm(U, axis=1)
        if np.any(norms == 0):
            return True
        U = U / norms[:, None]
        m = len(U)
        pairs = KDTree(np.vstack([U, -U])).query_pairs(r=float(tol))
        return any(i % m != j % m for i, j in pairs)

    on_line.__name__ = f"Fx on the line through two answers (tol={tol:g})"
    return on_line


# ---------------------------------------------------------------- threshold events


def _statistics(A: NDArray[np.float64], B: NDArray[np.float64], rng: np.random.Generator,
                n_proj: int) -> list[tuple[str, NDArray[np.float64], NDArray[np.float64]]]:
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


def _thresholds(pooled: NDArray[np.float64], quantiles: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """Thresholds per side: a quantile grid, plus one event per distinct order statistic
    beyond it, ``{T >= v}`` above the grid and ``{T <= v}`` below it (every tail event of
    the training sample is represented, down to a single sample). Cutting at v rather
    than mid-gap keeps the event as far as possible from the other sample's extremes."""
    v = np.unique(pooled)
    grid = np.quantile(pooled, quantiles)
    return {"greater": np.unique(np.concatenate([grid, np.nextafter(v[v > grid[-1]], -np.inf)])),
            "less": np.unique(np.concatenate([grid, np.nextafter(v[v < grid[0]], np.inf)]))}


def _wilson(k: NDArray[Any], n: int, z: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score bounds, vectorised: a ranking score only (never reported as a bound)."""
    p = k / n
    c = p + z * z / (2 * n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (c - h) / (1 + z * z / n), (c + h) / (1 + z * z / n)


def _best_event(a: NDArray[np.float64], b: NDArray[np.float64], delta: float,
                thresholds: dict[str, NDArray[np.float64]], alpha: float) -> tuple[float, tuple[str, float] | None]:
    """On training data: the threshold event with the largest approximate ε bound.

    Ranking by a confidence bound (Wilson, vectorised) rather than the raw ratio avoids
    far-tail events whose few hits give weak held-out bounds; any ranking computed on
    the training half keeps the held-out Clopper–Pearson bound valid.
    """
    # finite for every α > 0 (ppf(1 − α/2) is inf below α ≈ 1e-16; α/2 underflows at 5e-324)
    z = stats.norm.isf(max(alpha / 2, np.finfo(float).tiny))
    sa, sb = np.sort(a), np.sort(b)
    best: tuple[float, tuple[str, float] | None] = (-np.inf, None)
    for side, ts in thresholds.items():
        if side == "greater":
            ka = len(a) - np.searchsorted(sa, ts, side="right")
            kb = len(b) - np.searchsorted(sb, ts, side="right")
        else:
            ka = np.searchsorted(sa, ts, side="left")
            kb = np.searchsorted(sb, ts, side="left")
        p_low, _ = _wilson(ka, len(a), z)
        _, q_high = _wilson(kb, len(b), z)
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.where(p_low - delta > 0, np.log((p_low - delta) / q_high), -np.inf)
        i = int(np.argmax(val))
        if val[i] > best[0]:
            best = (float(val[i]), (side, float(ts[i])))
    return best


def audit(sample_p: Callable[[int], ArrayLike], sample_q: Callable[[int], ArrayLike], *, n: int = 20000,
          delta: float = 0.0, alpha: float = 0.05, n_proj: int = 4, rng: np.random.Generator | int | None = None
          ) -> AuditResult:
    """Lower-bound the ε of a mechanism from its outputs on two neighbouring inputs.

    ``sample_p(k)`` / ``sample_q(k)``: k outputs of the mechanism on x and on x'
    (shape (k,) or (k, dim)). ``n`` samples are drawn from each, half to choose the
    test, half to evaluate it. Returns an :class:`AuditResult`; non-finite outputs give
    ε_LB = inf and a ``failure`` message naming the sampler.
    """
    if not (callable(sample_p) and callable(sample_q)):
        raise ValueError("sample_p and sample_q must be functions k -> k outputs")
    n = _int_at_least("n", n, 100)
    # both samples, their training halves pooled and sorted, per dimension: refuse before sampling
    check_memory("n", n, 8 * 8 * n)
    _check_common(alpha, delta)
    n_proj = _int_at_least("n_proj", n_proj, 0)
    check_memory("n_proj", n_proj, 8 * 4 * n * n_proj)
    gen = as_generator(rng)
    A = _outputs("sample_p", sample_p(n))
    B = _outputs("sample_q", sample_q(n))
    if A.shape != B.shape or A.shape[0] != n or A.ndim not in (1, 2):
        raise ValueError(f"sample_p and sample_q must return {n} outputs of equal shape; got {A.shape} and {B.shape}")
    half = n // 2
    for label, X in (("sample_p", A), ("sample_q", B)):
        bad = int(np.count_nonzero(~np.isfinite(X).reshape(n, -1).all(axis=1)))
        if bad:
            return _failure(alpha, delta, n - half, {}, _nonfinite_message(label, f"{bad} of {n} outputs"))
    quantiles = np.linspace(0.005, 0.995, 199)
    stats_list = _statistics(A, B, gen, n_proj)
    # choose, on the training halves, the best event over statistics and both directions
    best: tuple[float, dict[str, Any] | None] = (-np.inf, None)
    ev: Any  # (side, threshold) of a statistic's best event, then the chosen event's dict
    for name, a, b in stats_list:
        ts = _thresholds(np.concatenate([a[:half], b[:half]]), quantiles)
        for direction, (x, y) in (("P vs Q", (a, b)), ("Q vs P", (b, a))):
            val, ev = _best_event(x[:half], y[:half], delta, ts, alpha)
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
    k_x, k_y = int(hit_x.sum()), int(hit_y.sum())
    lb, p_low, q_high = _epsilon_bound(k_x, k_y, len(x), len(y), delta, alpha)
    return AuditResult(lb, 1 - alpha, delta, ev, k_x / len(x), k_y / len(y), len(x), p_low, q_high)
