"""Empirical privacy audit: correct mechanisms are not refuted, a broken one is caught."""

import numpy as np
import pytest

import knorm
from knorm.audit import audit, clopper_pearson
from knorm.discrete import RandomizedResponse


def test_clopper_pearson_coverage_edges():
    lo, hi = clopper_pearson(0, 100, 0.05)
    assert lo == 0 and hi == pytest.approx(1 - 0.025 ** (1 / 100))
    lo, hi = clopper_pearson(100, 100, 0.05)
    assert hi == 1 and lo == pytest.approx(0.025 ** (1 / 100))


def test_laplace_is_not_refuted():
    m = knorm.LaplaceMechanism(np.array([[1.0, -1.0]]), epsilon=1.0, rng=0)
    x, x2 = np.array([3.0, 1.0]), np.array([3.0, 2.0])  # neighbours: ‖x − x'‖₁ = 1
    r = audit(lambda k: m.release(x, size=k)[:, 0], lambda k: m.release(x2, size=k)[:, 0], n=40000, rng=1)
    assert 0 < r.epsilon_lower_bound <= m.privacy.epsilon


def test_broken_laplace_with_half_the_scale_is_caught():
    rng = np.random.default_rng(2)
    b = 0.5  # a "Laplace, ε = 1" that uses half the required scale (true ε = 2)
    r = audit(lambda k: 0.0 + rng.laplace(0, b, k), lambda k: 1.0 + rng.laplace(0, b, k), n=40000, rng=3)
    assert r.refutes(1.0), r


def test_randomized_response_is_not_refuted_and_a_lying_one_is():
    rr = RandomizedResponse.two_coin(rng=4)
    r = audit(lambda k: rr.release(np.zeros(k, int)), lambda k: rr.release(np.ones(k, int)), n=60000, rng=5)
    assert r.epsilon_lower_bound <= np.log(3)
    liar = RandomizedResponse(k=2, epsilon=3.0, rng=6)  # claims ln 3 but is truthful w.p. e³/(e³+1)
    r = audit(lambda k: liar.release(np.zeros(k, int)), lambda k: liar.release(np.ones(k, int)), n=60000, rng=7)
    assert r.refutes(np.log(3))


def test_knorm_noise_is_not_refuted_in_1d_and_low_d_projections():
    for F in [np.array([[1.0, 2.0, -1.0]]), knorm.workloads.random_pm1(3, 8, rng=8)]:
        m = knorm.KNormMechanism(F, epsilon=1.0, rng=9)
        x = np.zeros(F.shape[1])
        x2 = x.copy()
        x2[int(np.argmax(np.abs(F).sum(0)))] = 1.0  # the most sensitive cell
        r = audit(lambda k: m.release(x, size=k), lambda k: m.release(x2, size=k), n=20000, rng=10)
        assert r.epsilon_lower_bound <= 1.0, r


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least 100"):
        audit(lambda k: np.zeros(k), lambda k: np.zeros(k), n=10)
    with pytest.raises(ValueError, match="equal shape"):
        audit(lambda k: np.zeros(k), lambda k: np.zeros((k, 2)), n=200)
