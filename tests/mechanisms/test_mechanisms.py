"""Mechanisms: calibration, exact laws of the noise, bad input (NIM's plan: test_nim.py)."""

import itertools

import numpy as np
import pytest
from scipy import special, stats

import knorm
from knorm import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
from knorm import workloads as W
from knorm.mechanisms import analytic_gaussian_sigma


def cube_F(d):
    s = np.array(list(itertools.product([-1.0, 1.0], repeat=d - 1)))
    return np.column_stack([np.ones(len(s)), s]).T


# ---- Laplace / Gaussian calibration ------------------------------------------------------

def test_laplace_sensitivity_and_scale():
    F = W.random_pm1(40, 200, rng=0)
    m = LaplaceMechanism(F, epsilon=0.5, rng=0)
    assert m.sensitivity == 40.0  # Δ₁ = d for ±1 matrices (docs/design.md §4.1)
    assert m.scale == 80.0
    F2 = np.array([[1.0, -3.0], [2.0, 0.5]])
    assert LaplaceMechanism(F2, epsilon=1).sensitivity == 3.5


def test_laplace_noise_law():
    m = LaplaceMechanism(W.prefix(5), epsilon=2.0, rng=1)
    noise = m.sample_noise(20000)
    assert noise.shape == (20000, 5)
    # Δ₁ of prefix(5) = 5 (first column) -> scale 2.5
    assert stats.kstest(noise.ravel(), "laplace", args=(0, 2.5)).pvalue > 1e-3
    # E‖noise‖² = 2 d b² exactly; the MC estimate of E‖noise‖ sits below √ of it (Jensen)
    assert m.expected_squared_error() == pytest.approx(2 * 5 * 2.5**2)
    e = m.expected_error(n_samples=50000)
    assert e.value < np.sqrt(m.expected_squared_error())
    assert np.mean(np.linalg.norm(noise, axis=1)) == pytest.approx(e.value, abs=5 * e.stderr + 5 * 0.02)


def test_classic_gaussian_sigma():
    m = GaussianMechanism(np.eye(3) * 2, epsilon=0.5, delta=1e-5, calibration="classic")
    assert m.sigma == pytest.approx(2 * np.sqrt(2 * np.log(1.25e5)) / 0.5, rel=1e-12)
    with pytest.raises(ValueError, match="epsilon < 1"):
        GaussianMechanism(np.eye(3), epsilon=1.5, delta=1e-5, calibration="classic")


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-6), (1.0, 1e-5), (2.0, 1e-6), (8.0, 1e-3)])
def test_analytic_gaussian_meets_the_gdp_profile_of_math_7(eps, delta):
    """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) with μ = Δ/σ (docs/design.md §7) equals δ at σ*."""
    sigma = analytic_gaussian_sigma(1.0, eps, delta)
    mu = 1.0 / sigma
    prof = lambda m: stats.norm.cdf(-eps / m + m / 2) - np.exp(eps) * stats.norm.cdf(-eps / m - m / 2)  # noqa: E731
    assert prof(mu) == pytest.approx(delta, rel=1e-6)
    assert prof(mu * 1.001) > delta  # any smaller σ violates (ε, δ)
    if eps < 1:
        assert sigma < np.sqrt(2 * np.log(1.25 / delta)) / eps  # tighter than the classic bound


def test_gaussian_expected_error_is_the_chi_mean():
    m = GaussianMechanism(W.random_pm1(10, 30, rng=0), epsilon=1.0, delta=1e-6, rng=2)
    assert m.sensitivity == pytest.approx(np.sqrt(10))
    e = m.expected_error()
    assert e.exact
    want = m.sigma * np.sqrt(2) * special.gamma(5.5) / special.gamma(5)
    assert e.value == pytest.approx(want, rel=1e-12)
    norms = np.linalg.norm(m.sample_noise(20000), axis=1)
    assert norms.mean() == pytest.approx(want, abs=5 * norms.std() / np.sqrt(20000))


# ---- K-norm --------------------------------------------------------------------------------

def ks_gauge_gamma(mech, size, ess=None):
    """‖noise‖_K ~ Gamma(dim, 1/ε) exactly (density ∝ r^{dim-1} e^{-εr} from polar coordinates)."""
    noise = mech.sample_noise(size)
    g = mech.body.gauge(noise)
    D = stats.kstest(g, "gamma", args=(mech.dim, 0, 1 / mech.epsilon)).statistic
    n = size if ess is None else ess
    return np.sqrt(n) * D


@pytest.mark.parametrize("F,kind", [(np.eye(6), "cross-polytope"), (np.diag([1.0, 5.0, 0.2]), "cross-polytope"),
                                    (W.prefix(5), "cross-polytope"), (cube_F(4), "box")])
def test_knorm_exact_paths(F, kind):
    m = KNormMechanism(F, epsilon=0.7, rng=3)
    assert m.privacy.sampling == "exact" and m.privacy.details["exact_structure"] == kind
    assert ks_gauge_gamma(m, 20000) < 1.95  # P ≈ 0.001 under the exact law


def test_knorm_mcmc_gauge_law():
    F = W.random_pm1(8, 30, rng=4)
    m = KNormMechanism(F, epsilon=1.5, rng=5)
    assert m.privacy.sampling == "mcmc-approximate"
    noise = m.sample_noise(3000)
    info = m.last_info
    assert info.converged
    g = m.body.gauge(noise)
    D = stats.kstest(g, "gamma", args=(8, 0, 1 / 1.5)).statistic
    assert np.sqrt(min(3000, info.min_ess * 3000 / info.draws)) * D < 1.95


def test_knorm_expected_error_formula_on_the_cross_polytope():
    """E‖noise‖₂ = (d+1)/ε E‖z‖₂; check against direct noise norms and E‖noise‖² exactly."""
    d, eps = 5, 0.5
    m = KNormMechanism(np.eye(d), epsilon=eps, rng=6)
    e = m.expected_error(n_samples=40000)
    norms = np.linalg.norm(m.sample_noise(40000), axis=1)
    se = np.hypot(e.stderr, norms.std() / np.sqrt(40000))
    assert norms.mean() == pytest.approx(e.value, abs=4.5 * se)
    # E‖z‖² = d · 2/((d+1)(d+2)) exactly -> E‖noise‖² = (d+1)(d+2)/ε² · 2d/((d+1)(d+2)) = 2d/ε²
    sq = np.sum(m.sample_noise(40000) ** 2, axis=1)
    assert sq.mean() == pytest.approx(2 * d / eps**2, abs=4.5 * sq.std() / np.sqrt(40000))


def test_knorm_rank_deficient_noise_stays_in_the_span():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((6, 3))
    F = A @ np.eye(3)
    m = KNormMechanism(F, epsilon=1.0, rng=8)
    assert m.dim == 3 and m.privacy.exact
    noise = m.sample_noise(5000)
    Q = m.body.span_basis
    np.testing.assert_allclose(noise - (noise @ Q) @ Q.T, 0, atol=1e-9)
    assert ks_gauge_gamma(m, 20000) < 1.95


def test_releases_are_answers_plus_noise_and_reproducible():
    F = W.prefix(4)
    x = np.array([1.0, 0.0, 3.0, 2.0])
    a = KNormMechanism(F, epsilon=1.0, rng=9).release(x, size=3)
    b = KNormMechanism(F, epsilon=1.0, rng=9).release(x, size=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3, 4)
    one = LaplaceMechanism(F, epsilon=1.0, rng=1).release(x)
    assert one.shape == (4,)


# ---- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [LaplaceMechanism, KNormMechanism, NIMechanism])
@pytest.mark.parametrize("eps", [0, -1, np.inf, np.nan, "1", None, True])
def test_bad_epsilon(cls, eps):
    with pytest.raises(ValueError, match="epsilon"):
        cls(np.eye(2), epsilon=eps)


@pytest.mark.parametrize("delta", [0, 1, -0.1, 1.5, np.nan, None])
def test_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        GaussianMechanism(np.eye(2), epsilon=1.0, delta=delta)


def test_bad_calibration_and_keyword_only():
    with pytest.raises(ValueError, match="calibration"):
        GaussianMechanism(np.eye(2), epsilon=1.0, delta=1e-6, calibration="rdp")
    with pytest.raises(TypeError):
        LaplaceMechanism(np.eye(2), 1.0)  # epsilon is keyword-only


@pytest.mark.parametrize("x,match", [(np.ones(3), "vector of length 2"), (np.array([1.0, np.nan]), "NaN"),
                                     (np.ones((2, 2)), "vector of length 2"), (np.array(["a", "b"]), "numeric")])
def test_bad_x(x, match):
    for m in [LaplaceMechanism(np.eye(2), epsilon=1.0), KNormMechanism(np.eye(2), epsilon=1.0)]:
        with pytest.raises(ValueError, match=match):
            m.release(x)


@pytest.mark.parametrize("size", [0, -2, 1.5, True])
def test_bad_size(size):
    with pytest.raises(ValueError, match="size"):
        LaplaceMechanism(np.eye(2), epsilon=1.0).sample_noise(size)


def test_bad_workload_matrix():
    with pytest.raises(ValueError, match="NaN"):
        KNormMechanism(np.array([[np.nan, 1.0]]), epsilon=1.0)


def test_public_namespace():
    assert knorm.KNormMechanism is KNormMechanism


def test_knorm_bank_uses_each_certified_draw_once():
    F = W.random_pm1(6, 20, rng=14)
    m = KNormMechanism(F, epsilon=1.0, rng=15, bank_size=300)
    z1 = m.sample_uniform(100)  # the first refill draws just what is asked (one warm-up per chain)
    info1 = m.last_info
    assert info1.converged and info1.extra["banked"] == 100
    # later refills: what was banked so far or what is asked, at most bank_size, a draw per chain (8)
    z2 = m.sample_uniform(150)  # bank empty: 150 asked, 100 banked -> 152
    info2 = m.last_info
    assert info2 is not info1 and info2.extra["banked"] == 152
    z3 = m.sample_uniform(100)  # 2 left: 252 banked so far, capped at 300 -> 256 (a draw per chain)
    info3 = m.last_info
    assert info3 is not info2 and info3.extra["banked"] == 256
    z4 = m.sample_uniform(100)  # served from the bank (158 left): no new run
    assert m.last_info is info3
    m.sample_uniform(58)
    z5 = m.sample_uniform(1)  # bank empty, 508 banked so far: capped at bank_size (300 -> 304)
    assert m.last_info.extra["banked"] == 304
    allz = np.vstack([z1, z2, z3, z4, z5])
    assert len(np.unique(allz, axis=0)) == len(allz)
