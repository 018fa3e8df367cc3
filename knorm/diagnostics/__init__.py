"""MCMC diagnostics with ArviZ's definitions (Vehtari et al. 2021).

* :func:`rhat` -- rank-normalised split R-hat, the max of the bulk and the folded
  (tail) versions (ArviZ ``method="rank"``).
* :func:`ess` -- bulk effective sample size: rank-normalised split chains,
  FFT autocovariance, Geyer's initial positive and monotone sequences.
* :func:`rhat_nested` -- nested R-hat over superchains, for many short chains (Margossian,
  Hoffman, Sountsov, Riou-Durand, Vehtari and Gelman, Bayesian Analysis 2024; posterior's
  ``rhat_nested``).
* :func:`stationary_tau` -- integrated autocorrelation time of chains started from the stationary
  law, with an upper bound: its bias does not grow with the number of chains (issue 51).

Both take finite real draws shaped ``(chains, draws)`` or ``(chains, draws, k)`` (one
value per coordinate ``k``), at least 4 draws per chain; anything else is a ValueError.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validate import as_real_array, short_repr

__all__ = ["rhat", "rhat_nested", "ess", "autocorrelation_time", "stationary_tau"]


def _as_chains(x: ArrayLike, min_draws: int = 4) -> NDArray[np.float64]:
    """Draws as a finite float64 array (chains, draws[, k]) or a one-line ValueError."""
    a = as_real_array("draws", x, allow_object=True)
    try:
        with np.errstate(over="ignore"):
            a = a.astype(np.float64)
    except (ValueError, TypeError, OverflowError):
        raise ValueError("draws must be real numbers, got an object array holding other things") from None
    if a.ndim not in (2, 3):
        raise ValueError(f"draws must have shape (chains, draws) or (chains, draws, k); got {a.shape}")
    if a.shape[0] < 1:
        raise ValueError(f"draws must hold at least 1 chain, got shape {a.shape}")
    if a.shape[1] < min_draws:
        raise ValueError(f"need at least {min_draws} draw{'s' if min_draws != 1 else ''} per chain, got {a.shape[1]}")
    if a.ndim == 3 and a.shape[2] < 1:
        raise ValueError(f"draws must hold at least 1 coordinate (k >= 1), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("draws contain NaN or infinite values")
    return a


def _unit(a: NDArray[np.float64], axis: tuple[int, ...] | None = None) -> NDArray[np.float64]:
    """``a / 2^e`` with ``max|a/2^e|`` in [0.5, 1) (exact), the max over ``axis`` (None: all of
    ``a``; else one e per remaining index, e.g. per coordinate); ESS and R-hat are scale-free,
    and moments of the scaled draws neither overflow nor underflow."""
    m = np.max(np.abs(a), axis=axis, keepdims=axis is not None)
    return np.ldexp(a, -np.where(m > 0, np.frexp(m)[1], 0))


def _constant(a: NDArray[np.float64]) -> bool:
    """True when the draws do not vary (relative to their size)."""
    return np.ptp(a) <= np.finfo(float).resolution * np.max(np.abs(a))


def _split(a: NDArray[np.float64]) -> NDArray[np.float64]:
    half = a.shape[1] // 2
    return np.concatenate([a[:, :half], a[:, -half:]], axis=0)


def _z_scale(a: NDArray[np.float64]) -> NDArray[np.float64]:
    from scipy import stats  # here, not at import: scipy.stats takes ≈ 1 s to import

    rank = stats.rankdata(a, method="average", axis=None).reshape(a.shape)
    return stats.norm.ppf((rank - 0.375) / (a.size + 0.25))


def _rhat_basic(a: NDArray[np.float64]) -> float:
    n = a.shape[1]
    between = n * np.var(a.mean(axis=1), ddof=1)
    within = np.mean(np.var(a, axis=1, ddof=1))
    if within == 0.0:  # every split chain constant, not all equal
        return np.inf
    return np.sqrt((between / within + n - 1) / n)


def _rhat_one(a: NDArray[np.float64]) -> float:
    a = _unit(a)
    if _constant(a):
        return 1.0
    bulk = _rhat_basic(_z_scale(_split(a)))
    folded = np.abs(a - np.median(a))
    tail = _rhat_basic(_z_scale(_split(folded)))
    return max(bulk, tail)


def _autocov(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """Autocovariance of each row (biased, FFT), lags 0..n-1."""
    n = a.shape[1]
    c = a - a.mean(axis=1, keepdims=True)
    m = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(c, n=m, axis=1)
    return np.fft.irfft(f * np.conj(f), n=m, axis=1)[:, :n] / n


def _ess_raw(a: NDArray[np.float64]) -> float:
    """ESS of ``(chains, draws)`` (no rank normalisation), ArviZ's ``_ess``."""
    m, n = a.shape
    a = _unit(a)
    if _constant(a):
        return float(a.size)
    acov = _autocov(a)
    mean_var = np.mean(acov[:, 0]) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += np.var(a.mean(axis=1), ddof=1)
    rho = np.zeros(n)
    even = 1.0
    rho[0] = even
    odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[1] = odd
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if even + odd >= 0:
            rho[t + 1] = even
            rho[t + 2] = odd
        t += 2
    max_t = t - 2
    if even > 0:
        rho[max_t + 1] = even
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0
            rho[t + 2] = rho[t + 1]
        t += 2
    total = m * n
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1 : max_t + 2])
    tau = max(tau, 1.0 / np.log10(total))
    return total / tau


def _per_coordinate(fn: Callable[[NDArray[np.float64]], float], x: ArrayLike) -> float | NDArray[np.float64]:
    a = _as_chains(x)
    if a.ndim == 2:
        return float(fn(a))
    return np.array([fn(a[:, :, k]) for k in range(a.shape[2])])


def rhat(draws: ArrayLike) -> float | NDArray[np.float64]:
    """Rank-normalised split R-hat (max of bulk and tail); < 1.01 is the usual target.

    ``inf`` when every split chain is constant but they differ (no mixing at all).
    """
    return _per_coordinate(_rhat_one, draws)


def ess(draws: ArrayLike, method: str = "bulk") -> float | NDArray[np.float64]:
    """Effective sample size: ``"bulk"`` (rank-normalised split chains, the default) or
    ``"mean"`` (split chains, no rank normalisation: the ESS for estimating a mean)."""
    if not isinstance(method, str):
        raise ValueError(f"method must be 'bulk' or 'mean', got {type(method).__name__}")
    if method == "bulk":
        return _per_coordinate(lambda a: _ess_raw(_z_scale(_split(a))), draws)
    if method == "mean":
        return _per_coordinate(lambda a: _ess_raw(_split(a)), draws)
    raise ValueError(f"method must be 'bulk' or 'mean', got {short_repr(method)}")


def autocorrelation_time(draws: ArrayLike) -> float | NDArray[np.float64]:
    """Integrated autocorrelation time per draw: ``draws_total / ess``."""
    a = _as_chains(draws)
    return a.shape[0] * (a.shape[1] // 2) * 2 / np.asarray(ess(a))


def _superchain_ids(superchains: object, chains: int) -> NDArray[np.int64]:
    """Each chain's superchain (0 … K−1) from ``superchains``: K (consecutive equal groups) or one id
    per chain; every superchain must hold the same number of chains, and there must be at least 2."""
    from .._validate import is_int

    if is_int(superchains):
        k = int(superchains)  # type: ignore[call-overload]
        if k < 2 or chains % k:
            raise ValueError(f"superchains={k}: need at least 2 superchains that divide the {chains} chains equally")
        return np.repeat(np.arange(k), chains // k)
    try:
        ids = np.asarray(superchains)
    except (ValueError, TypeError):  # ragged
        ids = np.zeros(0)
    if ids.shape != (chains,) or ids.dtype.kind not in "iu":
        raise ValueError(f"superchains must be a number of superchains or one integer id per chain ({chains}), "
                         f"got {short_repr(superchains)}")
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    if len(counts) < 2 or counts.min() != counts.max():
        raise ValueError("superchains: need at least 2 superchains, each with the same number of chains")
    return inverse.astype(np.int64)


def _rhat_nested_all(a: NDArray[np.float64], ids: NDArray[np.int64]) -> NDArray[np.float64]:
    """``√(1 + B̂/Ŵ)`` for each coordinate of draws (chains, n, k) grouped into superchains by ``ids``."""
    a = _unit(a, axis=(0, 1))  # each coordinate by its own power of two
    k = int(ids.max()) + 1
    m = a.shape[0] // k
    n = a.shape[1]
    order = np.argsort(ids, kind="stable")
    x = a[order].reshape(k, m, n, a.shape[2])
    chain_mean = x.mean(axis=2)  # (k, m, coords)
    super_mean = chain_mean.mean(axis=1)  # (k, coords)
    between_super = np.var(super_mean, axis=0, ddof=1)
    between_chain = np.var(chain_mean, axis=1, ddof=1) if m > 1 else np.zeros_like(super_mean)
    within_chain = np.var(x, axis=2, ddof=1).mean(axis=1) if n > 1 else np.zeros_like(super_mean)
    within_super = np.mean(between_chain + within_chain, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(1.0 + between_super / within_super)
    zero = within_super == 0.0
    out[zero] = np.where(between_super[zero] == 0.0, 1.0, np.inf)
    return out


def rhat_nested(draws: ArrayLike, superchains: object) -> float | NDArray[np.float64]:
    """Nested R-hat ``√(1 + B̂/Ŵ)`` of chains grouped into K superchains of M chains each (chains of
    one superchain started at one point): B̂ the variance of the K superchain means, Ŵ the mean over
    superchains of (the variance of its M chain means + its chains' mean within-chain variance).
    Built for many short chains, where each chain's own R-hat says little (Margossian et al. 2024,
    as posterior's ``rhat_nested``: no rank normalisation, no split). ``superchains``: K (the
    chains in K consecutive equal groups) or one integer id per chain; ``inf`` when every chain is
    constant but superchains differ.
    """
    a = _as_chains(draws, min_draws=1)  # a chain may be as short as one draw (then W̄ = 0)
    ids = _superchain_ids(superchains, a.shape[0])
    if a.ndim == 2:
        return float(_rhat_nested_all(a[:, :, None], ids)[0])
    return _rhat_nested_all(a, ids)


# one-sided 95% normal quantile: stationary_tau's bound lies below the true τ in about 5% of pools
TAU_BOUND_Z = 1.645
TAU_CHUNK = 256  # coordinates per piece of stationary_tau


def stationary_tau(draws: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Integrated autocorrelation time per draw of chains started from the stationary law, and an
    upper bound of it; one value per coordinate (``(k,)`` arrays; ``(1,)`` for ``(chains, draws)``).

    The draws are rank-normalised over all chains together (as :func:`ess`'s bulk version, not
    split), and the autocovariance at lag t is averaged over every pair t apart in every chain
    about the **pooled** mean, divided by the number of such pairs. :func:`ess` centres each
    (split) chain on its own mean, which takes out about ``σ²τ/n`` of every lag's covariance: with
    many short chains τ reads low (AR(1) with τ = 2 at 64 chains of 32: median 1.62), so the
    warm-up W = ⌈20τ⌉ shrank with the chain count. About the pooled mean nothing is taken out
    (chains that disagree only add to τ: conservative). ``τ = −1 + 2·Σ P_t`` over Geyer's initial
    positive, monotone sequence of pair sums ``P_t = ρ̂_{2t} + ρ̂_{2t+1}``; the bound is
    ``τ·(1 + 1.645·√(2(2K+3)/N))``, K the last lag summed and N the draws in all (the variance of
    the windowed estimate, Madras and Sokal 1988, one lag pair wider). On simulated AR(1) chains
    (τ 1, 2, 5; 8 × 250 and 64 × 32) τ's median is within 10% of the truth and the bound below it in
    at most 5% of pools (tests/diagnostics/test_stationary_tau.py).
    """
    from scipy import stats  # here, not at import (≈ 1 s)

    a = _as_chains(draws)
    a = a[:, :, None] if a.ndim == 2 else a
    if a.shape[2] > TAU_CHUNK:  # in pieces of coordinates: the FFT's work space stays small at any width
        parts = [stationary_tau(a[:, :, i:i + TAU_CHUNK]) for i in range(0, a.shape[2], TAU_CHUNK)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    m, n, k = a.shape
    flat = a.reshape(m * n, k)
    rank = stats.rankdata(flat, method="average", axis=0)
    z = stats.norm.ppf((rank - 0.375) / (m * n + 0.25)).reshape(m, n, k)
    z = z - z.mean(axis=(0, 1))
    size = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(z, n=size, axis=1)
    acov = np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n].sum(axis=0) / (m * (n - np.arange(n)))[:, None]
    constant = acov[0] <= 0.0  # every draw equal (after ranking): nothing to correlate
    rho = acov / np.where(constant, 1.0, acov[0])
    pairs = n // 2
    P = rho[: 2 * pairs : 2] + rho[1 : 2 * pairs : 2]  # (pairs, k)
    P = np.minimum.accumulate(P, axis=0)
    positive = np.cumprod(P > 0.0, axis=0).astype(bool)  # initial positive sequence
    tau = np.maximum(-1.0 + 2.0 * np.sum(np.where(positive, P, 0.0), axis=0), 1.0 / np.log10(m * n))
    last = 2 * np.sum(positive, axis=0) - 1  # the last lag summed
    bound = tau * (1.0 + TAU_BOUND_Z * np.sqrt(2.0 * (2.0 * np.maximum(last, 0) + 3.0) / (m * n)))
    tau[constant], bound[constant] = 1.0, 1.0
    return tau, bound
