"""A knorm release as an OpenDP measurement (knorm.interop.opendp; issue 29)."""

import math

import numpy as np
import pytest

dp = pytest.importorskip("opendp.prelude")

from knorm import workloads as W  # noqa: E402
from knorm.interop.opendp import make_measurement  # noqa: E402
from knorm.mechanisms import (GaussianMechanism, KNormMechanism, LaplaceMechanism,  # noqa: E402
                              ResidualGaussianMechanism)


def test_pure_mechanism_map_and_composition():
    """K-norm with exact structure (prefix sums: F injective, K an image of the cross-polytope):
    map d ↦ ε·d; OpenDP's basic composition of two releases costs 2ε, and its odometer reports
    what was spent."""
    F = W.prefix(4)
    m = KNormMechanism(F, epsilon=0.5)
    assert not m.privacy_per_answer.approximate
    meas = make_measurement(m)
    assert meas.map(1.0) == 0.5 and meas.map(3.0) == 1.5
    x = np.array([1.0, 2.0, 3.0, 4.0])
    a = np.asarray(meas(x))
    assert a.shape == (4,) and np.all(np.isfinite(a)) and m.answers == 0  # OpenDP accounts, not the mechanism
    both = dp.c.make_composition([meas, make_measurement(LaplaceMechanism(F, epsilon=0.25))])
    assert both.map(1.0) == pytest.approx(0.75)
    odo = dp.c.make_fully_adaptive_composition(meas.input_domain, meas.input_metric, meas.output_measure)
    q = odo(x.tolist())
    q(meas)
    q(meas)
    assert q.privacy_loss(1.0) == pytest.approx(1.0)


def test_gaussian_maps_are_zcdp_with_the_mechanisms_mu():
    """Gaussian: μ = Δ₂/σ, ρ(d) = (μd)²/2; residual Gaussian: its μ (1/σ₁(ε, δ)); both exact."""
    F = W.marginals((2, 3), 1)
    g = GaussianMechanism(F, epsilon=1.0, delta=1e-6)
    mg = make_measurement(g)
    mu = g.sensitivity / g.sigma
    assert mg.map(1.0) == pytest.approx(mu**2 / 2, rel=1e-12) and mg.map(2.0) == pytest.approx(2 * mu**2, rel=1e-12)
    r = ResidualGaussianMechanism(F, epsilon=1.0, delta=1e-6)
    mr = make_measurement(r)
    assert mr.map(1.0) == pytest.approx(r.mu**2 / 2, rel=1e-12)
    # OpenDP's zCDP → (ε, δ) conversion holds our δ at an ε no smaller than ours (its bound is not exact)
    approx = dp.c.make_zCDP_to_approxDP(mr)
    assert approx.map(1.0).epsilon(1e-6) >= 1.0 - 1e-9
    assert math.isfinite(np.asarray(mr([3.0, 4.0, 5.0, 6.0, 7.0, 8.0])).sum())


def test_refusals():
    F = W.marginals((2, 2, 2), 2)
    approx = KNormMechanism(F, epsilon=1.0, accept_uncertified=True)  # K by MCMC: an approximate claim
    assert approx.privacy_per_answer.approximate
    with pytest.raises(ValueError, match="^mechanism: its claim is approximate"):
        make_measurement(approx)
    with pytest.warns(UserWarning, match="approximate"):
        assert make_measurement(approx, accept_approximate=True).map(1.0) == 1.0
    with pytest.raises(ValueError, match="^mechanism: its noise comes from a known seed"):
        make_measurement(LaplaceMechanism(F, epsilon=1.0, rng=3))
    with pytest.raises(ValueError, match="^mechanism must be a knorm Mechanism"):
        make_measurement(object())
    with pytest.raises(ValueError, match="^accept_approximate"):
        make_measurement(LaplaceMechanism(F, epsilon=1.0), accept_approximate=1)
