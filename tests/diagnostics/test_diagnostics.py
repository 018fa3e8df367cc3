"""R-hat and bulk ESS against series with known autocorrelation."""

import numpy as np
import pytest
from scipy.signal import lfilter

from knorm.diagnostics import autocorrelation_time, ess, rhat


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
