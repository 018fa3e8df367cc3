"""R-hat and bulk ESS against series with known autocorrelation."""

import numpy as np
import pytest
from scipy.signal import lfilter

from knorm.diagnostics import autocorrelation_time, ess, rhat, rhat_nested


def ar1(phi, chains, n, rng):
    """Stationary AR(1) chains x_t = φ x_{t-1} + e_t: τ = (1+φ)/(1-φ)."""
    e = rng.standard_normal((chains, n))
    e[:, 0] /= np.sqrt(1 - phi**2)  # start in the stationary law
    return lfilter([1.0], [1.0, -phi], e, axis=1)


def test_ess_of_iid_draws_is_the_sample_size():
    # For iid draws the estimate of τ has sd ≈ 2·sqrt(3/N) ≈ 0.025 at N = 20000; 10% is 4 sd.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5000, 3))
    e = ess(x)
    assert e.shape == (3,)
    np.testing.assert_allclose(e, 20000, rtol=0.10)


@pytest.mark.parametrize("phi", [0.5, 0.9])
def test_ess_of_ar1_matches_theory(phi):
    # Sokal: var(τ̂) ≈ 2(2M+1)τ²/N with window M ≈ 5τ; at φ = 0.9 (τ = 19), N = 2·10⁵ the
    # relative sd is about 4.5%; 15% is over 3 sd.
    rng = np.random.default_rng(1)
    x = ar1(phi, 4, 50_000, rng)
    want = x.size * (1 - phi) / (1 + phi)
    assert ess(x) == pytest.approx(want, rel=0.15)
    assert autocorrelation_time(x) == pytest.approx((1 + phi) / (1 - phi), rel=0.15)


def test_mean_ess_of_ar1_matches_theory():
    rng = np.random.default_rng(7)
    x = ar1(0.8, 4, 50_000, rng)
    assert ess(x, method="mean") == pytest.approx(x.size * 0.2 / 1.8, rel=0.15)
    with pytest.raises(ValueError, match="method"):
        ess(x, method="tail")


def test_ess_is_invariant_to_monotone_transforms():
    rng = np.random.default_rng(2)
    x = ar1(0.7, 4, 4000, rng)
    assert ess(np.exp(x)) == pytest.approx(ess(x), rel=1e-12)


def test_rhat_of_mixed_chains_is_near_one():
    rng = np.random.default_rng(3)
    x = ar1(0.5, 4, 5000, rng)
    assert rhat(x) < 1.01


def test_rhat_detects_a_shifted_chain():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 2000))
    x[0] += 1.0
    # raw-scale theory: R² ≈ 1 + var(split means) ≈ 1.21; rank normalisation shrinks it a little.
    # Anything far above the 1.01 threshold is a detection.
    assert rhat(x) > 1.05


def test_rhat_tail_version_detects_different_scales():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 2000))
    x[0] *= 3.0  # same mean and median: only the folded (tail) R-hat sees it
    assert rhat(x) > 1.05


def test_rhat_detects_a_trend_within_chains():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 2000)) + np.linspace(0, 2, 2000)  # split halves disagree
    assert rhat(x) > 1.1


def test_constant_draws():
    x = np.ones((4, 100))
    assert ess(x) == 400
    assert rhat(x) == 1.0


@pytest.mark.parametrize("bad,match", [(np.ones(10), "shape"), (np.ones((2, 3)), "at least 4"),
                                       (np.full((2, 10), np.nan), "NaN")])
def test_bad_draws_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        ess(bad)
    with pytest.raises(ValueError, match=match):
        rhat(bad)


BAD_DRAWS = [
    (np.ones((4, 10)) * (1 + 1j), "^draws must be real"),  # used to drop the imaginary part
    (np.array([["a", "b", "c", "d"]]), "^draws must be real"),  # used to parse the strings
    (np.array([[1.0, "x", 2.0, 3.0]], dtype=object), "^draws must be real"),
    (np.array([[1.0, None, 2.0, 3.0]], dtype=object), "^draws contain NaN"),
    ([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]], "^draws could not be converted"),
    (np.ones((0, 10)), "^draws must hold at least 1 chain"),  # used to return NaN
    (np.ones((2, 10, 0)), "^draws must hold at least 1 coordinate"),
    (np.ones((2, 3, 2)), "at least 4 draws"), (np.float64(1.0), "^draws must have shape"),
    (np.ones((2, 2, 2, 2)), "^draws must have shape"), (np.full((2, 10), np.inf), "^draws contain NaN"),
    (np.array([[1.0, 2.0, 3.0, np.float128(1e400)]], dtype=np.float128), "^draws contain NaN"),
]


@pytest.mark.parametrize("bad,match", BAD_DRAWS)
def test_bad_draws_are_named(bad, match):
    for fn in (ess, rhat, autocorrelation_time):
        with pytest.raises(ValueError, match=match):
            fn(bad)


@pytest.mark.parametrize("scale", [1e-300, 1e-20, 1e20, 1e300])
def test_diagnostics_are_scale_free(scale):
    """Used to call tiny draws constant (ESS = N, R-hat = 1) and overflow on huge ones (NaN)."""
    rng = np.random.default_rng(8)
    x = ar1(0.7, 4, 2000, rng)
    x[0] += 3.0  # a shifted chain (about 2 sd): R-hat must see it at any scale
    for method in ("bulk", "mean"):
        assert ess(x * scale, method=method) == pytest.approx(ess(x, method=method), rel=1e-9)
    assert rhat(x * scale) == pytest.approx(rhat(x), rel=1e-9)
    assert rhat(x) > 1.05
    y = np.ldexp(x / np.abs(x).max(), 1023)  # max |y| = 2^1023: y - mean and var(y) overflow unscaled
    assert ess(y, method="mean") == pytest.approx(ess(x, method="mean"), rel=1e-9)


def test_chains_stuck_at_different_values():
    x = np.repeat([[0.0], [1.0]], 10, axis=1)
    assert rhat(x) == np.inf  # documented: no mixing at all
    assert np.isfinite(ess(x)) and ess(x) < x.size / 2


# ---- nested R-hat (issue 43: many short chains) ---------------------------------------------------

def test_rhat_nested_by_hand():
    """K = 2 superchains of M = 2 chains of N = 2 draws: chains (0, 2), (1, 3) | (4, 6), (5, 7).
    Chain means 1, 2 | 5, 6; superchain means 1.5 | 5.5, so B̂ = var(1.5, 5.5) = 8; in each
    superchain the chain means vary by 0.5 and each chain by 2, so Ŵ = 2.5: √(1 + 8/2.5) = √4.2.
    The ids may come in any order (the same grouping)."""
    x = np.array([[0.0, 2.0], [1.0, 3.0], [4.0, 6.0], [5.0, 7.0]])
    assert rhat_nested(x, 2) == pytest.approx(np.sqrt(4.2), rel=1e-14)
    assert rhat_nested(x[[2, 0, 3, 1]], [1, 0, 1, 0]) == pytest.approx(np.sqrt(4.2), rel=1e-14)
    assert np.allclose(rhat_nested(np.stack([x, 3 * x + 1], axis=2), 2), np.sqrt(4.2))  # per coordinate, scale-free
    one = np.array([[1.0], [2.0], [5.0], [6.0]])  # a single draw per chain: W̄ = 0, B̃ = 0.5, B̂ = 8
    assert rhat_nested(one, 2) == pytest.approx(np.sqrt(1 + 8 / 0.5), rel=1e-14)


def _ar1_superchains(k, m, n, warmup, starts, phi, rng):
    """k superchains of m AR(1) chains (stationary N(0, 1)), all chains of superchain i started at
    starts[i], warmup steps before n kept draws."""
    x = np.repeat(np.asarray(starts, float), m)
    out = np.empty((k * m, n))
    s = np.sqrt(1 - phi**2)
    for t in range(warmup + n):
        x = phi * x + s * rng.standard_normal(k * m)
        if t >= warmup:
            out[:, t - warmup] = x
    return out


@pytest.mark.parametrize("k,m", [(8, 8), (16, 4)])
def test_rhat_nested_passes_stationary_short_chains_and_fails_unconverged_ones(k, m):
    """Many short AR(1) chains (φ = 0.9, n = 10 draws each): a chain mean has variance
    v = (n + 2Σ_h (n−h)φ^h)/n², a chain's sample variance mean n(1 − v)/(n − 1), so with stationary
    starts (each superchain's common start forgotten after 50 steps: φ⁵⁰ = 0.005) E B̂ = v/m and
    E Ŵ = v + n(1 − v)/(n − 1): nR̂² − 1 ≈ their ratio r (0.088 at m = 8), and B̂ ~ r·χ²_{k−1}/(k−1)
    is above 3r with probability below 0.004 at k = 8. Started at 10·(i − (k−1)/2) with 5 steps of
    warm-up the superchains have not forgotten their starts: nR̂² − 1 > 2 (more than 20r)."""
    rng = np.random.default_rng(7)
    n, phi = 10, 0.9
    h = np.arange(1, n)
    v = (n + 2 * np.sum((n - h) * phi**h)) / n**2
    r = (v / m) / (v + n * (1 - v) / (n - 1))
    ok = _ar1_superchains(k, m, n, 50, rng.standard_normal(k), phi, rng)
    assert rhat_nested(ok, k) ** 2 - 1 < 3 * r
    bad = _ar1_superchains(k, m, n, 5, 10 * (np.arange(k) - (k - 1) / 2), phi, rng)
    assert rhat_nested(bad, k) ** 2 - 1 > 2


@pytest.mark.parametrize("superchains,match", [
    (3, "superchains=3: need at least 2 superchains that divide the 4 chains equally"),
    (1, "superchains=1"),
    ([0, 0, 0, 1], "each with the same number of chains"),
    ([0, 0, 0, 0], "at least 2 superchains"),
    ([0.5, 1, 2, 3], "one integer id per chain"),
    ("two", "superchains must be a number of superchains"),
])
def test_rhat_nested_refuses_bad_superchains(superchains, match):
    with pytest.raises(ValueError, match=match):
        rhat_nested(np.zeros((4, 3)) + np.arange(3), superchains)
