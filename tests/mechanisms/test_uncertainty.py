"""Per-answer uncertainty (issue 50 item 3): standard errors and confidence intervals against exact
values, the least-squares propagation against a brute-force covariance, and coverage by simulation.

Exact values come from the mechanisms' definitions (b = Δ₁/ε, σ, E r² E z_i² of a cross-polytope),
computed here independently; the statistical checks use fixed seeds and tolerances of a few
Monte-Carlo standard errors."""

import numpy as np
import pytest
from scipy import stats

from knorm import postprocess
from knorm.mechanisms import (GaussianMechanism, HierarchicalMechanism, KNormMechanism, LaplaceMechanism,
                              NIMechanism)

PREFIX = np.tril(np.ones((4, 4)))
STACKED = np.vstack([np.eye(4), PREFIX])  # d = 8, rank 4: least squares is a true projection


def test_laplace_exact_values():
    eps = 0.7
    m = LaplaceMechanism(STACKED, epsilon=eps, rng=0)
    b = np.abs(STACKED).sum(axis=0).max() / eps  # Δ₁/ε
    se = m.standard_errors()
    assert se.exact and np.allclose(se.value, np.sqrt(2) * b, rtol=1e-14) and np.all(se.stderr == 0)
    hw = m.interval_half_widths(level=0.9)
    assert hw.exact and np.allclose(hw.value, b * np.log(10.0), rtol=1e-14)  # Pr(|Lap(b)| > t) = e^(-t/b)
    hw95 = m.interval_half_widths(level=0.95)
    assert np.allclose(hw95.value, b * np.log(20.0), rtol=1e-14)


def test_gaussian_exact_values():
    m = GaussianMechanism(STACKED, epsilon=1.0, delta=1e-6, rng=0)
    se = m.standard_errors()
    assert se.exact and np.allclose(se.value, m.sigma, rtol=1e-14)
    hw = m.interval_half_widths(level=0.8)
    assert hw.exact and np.allclose(hw.value, stats.norm.ppf(0.9) * m.sigma, rtol=1e-12)


@pytest.mark.parametrize("d,scale,eps", [(3, 1.0, 1.0), (5, 3.0, 0.5)])
def test_knorm_cross_polytope_exact_se(d, scale, eps):
    """F = c·I_d: z uniform in c·B₁^d, E z_i² = 2c²/((d+1)(d+2)) (docs/design.md §6) and
    E r² = (d+1)(d+2)/ε² for r ~ Gamma(d+1, 1/ε): SE_i = √2·c/ε exactly."""
    m = KNormMechanism(scale * np.eye(d), epsilon=eps, rng=0)
    se = m.standard_errors()
    expect = np.sqrt((d + 1) * (d + 2) / eps**2 * 2 * scale**2 / ((d + 1) * (d + 2)))
    assert se.exact and np.allclose(se.value, expect, rtol=1e-12)


def test_nim_by_simulation_against_the_exact_value():
    """NIM on the identity is one K-norm level: its Monte-Carlo SEs within 4 of their own SEs of √2/ε."""
    m = NIMechanism(np.eye(3), epsilon=1.0, rng=3)
    se = m.standard_errors(n_samples=20_000)
    assert not se.exact
    assert np.all(np.abs(se.value - np.sqrt(2)) <= 4 * se.stderr), (se.value, se.stderr)


def test_least_squares_matrix_is_what_least_squares_does():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(5, STACKED.shape[0])) * 10
    P = postprocess.least_squares_matrix(STACKED)
    assert np.allclose(postprocess.least_squares(STACKED, a), a @ P.T, atol=1e-9)
    cov = rng.uniform(0.5, 2.0, size=STACKED.shape[0])
    Pw = postprocess.least_squares_matrix(STACKED, covariance=cov)
    assert np.allclose(postprocess.least_squares(STACKED, a, covariance=cov), a @ Pw.T, atol=1e-9)
    A = rng.normal(size=(8, 8))
    full = A @ A.T + 8 * np.eye(8)
    Pf = postprocess.least_squares_matrix(STACKED, covariance=full)
    assert np.allclose(postprocess.least_squares(STACKED, a, covariance=full), a @ Pf.T, atol=1e-9)
    assert np.allclose(postprocess.propagate(P, np.full(8, 2.0)), 2 * P @ P.T)


def _brute_force_check(se, out):
    """The simulated per-answer variance of ``out`` (draws × answers) within 4 of its Monte-Carlo SEs
    (plus 4 of the estimate's own) of ``se``²."""
    v = np.mean(out**2, axis=0)
    se_v = np.std(out**2, axis=0, ddof=1) / np.sqrt(len(out))
    assert np.all(np.abs(v - se.value**2) <= 4 * se_v + 4 * 2 * se.value * se.stderr), (v, se.value**2, se_v)


def test_least_squares_standard_errors_against_brute_force():
    """Laplace SEs after least squares (√diag P Σ Pᵀ) against least_squares applied to 20,000 releases;
    smaller than the raw ones (a projection)."""
    m = LaplaceMechanism(STACKED, epsilon=1.0, rng=5)
    se = m.standard_errors(postprocess="least_squares")
    x = np.array([3.0, 0.0, 7.0, 1.0])
    _brute_force_check(se, postprocess.least_squares(STACKED, m.release(x, size=20_000)) - STACKED @ x)
    assert np.all(se.value < m.standard_errors().value)


@pytest.mark.parametrize("make", [lambda: LaplaceMechanism(STACKED, epsilon=1.0, rng=5),
                                  lambda: KNormMechanism(STACKED, epsilon=1.0, rng=6),
                                  lambda: HierarchicalMechanism(STACKED, epsilon=1.0, rng=7),
                                  lambda: GaussianMechanism(STACKED, epsilon=1.0, delta=1e-5, rng=8)])
def test_linear_map_standard_errors_against_brute_force(make):
    """Any linear map P (here a fixed random 3 × 8): √diag(P Σ Pᵀ) against P applied to 20,000 noise
    draws. (K-norm's and the strategies' noise lies in F's range already: least squares leaves it as it is.)"""
    m = make()
    P = np.random.default_rng(2).normal(size=(3, 8))
    _brute_force_check(m.standard_errors(postprocess=P), m.sample_noise(20_000) @ P.T)
    noise = m.sample_noise(20_000)
    assert np.allclose(postprocess.least_squares(STACKED, noise), noise, atol=1e-9) or \
        isinstance(m, (LaplaceMechanism, GaussianMechanism))


def _coverage(m, x, level, reps, post=False, n_samples=None):
    """Fraction of true answers inside their intervals over ``reps`` releases, and its SE from the
    per-release fractions (answers of one release may be dependent)."""
    F = m.F
    a = m.release(x, size=reps)
    if post:
        a = postprocess.least_squares(F, a)
    lo, hi = m.confidence_intervals(a, level=level, postprocess="least_squares" if post else None,
                                    n_samples=n_samples)
    inside = ((lo <= F @ x) & (F @ x <= hi)).mean(axis=1)
    return inside.mean(), inside.std(ddof=1) / np.sqrt(reps)


@pytest.mark.parametrize("name,make,post", [
    ("laplace", lambda: LaplaceMechanism(STACKED, epsilon=1.0, rng=11), False),
    ("gaussian", lambda: GaussianMechanism(STACKED, epsilon=1.0, delta=1e-5, rng=12), False),
    ("knorm", lambda: KNormMechanism(PREFIX, epsilon=1.0, rng=13), False),
    ("knorm-1d", lambda: KNormMechanism(np.array([[2.0, 1.0, -2.0, 0.5]]), epsilon=1.0, rng=18), False),
    ("knorm-2d", lambda: KNormMechanism(np.array([[1.0, 0, 1, 0], [0, 1.0, 1, 1]]), epsilon=0.5, rng=19), False),
    ("knorm-stacked", lambda: KNormMechanism(STACKED, epsilon=1.0, rng=14), False),
    ("laplace-ls", lambda: LaplaceMechanism(STACKED, epsilon=1.0, rng=15), True),
    ("knorm-ls", lambda: KNormMechanism(STACKED, epsilon=1.0, rng=16), True),
    ("gaussian-ls", lambda: GaussianMechanism(STACKED, epsilon=1.0, delta=1e-5, rng=17), True),
])
def test_coverage_of_nominal_90_percent_intervals(name, make, post):
    """Nominal 90% intervals cover the true answers within 3 SE of 0.9 (20,000 releases; the
    simulated half-widths from 200,000 draws, so their own error is far below the coverage's SE)."""
    m = make()
    mcmc = m.privacy_per_answer.sampling != "exact" if isinstance(m, KNormMechanism) else False
    cov, se = _coverage(m, np.array([5.0, 0.0, 2.0, 9.0]), 0.9, 20_000, post, n_samples=20_000 if mcmc else 200_000)
    assert abs(cov - 0.9) <= 3 * se, (name, cov, se)


def test_intervals_are_answers_plus_minus_half_widths():
    m = LaplaceMechanism(PREFIX, epsilon=2.0, rng=0)
    a = m.release(np.array([1, 2, 3, 4]))
    lo, hi = m.confidence_intervals(a, level=0.5)
    q = m.interval_half_widths(level=0.5).value
    assert np.array_equal(lo, a - q) and np.array_equal(hi, a + q)
    s = m.standard_errors().summary()
    assert s["min"] == s["median"] == s["max"] and s["exact"] and s["level"] is None


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, float("nan"), "0.9", None, True])
def test_bad_level_is_refused_by_name(level):
    m = LaplaceMechanism(PREFIX, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match=r"^level must be a number in \(0, 1\)"):
        m.interval_half_widths(level=level)
    with pytest.raises(ValueError, match="^level"):
        m.confidence_intervals(np.zeros(4), level=level)


@pytest.mark.parametrize("post", ["ls", np.eye(3), np.full((4, 4), np.nan), 3])
def test_bad_postprocess_is_refused_by_name(post):
    m = LaplaceMechanism(PREFIX, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="^postprocess"):
        m.standard_errors(postprocess=post)


def test_bad_answers_and_samples_are_refused_by_name():
    m = LaplaceMechanism(PREFIX, epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="^answers"):
        m.confidence_intervals(np.zeros(3))
    with pytest.raises(ValueError, match="answers"):
        m.confidence_intervals(np.array([0.0, np.nan, 0.0, 0.0]))
    with pytest.raises(ValueError, match="^n_samples"):
        m.standard_errors(n_samples=1)


def test_nothing_is_counted_or_data_dependent():
    """Standard errors and half-widths spend nothing and take no data: the same before and after releases."""
    m = KNormMechanism(PREFIX, epsilon=1.0, rng=0)
    before = m.interval_half_widths(level=0.9).value
    m.release(np.array([1, 2, 3, 4]), size=3)
    assert m.answers == 3
    assert np.array_equal(m.interval_half_widths(level=0.9).value, before) and m.answers == 3
