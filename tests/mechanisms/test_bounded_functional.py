"""Bounded-data Laplace, Gaussian with covariance M, and the Gaussian-process KDE release."""

import numpy as np
import pytest
from scipy import integrate, stats

from knorm.functional import GaussianKDEMechanism
from knorm.mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism


def laplace_profile_numeric(shift, b, eps):
    """δ(ε) = ∫ max(0, p(y) − e^ε q(y)) dy for Lap(0, b) vs Lap(shift, b), by quadrature."""
    f = lambda y: max(0.0, stats.laplace.pdf(y, 0, b) - np.exp(eps) * stats.laplace.pdf(y, shift, b))  # noqa: E731
    kink = (shift - eps * b) / 2  # where p = e^ε q
    return integrate.quad(f, -60 * b, 60 * b, points=[0.0, kink, shift], limit=200, epsabs=1e-14)[0]


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-3), (1.0, 0.05), (2.0, 1e-6)])
def test_bounded_laplace_calibration_is_eps_delta_dp(eps, delta):
    m = BoundedLaplaceMechanism(2.0, 7.0, epsilon=eps, delta=delta)
    assert m.scale == pytest.approx(5.0 / (eps - np.log(1 - delta)))
    num = laplace_profile_numeric(5.0, m.scale, eps)  # the worst pair of values is diam(D) apart
    assert num == pytest.approx(m.privacy_profile(eps), rel=1e-6, abs=1e-12)
    assert num <= delta
    assert m.scale < 5.0 / eps  # less noise than the pure ε-DP scale


def test_bounded_laplace_release_and_clip():
    m = BoundedLaplaceMechanism(0.0, 1.0, epsilon=1.0, delta=1e-3, rng=0)
    out = m.release(0.3, size=20000)
    assert out.min() >= 0 and out.max() <= 1
    raw = BoundedLaplaceMechanism(0.0, 1.0, epsilon=1.0, delta=1e-3, clip=False, rng=0).release(0.3, size=20000)
    assert stats.kstest(raw - 0.3, "laplace", args=(0, m.scale)).pvalue > 1e-3
    with pytest.raises(ValueError, match="outside"):
        m.release(1.5)


def test_covariance_gaussian_sensitivity_and_noise_law():
    F = np.array([[1.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    M = np.array([[2.0, 0.5], [0.5, 1.0]])
    mech = CovarianceGaussianMechanism.from_workload(F, M, epsilon=0.8, delta=1e-5, rng=1)
    Minv_half = np.linalg.inv(np.linalg.cholesky(M))
    assert mech.sensitivity == pytest.approx(np.max(np.linalg.norm(Minv_half @ F, axis=0)))
    assert mech.c == pytest.approx(np.sqrt(2 * np.log(2 / 1e-5)) * mech.sensitivity / 0.8)
    z = mech.sample_noise(100_000)
    cov = np.cov(z.T)
    se = mech.c**2 * np.sqrt((M**2 + np.outer(np.diag(M), np.diag(M))) / 100_000)
    assert np.all(np.abs(cov - mech.c**2 * M) < 5 * se)
    with pytest.raises(ValueError, match="epsilon <= 1"):
        CovarianceGaussianMechanism(M, 1.0, epsilon=2.0, delta=1e-5)
    with pytest.raises(ValueError, match="positive definite"):
        CovarianceGaussianMechanism(np.array([[1.0, 2.0], [2.0, 1.0]]), 1.0, epsilon=0.5, delta=1e-5)


def test_gp_kde_sensitivity_formula_and_noise():
    rng = np.random.default_rng(2)
    data = rng.standard_normal((50, 2))
    mech = GaussianKDEMechanism(data, bandwidth=0.5, epsilon=0.5, delta=1e-4, rng=3)
    # Δ² = 2/(n (2πh²)^{m/2})² (docs/design.md §7); the RKHS distance of two KDEs differing in one record
    assert mech.sensitivity**2 == pytest.approx(2 / (50 * (2 * np.pi * 0.25)) ** 2)
    f = mech.release()
    grid = rng.uniform(-2, 2, size=(30, 2))
    vals = f(grid)
    # the noise is c·G with G ~ GP(0, k): pointwise N(0, c²)
    resid = []
    for _ in range(400):
        resid.append(mech.release()(grid[:1])[0] - mech.kde(grid[:1])[0])
    resid = np.array(resid) / mech.c
    assert stats.kstest(resid, "norm").pvalue > 1e-3
    assert vals.shape == (30,)


def test_gp_release_is_one_consistent_function():
    mech = GaussianKDEMechanism(np.array([0.0, 1.0, 1.5]), bandwidth=0.4, epsilon=1.0, delta=1e-3, rng=4)
    f = mech.release()
    a = f(np.array([0.0, 0.5, 1.0]))
    b = f(np.array([1.0, 0.25, 0.0, 0.5]))  # overlapping and new points, another call
    np.testing.assert_array_equal(b[[0, 2, 3]], a[[2, 0, 1]])
    # a new point very close to a revealed one takes nearly its value (same smooth draw)
    c = f(np.array([0.5 + 1e-4]))
    assert abs(c[0] - a[1]) < 0.05 * mech.c
    g = mech.release()  # a new release is a new draw
    assert not np.allclose(g(np.array([0.0, 0.5, 1.0])), a)


def test_gp_bad_input():
    with pytest.raises(ValueError, match="bandwidth"):
        GaussianKDEMechanism(np.zeros(3), bandwidth=0, epsilon=0.5, delta=1e-3)
    with pytest.raises(ValueError, match="epsilon <= 1"):
        GaussianKDEMechanism(np.zeros(3), bandwidth=1, epsilon=2, delta=1e-3)
    with pytest.raises(ValueError, match="shape"):
        GaussianKDEMechanism(np.zeros((3, 2)), bandwidth=1, epsilon=0.5, delta=1e-3).release()(np.zeros((2, 3)))
