"""Accounting (docs/design.md §7): formulas, identities, and numbers from an established accountant."""

import numpy as np
import pytest
from scipy import stats

from knorm import privacy as P


def test_tradeoff_eps_delta_formula_and_symmetry():
    a = np.linspace(0, 1, 101)
    f = P.tradeoff_eps_delta(a, 1.0, 0.01)
    want = np.maximum(0, np.maximum(1 - 0.01 - np.e * a, np.exp(-1) * (1 - 0.01 - a)))
    np.testing.assert_allclose(f, want)
    assert P.tradeoff_eps_delta(0.0, 0.0) == 1.0 and P.tradeoff_eps_delta(1.0, 0.0) == 0.0


def test_gdp_tradeoff_is_the_gaussian_test():
    """G_μ(α) = type II error of the most powerful level-α test of N(0,1) vs N(μ,1)."""
    mu, a = 1.3, 0.05
    t = stats.norm.ppf(1 - a)  # reject when X > t
    assert P.tradeoff_gdp(a, mu) == pytest.approx(stats.norm.cdf(t - mu), rel=1e-12)


def test_gdp_delta_matches_dp_accounting():
    """Cross-check 1: δ(ε) of μ-GDP equals the PLD accountant's δ for Gaussian noise σ = 1/μ."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    for sigma, eps in [(2.0, 1.0), (0.8, 0.5), (5.0, 0.1)]:
        acc = pld.from_gaussian_mechanism(standard_deviation=sigma, sensitivity=1.0,
                                          value_discretization_interval=1e-5)
        assert P.gdp_delta(eps, 1 / sigma) == pytest.approx(acc.get_delta_for_epsilon(eps), rel=2e-3, abs=1e-9)


def test_gdp_composition_matches_dp_accounting():
    """Cross-check 2: k-fold Gaussian composition (√k μ-GDP) vs the PLD accountant's composition."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma, k, eps = 3.0, 10, 1.5
    acc = pld.from_gaussian_mechanism(standard_deviation=sigma, sensitivity=1.0,
                                      value_discretization_interval=1e-4).self_compose(k)
    mu = P.gdp_compose(*[1 / sigma] * k)
    assert mu == pytest.approx(np.sqrt(k) / sigma)
    assert P.gdp_delta(eps, mu) == pytest.approx(acc.get_delta_for_epsilon(eps), rel=1e-2)


def test_gdp_conversions_are_inverse():
    mu = 0.7
    d = P.gdp_delta(1.2, mu)
    assert P.gdp_epsilon(d, mu) == pytest.approx(1.2, rel=1e-8)
    assert P.gdp_mu_for(1.2, d) == pytest.approx(mu, rel=1e-8)
    assert P.gaussian_mu(2.0, 4.0) == 0.5


def test_composition_and_group_privacy():
    assert P.basic_composition([0.5, 0.25, 0.25], [1e-6, 0, 1e-6]) == (1.0, 2e-6)
    e, d = P.advanced_composition(0.1, 1e-6, 100, 1e-5)
    assert e == pytest.approx(0.1 * np.sqrt(200 * np.log(1e5)) + 100 * 0.1 * np.expm1(0.1))
    assert d == pytest.approx(100e-6 + 1e-5)
    assert e < 100 * 0.1  # better than basic composition here
    assert P.group_privacy(0.5, 1e-6, 3) == (1.5, pytest.approx(3 * np.exp(1.0) * 1e-6))
    assert P.group_gdp(0.5, 4) == 2.0


@pytest.mark.parametrize("call", [lambda: P.gdp_delta(-1, 1), lambda: P.tradeoff_gdp(1.5, 1),
                                  lambda: P.advanced_composition(1, 0, 0, 0.1), lambda: P.gdp_epsilon(0, 1),
                                  lambda: P.basic_composition([1, 2], [0.1]), lambda: P.group_gdp(1, 0)])
def test_bad_arguments(call):
    with pytest.raises(ValueError):
        call()
