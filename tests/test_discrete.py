"""Randomized response and the finite-domain mechanism (docs/design.md §7)."""

import numpy as np
import pytest

from knorm.discrete import FiniteDomainMechanism, RandomizedResponse


def test_two_coin_is_truthful_three_quarters_and_ln3_dp():
    rr = RandomizedResponse.two_coin(rng=0)
    assert rr.epsilon == pytest.approx(np.log(3)) and rr.p_truth == pytest.approx(0.75)
    n = 200_000
    yes = rr.release(np.ones(n, int)).mean()
    no = rr.release(np.zeros(n, int)).mean()
    se = np.sqrt(0.75 * 0.25 / n)
    assert abs(yes - 0.75) < 4.5 * se and abs(no - 0.25) < 4.5 * se
    assert (0.75 / 0.25) == pytest.approx(np.exp(rr.epsilon))  # worst-case likelihood ratio = e^ε


def test_kary_probabilities_and_unbiased_frequencies():
    k, eps, n = 5, 1.2, 200_000
    rr = RandomizedResponse(k=k, epsilon=eps, rng=1)
    truth = np.random.default_rng(2).choice(k, size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    est = rr.estimate_frequencies(rr.release(truth))
    pi = np.bincount(truth, minlength=k) / n
    # var(π̂_j) = f_j(1 − f_j)/(n (p − q)²) with f_j the report frequency
    f = rr.p_other + (rr.p_truth - rr.p_other) * pi
    se = np.sqrt(f * (1 - f) / n) / (rr.p_truth - rr.p_other)
    assert np.all(np.abs(est - pi) < 4.5 * se)
    assert est.sum() == pytest.approx(1.0)
    assert rr.p_truth / rr.p_other == pytest.approx(np.exp(eps))


def test_finite_domain_smallest_p_meets_the_profile_and_the_lower_bound():
    m, eps, delta = 6, 0.8, 0.05
    fd = FiniteDomainMechanism(m, epsilon=eps, delta=delta, rng=3)
    assert fd.p == pytest.approx((1 - delta) / (m + np.exp(eps)))
    assert fd.privacy_profile(eps) == pytest.approx(delta, abs=1e-12)  # exactly (ε, δ)
    smaller = FiniteDomainMechanism(m, epsilon=eps, delta=delta)
    smaller.p *= 0.99
    smaller.p_truth = 1 - m * smaller.p
    assert smaller.privacy_profile(eps) > delta  # any smaller p violates (ε, δ)
    assert fd.expected_error() == pytest.approx(fd.lower_bound())
    n = 200_000
    reports = fd.release(np.full(n, 2))
    err = np.mean(reports != 2)
    assert abs(err - fd.expected_error()) < 4.5 * np.sqrt(err * (1 - err) / n)


def test_finite_domain_frequency_estimator_is_unbiased():
    fd = FiniteDomainMechanism(3, epsilon=1.0, rng=4)
    n = 300_000
    truth = np.random.default_rng(5).choice(4, size=n, p=[0.4, 0.3, 0.2, 0.1])
    est = fd.estimate_frequencies(fd.release(truth))
    pi = np.bincount(truth, minlength=4) / n
    f = fd.p + (1 - 4 * fd.p) * pi
    se = np.sqrt(f * (1 - f) / n) / (1 - 4 * fd.p)
    assert np.all(np.abs(est - pi) < 4.5 * se)


def test_vectorised_shapes():
    rr = RandomizedResponse(k=3, epsilon=1.0, rng=6)
    assert rr.release(np.zeros((4, 5), int)).shape == (4, 5)


@pytest.mark.parametrize("call,match", [
    (lambda: RandomizedResponse(k=1, epsilon=1.0), "k must"),
    (lambda: RandomizedResponse(k=3, epsilon=0), "epsilon"),
    (lambda: RandomizedResponse(k=3, epsilon=1.0).release(np.array([0, 3])), r"\[0, 3\)"),
    (lambda: RandomizedResponse(k=3, epsilon=1.0).release(np.array([0.5])), "integers"),
    (lambda: FiniteDomainMechanism(0, epsilon=1.0), "m must"),
    (lambda: FiniteDomainMechanism(3, epsilon=1.0, delta=1.0), "delta"),
    (lambda: FiniteDomainMechanism(3, epsilon=1.0).estimate_frequencies(np.array([], int)), "no reports"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- issue 17: tiny ε, huge domains, odd arguments ---------------------------------------------

@pytest.mark.parametrize("eps", [1e-300, 1e-10, 1.0])
def test_rr_estimates_are_scale_free_at_tiny_epsilon(eps):
    """k = 2, f = (1/3, 2/3): π̂ = (f(1 + w) − w)/(1 − w), w = e^{−ε} (the exact algebra of
    (f − q)/(p − q)); at ε = 1e-300 the old p − q was 0 and the estimate ±inf."""
    rr = RandomizedResponse(k=2, epsilon=eps)
    est = rr.estimate_frequencies([0, 1, 1])
    w, one_minus_w = np.exp(-eps), -np.expm1(-eps)
    want = (np.array([1 / 3, 2 / 3]) * (1 + w) - w) / one_minus_w
    np.testing.assert_allclose(est, want, rtol=1e-13)
    assert np.all(np.isfinite(est))


def test_finite_domain_estimates_at_tiny_epsilon_are_finite_and_exact():
    """m = 2, δ = 0: π̂ = (f(1 + 2w) − w)/(1 − w); with δ > 0 the denominator is >= 3δw."""
    fd = FiniteDomainMechanism(2, epsilon=1e-300)
    np.testing.assert_allclose(fd.estimate_frequencies([0, 1, 1]), np.array([0.0, 1.0, -1.0]) / 1e-300, rtol=1e-13)
    fd = FiniteDomainMechanism(2, epsilon=1e-300, delta=0.1)
    w = 1.0  # e^{−1e-300} in float64
    want = (np.array([1, 2, 0]) / 3 * (1 + 2 * w) - 0.9 * w) / (1e-300 + 3 * 0.1 * w)
    np.testing.assert_allclose(fd.estimate_frequencies([0, 1, 1]), want, rtol=1e-13)
    assert fd.p_truth == pytest.approx(1 - 2 * fd.p, rel=1e-15)


def test_huge_domains_are_refused_before_allocating():
    rr = RandomizedResponse(k=10**12, epsilon=1.0, rng=0)
    assert rr.release([0, 5, 10**11]).shape == (3,)  # reports need no k-sized array
    with pytest.raises(ValueError, match=r"^k=1000000000000 needs about"):
        rr.estimate_frequencies([0, 1])  # was MemoryError
    with pytest.raises(ValueError, match=r"^m=1000000000000 needs about"):
        FiniteDomainMechanism(10**12, epsilon=1.0).estimate_frequencies([0, 1])
    for k in (2**53 + 1, 10**400, 2.0, True, "3"):
        with pytest.raises(ValueError, match=r"^k must be an integer"):
            RandomizedResponse(k=k, epsilon=1.0)


@pytest.mark.parametrize("value", [float("nan"), -1.0, float("inf"), "1", None, 1j])
def test_profile_and_bound_arguments(value):
    fd = FiniteDomainMechanism(3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"^epsilon"):
        fd.privacy_profile(value)
    with pytest.raises(ValueError, match=r"^kappa"):
        fd.lower_bound(value)


def test_report_errors_name_reports_and_huge_floats_are_not_cast():
    rr = RandomizedResponse(k=3, epsilon=1.0)
    with pytest.raises(ValueError, match=r"^reports must lie in \[0, 3\); some do not"):
        rr.estimate_frequencies([0.0, 1e300])  # was cast to int64 first (a negative garbage value)
    with pytest.raises(ValueError, match=r"^values must be integers"):
        rr.release([0.5, 1.0])
