"""Never a silently wrong number (issue 42, docs/design.md §10.1): at any ε and any count the API
accepts, every mechanism's answer lies within its noise of Fx, or the mechanism refuses ε by name.

Before issue 42 the grid's clamp ``±2^50·γ`` was tied to the noise scale, not to the answers: at
ε = 10⁴ with counts 10⁸ (or ε = 1 with counts 10¹³, ε = 10¹² with counts 10³) the answers were
replaced by the clamp, 10³–10¹³ away from Fx, and at ε = 10³⁰⁰ every answer came back ≈ 10⁻²⁸⁶.

The bound (derived here, not taken from the code): every mechanism's noise on answer i is a
sum of at most d + 1 terms, each at most 40 of its own noise scales in size except with
probability below e⁻⁴⁰ (Laplace, Gaussian, Gamma tails), and each noise scale is at most
``(d + 1)·Δ₁·(5/ε + 1/√ε)``, Δ₁ = F's largest column ℓ₁ norm:

* Laplace ``Δ₁/ε``; the strategies ``F A⁺ z``, z Laplace ``Δ_A/ε`` (``|F A⁺|_∞ ≤ d + 1`` for
  the identity, hierarchical and p-Identity strategies of these F, whose entries are 0/1);
* K-norm ``r·z``: ``|z_i| ≤ max_j |F_ij| ≤ Δ₁``, ``r ~ Gamma(dim + 1, 1/ε)`` (dim ≤ d); NIM a
  sum of at most d levels, each at ε/levels;
* Gaussian (analytic, residual, SVD): ``σ ≤ Δ₂·(√(2 ln(1.25/δ))/ε + 1/√ε)`` with Δ₂ ≤ Δ₁
  (for ε ≫ 1 the analytic σ ≈ Δ₂/√(2ε)); √(2 ln(1.25·10⁶)) < 5.4, and d + 1 covers it.

So ``|a − Fx|_∞ ≤ 40·(d + 1)²·Δ₁·(5/ε + 1/√ε) + ulp`` where the ulp term is float64's own
spacing at the answer, ``2⁻⁵⁰·max|Fx|`` (answers beyond the grid's range lie on it). The
failures of before are 10³–10¹³ away, ≥ 10³ times this bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import knorm
import knorm.privacy
from knorm import workloads as W

P8 = W.prefix(8)  # exact K-norm and NIM draws
PM = W.random_pm1(4, 8, rng=0)  # MCMC K-norm and NIM (certified once per F)
MARG = W.marginals([2, 2, 2], 2)  # 12 answers over 8 cells: the residual Gaussian's F

MECHANISMS = {  # name -> (F, make(F, epsilon))
    "Laplace": (P8, lambda F, e: knorm.LaplaceMechanism(F, epsilon=e, rng=0)),
    "Gaussian": (P8, lambda F, e: knorm.GaussianMechanism(F, epsilon=e, delta=1e-6, rng=0)),
    "K-norm exact": (P8, lambda F, e: knorm.KNormMechanism(F, epsilon=e, rng=0)),
    "K-norm MCMC": (PM, lambda F, e: knorm.KNormMechanism(F, epsilon=e, rng=0)),
    "NIM exact": (P8, lambda F, e: knorm.NIMechanism(F, epsilon=e, rng=0)),
    "NIM MCMC": (PM, lambda F, e: knorm.NIMechanism(F, epsilon=e, rng=0)),
    "identity": (P8, lambda F, e: knorm.IdentityMechanism(F, epsilon=e, rng=0)),
    "hierarchical": (P8, lambda F, e: knorm.HierarchicalMechanism(F, epsilon=e, rng=0)),
    "p-Identity": (P8, lambda F, e: knorm.PIdentityMechanism(F, epsilon=e, maxiter=20, rng=0)),
    "Kronecker": (P8, lambda F, e: knorm.KroneckerStrategyMechanism(F, epsilon=e, strategies=[np.eye(8)], rng=0)),
    "Kronecker p-Identity": (P8, lambda F, e: knorm.KroneckerPIdentityMechanism(F, epsilon=e, maxiter=20, rng=0)),
    "Kronecker hierarchical": (P8, lambda F, e: knorm.KroneckerHierarchicalMechanism(F, epsilon=e, rng=0)),
    "residual Gaussian": (MARG, lambda F, e: knorm.ResidualGaussianMechanism(F, epsilon=e, delta=1e-6, rng=0)),
    "SVD Gaussian": (P8, lambda F, e: knorm.SVDGaussianMechanism(F, epsilon=e, delta=1e-6, rng=0)),
}
EPSILONS = [1e-3, 1.0, 1e4, 1e6, 1e9, 1e12, 1e100, 1e200, 1e300]
COUNTS = [0.0, 3.0, 1e3, 1e6, 1e8, 1e13]


def bound(F: np.ndarray, epsilon: float, fx: np.ndarray) -> float:
    """The module docstring's bound on ``|a − Fx|_∞``."""
    d = F.shape[0]
    l1 = float(np.abs(F).sum(axis=0).max())
    return 40.0 * (d + 1) ** 2 * l1 * (5.0 / epsilon + 1.0 / np.sqrt(epsilon)) + 2.0**-50 * float(np.max(np.abs(fx)))


def check_release(name: str, epsilon: float, counts: list[float]) -> None:
    F, make = MECHANISMS[name]
    m = make(F, epsilon)
    for c in counts:
        x = np.arange(F.shape[1], dtype=float) % 2 * c + c  # c and 2c: no two answers alike
        try:
            a = m.release(x, size=3)
        except ValueError as e:  # the clear errors: counts where float64's spacing reaches the grid, or no grid
            if "the answers' magnitude" in str(e):  # refused where spacing(max|F|·‖x‖₁) >= γ (issue 51)
                assert str(e).startswith("x: ") and "\n" not in str(e), (name, e)
                assert np.spacing(np.abs(F).max() * np.abs(x).sum()) >= 2.0**m.grid_exponent, (name, epsilon, c)
                assert m.privacy.answers == 3 * counts.index(c)  # nothing counted for it
                return
            assert str(e).startswith(f"epsilon={epsilon:.3g} gives a noise scale") and "\n" not in str(e), (name, e)
            assert epsilon > 1e250, (name, epsilon, e)  # only where the noise scale is below 2^-990
            assert m.privacy.answers == 0  # nothing released, nothing counted
            return
        fx = F @ x
        assert np.spacing(np.abs(F).max() * np.abs(x).sum()) < 2.0**m.grid_exponent  # answered below the limit
        gap = float(np.max(np.abs(a - fx)))
        assert gap <= bound(F, epsilon, fx), (name, epsilon, c, gap)
        assert m.privacy.epsilon == pytest.approx(3 * epsilon * (counts.index(c) + 1))


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_every_mechanism_answers_within_its_noise_at_any_epsilon_and_count(name):
    """9 ε from 10⁻³ to 10³⁰⁰ × 6 counts from 0 to 10¹³ (issue 42's failures among them: ε = 10⁴
    with 10⁸, 10⁶ with 10⁶, 10⁹ or 10¹² with 10³, 1 with 10¹³, 10³⁰⁰ with 3)."""
    for eps in EPSILONS:
        check_release(name, eps, COUNTS)


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(list(MECHANISMS)), log_eps=st.floats(-3.0, 305.0), log_count=st.floats(0.0, 15.0))
def test_property_answer_within_noise_of_fx_or_a_clear_error(name, log_eps, log_count):
    """The property for every mechanism's release: within the bound of Fx, or epsilon refused by name."""
    check_release(name, float(10.0**log_eps), [float(np.floor(10.0**log_count))])


def test_bounded_and_covariance_gaussian_answers_are_never_clamped():
    """The mechanisms on one value (bounded Laplace) or answers given (covariance Gaussian): a
    domain [10¹², 10¹² + 1] at ε = 1 was clamped at 2^40 ≈ 1.1·10¹² and then clipped to its floor."""
    b = knorm.BoundedLaplaceMechanism(1e12, 1e12 + 1, epsilon=1.0, delta=1e-6, clip=False, rng=0)
    v = b.release(1e12 + 0.5, size=200)
    assert np.all(np.abs(v - (1e12 + 0.5)) <= 40 * b.scale)  # Laplace(b): beyond 40b with probability e^-40
    g = knorm.CovarianceGaussianMechanism(np.eye(2), 1.0, epsilon=0.5, delta=1e-6, rng=0)
    a = g.release([1e12, -3e13], size=50)  # below 2^45, where float64's spacing reaches its grid 2^-7 (issue 51)
    sigma = g.c  # σ of each coordinate (M = I): beyond 40σ with probability below e^-800
    assert np.all(np.abs(a - [1e12, -3e13]) <= 40 * sigma + 2.0**-50 * 3e13)


def test_a_noise_scale_without_a_grid_is_refused_before_anything_is_drawn():
    """ε = 10³⁰⁰ on 0/1 F: noise ≈ 10⁻³⁰⁰, below any grid 2^10 finer that float64 holds above its
    subnormals; every release is refused (naming epsilon) before its noise is drawn or counted,
    never coarsened into a grid wider than the noise. The mechanism itself still answers what
    needs no release: its claim (without a grid), errors and noise draws."""
    for make in (lambda acc: knorm.LaplaceMechanism(P8, epsilon=1e300, rng=0, accountant=acc),
                 lambda acc: knorm.KNormMechanism(P8, epsilon=1e300, rng=0, accountant=acc),
                 lambda acc: knorm.IdentityMechanism(P8, epsilon=1e300, rng=0, accountant=acc)):
        acc = knorm.privacy.BudgetAccountant()
        m = make(acc)
        state = m._rng.bit_generator.state
        for release in (m.release, getattr(m, "release_estimate", m.release)):
            with pytest.raises(ValueError, match=r"^epsilon=1e\+300 gives a noise scale that is below 2\^-990"):
                release(np.arange(8.0))
        assert m._rng.bit_generator.state == state and acc.total == (0.0, 0.0) and m.privacy.answers == 0
        assert "grid" not in m.privacy.details and np.isfinite(float(m.expected_error()))
    m = knorm.LaplaceMechanism(P8, epsilon=1e295, rng=0)  # just above: a grid, but counts of 1 are huge to it
    with pytest.raises(ValueError, match=r"^x: the answers' magnitude"):  # noise ≈ 10⁻²⁹⁵ is far below float64's
        m.release(np.arange(8.0))  # spacing at Fx >= 1: refused (issue 51), no longer answered as Fx exactly
    a = m.release(np.zeros(8))
    assert np.all(np.abs(a) <= 40 * m.scale) and np.any(a != 0)  # at Fx = 0 the noise itself, on its grid
