"""Privacy accounting: claims compose over releases, budgets refuse, seeded noise is flagged."""

import numpy as np
import pytest

from knorm import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
from knorm import workloads as W
from knorm.discrete import FiniteDomainMechanism, RandomizedResponse
from knorm.functional import GaussianKDEMechanism
from knorm.mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism
from knorm.privacy import BudgetAccountant, BudgetExceededError

F = W.prefix(4)
X = np.array([3.0, 1.0, 0.0, 2.0])


def test_claim_counts_every_answer_and_resets():
    m = LaplaceMechanism(F, epsilon=0.5)
    assert m.answers == 0 and m.privacy.epsilon == 0.0 and m.privacy.answers == 0
    assert m.privacy_per_answer.epsilon == 0.5 and m.privacy_per_answer.answers == 1
    m.release(X)
    assert m.privacy.epsilon == 0.5
    m.release(X, size=4)  # four answers on the same data: 4ε more
    assert m.answers == 5 and m.privacy.epsilon == pytest.approx(2.5)
    assert "basic composition of 5 answers" in m.privacy.composition
    m.sample_noise(100)  # noise alone touches no data
    assert m.answers == 5
    m.reset()
    assert m.privacy.epsilon == 0.0 and m.privacy_per_answer.epsilon == 0.5


def test_approximate_dp_deltas_add_up_and_cap_at_one():
    m = GaussianMechanism(F, epsilon=1.0, delta=0.3)
    m.release(X, size=3)
    assert m.privacy.epsilon == 3.0 and m.privacy.delta == pytest.approx(0.9)
    m.release(X)
    assert m.privacy.delta == 1.0  # a δ of 1 promises nothing, and says so


def test_noise_source_is_recorded_and_seeded_runs_are_not_private():
    assert LaplaceMechanism(F, epsilon=1).privacy_per_answer.noise_source == "os-entropy"
    seeded = LaplaceMechanism(F, epsilon=1, rng=3).privacy_per_answer
    assert seeded.noise_source == "seed" and not seeded.private and "NOT PRIVATE" in str(seeded)
    gen = LaplaceMechanism(F, epsilon=1, rng=np.random.default_rng()).privacy_per_answer
    assert gen.noise_source == "generator" and gen.private
    assert LaplaceMechanism(F, epsilon=1).privacy_per_answer.as_dict()["private"] is True


def test_unseeded_mechanisms_draw_fresh_noise():
    a = LaplaceMechanism(F, epsilon=1).release(X)
    b = LaplaceMechanism(F, epsilon=1).release(X)
    assert not np.array_equal(a, b)


def test_mcmc_claims_are_called_approximate():
    m = KNormMechanism(W.random_pm1(6, 20, rng=1), epsilon=1.0)
    c = m.privacy_per_answer
    assert c.sampling == "mcmc-approximate" and c.approximate and "approximate" in str(c)
    assert KNormMechanism(np.eye(3), epsilon=1.0).privacy_per_answer.exact


def test_shared_accountant_composes_mechanisms_and_refuses_before_drawing():
    acc = BudgetAccountant(epsilon=1.0, delta=1e-6)
    lap = LaplaceMechanism(F, epsilon=0.25, accountant=acc)
    gau = GaussianMechanism(F, epsilon=0.25, delta=1e-7, accountant=acc)
    lap.release(X, size=2)
    gau.release(X)
    assert acc.total == (pytest.approx(0.75), pytest.approx(1e-7))
    state = lap._rng.bit_generator.state
    with pytest.raises(BudgetExceededError, match="budget exceeded"):
        lap.release(X, size=2)  # 0.75 + 0.5 > 1
    assert lap._rng.bit_generator.state == state  # no noise was drawn
    assert lap.answers == 2 and len(acc.spends) == 2  # one spend per release call
    lap.release(X)  # exactly fills the budget
    assert acc.remaining[0] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(BudgetExceededError):
        gau.release(X)


def test_accountant_sums_tenths_to_one_and_validates():
    acc = BudgetAccountant(epsilon=1.0)
    for _ in range(10):
        acc.spend(0.1)  # floating-point 0.1·10 must fit a budget of 1
    with pytest.raises(BudgetExceededError):
        acc.spend(0.1)
    with pytest.raises(ValueError, match="epsilon"):
        BudgetAccountant(epsilon=-1)
    with pytest.raises(ValueError, match="delta"):
        BudgetAccountant(delta=2)
    with pytest.raises(ValueError, match="accountant"):
        LaplaceMechanism(F, epsilon=1, accountant="lots")


def test_nim_composes_per_answer_over_levels_and_answers():
    m = NIMechanism(np.diag([4.0, 2.0, 1.0, 0.5]), epsilon=1.0)
    assert m.privacy_per_answer.epsilon == 1.0
    m.release(np.ones(4), size=3)
    assert m.privacy.epsilon == pytest.approx(3.0) and m.privacy.answers == 3


@pytest.mark.parametrize("make,call", [
    (lambda acc: RandomizedResponse(k=3, epsilon=0.5, accountant=acc), lambda m: m.release([0, 1, 2])),
    (lambda acc: FiniteDomainMechanism(4, epsilon=0.5, accountant=acc), lambda m: m.release([0, 4])),
    (lambda acc: BoundedLaplaceMechanism(0, 1, epsilon=0.5, delta=1e-9, accountant=acc),
     lambda m: m.release(0.5)),
    (lambda acc: CovarianceGaussianMechanism(np.eye(2), 1.0, epsilon=0.5, delta=1e-9, accountant=acc),
     lambda m: m.release([1.0, 2.0])),
    (lambda acc: GaussianKDEMechanism([0.1, 0.5], bandwidth=0.3, epsilon=0.5, delta=1e-9, accountant=acc),
     lambda m: m.release()),
])
def test_every_mechanism_accounts(make, call):
    acc = BudgetAccountant(epsilon=1.0, delta=1e-8)
    m = make(acc)
    call(m)
    call(m)
    assert m.answers == 2 and m.privacy.epsilon == pytest.approx(1.0)
    assert acc.total[0] == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError):
        call(m)
    assert m.answers == 2


# ---- bad input and overflow (issue 8 item 5) ---------------------------------------------

def test_randomized_response_for_huge_epsilon_tells_the_truth():
    """e^ε overflows at ε ≥ 710; p_truth = 1/(1 + (k−1)e^{−ε}) → 1, never NaN."""
    for eps in (709.0, 710.0, 1e5, 1e300):
        rr = RandomizedResponse(k=4, epsilon=eps, rng=1)
        assert rr.p_truth == 1.0 and rr.p_other == pytest.approx(np.exp(-eps), rel=1e-12, abs=1e-320)
        v = np.arange(4).repeat(50)
        assert np.array_equal(rr.release(v), v)
        fd = FiniteDomainMechanism(3, epsilon=eps, rng=1)
        assert np.isfinite(fd.p) and fd.p_truth == 1.0 and np.array_equal(fd.release([0, 3]), [0, 3])
        assert fd.privacy_profile(eps) == 0.0 and np.isfinite(fd.lower_bound())


def test_randomized_response_probabilities_match_the_direct_formula():
    for k, eps in [(2, 0.3), (5, 2.0), (3, 30.0)]:
        rr = RandomizedResponse(k=k, epsilon=eps)
        assert rr.p_truth == pytest.approx(np.exp(eps) / (np.exp(eps) + k - 1), rel=1e-14)
        assert rr.p_other == pytest.approx(1 / (np.exp(eps) + k - 1), rel=1e-14)
        fd = FiniteDomainMechanism(k, epsilon=eps, delta=0.01)
        assert fd.p == pytest.approx(0.99 / (k + np.exp(eps)), rel=1e-14)


def test_tiny_epsilon_fails_instead_of_returning_infinities():
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceMechanism(F * 1e10, epsilon=1e-300)
    with pytest.raises(ValueError, match="epsilon"):
        BoundedLaplaceMechanism(0, 1e300, epsilon=1e-300, delta=1e-300)  # b = diam/(ε − ln(1 − δ)) overflows
    with pytest.raises(ValueError, match="epsilon"):  # refused when built: the noise scale overflows
        KNormMechanism(np.eye(3) * 1e10, epsilon=1e-300)
    g = GaussianMechanism(F, epsilon=1e-300, delta=1e-6)  # σ stays finite as ε → 0: δ alone bounds it
    assert np.isfinite(g.sigma) and np.all(np.isfinite(g.release(X)))


def test_kde_bandwidth_out_of_float_range_is_refused_or_works():
    for h in (1e-300, 1e300):
        with pytest.raises(ValueError, match="bandwidth"):
            GaussianKDEMechanism(np.zeros((5, 3)), bandwidth=h, epsilon=0.5, delta=1e-6)
    m = GaussianKDEMechanism([0.0, 1.0], bandwidth=1e-150, epsilon=0.5, delta=1e-6, rng=0)
    assert m.kernel(np.array([[0.0]]), np.array([[1.0]]))[0, 0] == 0.0
    for bad in (0, -1.0, np.nan, np.inf, "1", True):
        with pytest.raises(ValueError, match="bandwidth"):
            GaussianKDEMechanism([0.0, 1.0], bandwidth=bad, epsilon=0.5, delta=1e-6)


@pytest.mark.parametrize("n", [0, 1, -3, 2.5, None])
def test_expected_error_needs_two_samples(n):
    # K-norm's and NIM's None is their default (the certified pool where there is one, else draws)
    mechs = (LaplaceMechanism(F, epsilon=1),) + (() if n is None else (NIMechanism(np.eye(2), epsilon=1),
                                                                         KNormMechanism(np.eye(2), epsilon=1)))
    for m in mechs:
        with pytest.raises(ValueError, match="n_samples"):
            m.expected_error(n_samples=n)


@pytest.mark.parametrize("scale", [1e-300, 1e300])
def test_error_estimates_at_extreme_scales_of_F(scale):
    """E‖noise‖₂ scales exactly with F (the norms are computed without squaring overflow)."""
    F0 = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]])  # a hexagon: MCMC, not an exact path
    ref = KNormMechanism(F0, epsilon=1e3, rng=1).expected_error(n_samples=400)
    big = KNormMechanism(F0 * scale, epsilon=1e3, rng=1).expected_error(n_samples=400)
    assert np.isfinite(big.value) and big.value > 0
    assert big.value / scale == pytest.approx(ref.value, rel=8 * ref.stderr / ref.value)
    nim = NIMechanism(np.diag([4.0, 2.0, 1.0]) * scale, epsilon=1e3, rng=2, split="halves")
    assert [lv.dim for lv in nim.levels] == [3, 1]
    assert np.allclose(np.abs(nim.levels[1].basis[:, 0]), [1, 0, 0])  # the longest axis is split off last


def test_expected_error_offers_the_rms_form_against_exact_values():
    """Issue 44: expected_error(rms=True) is √E‖noise‖₂², comparable with per-query RMSEs.
    Exact values derived here: Laplace √(2d)·Δ₁/ε; K-norm on F = I_d (the cross-polytope):
    E r² = (d+1)(d+2)/ε², E‖z‖² = 2d/((d+1)(d+2)), so √(2d)/ε; K-norm on the hexagon
    conv(±e₁, ±e₂, ±(1, −1)) (MCMC): E‖z‖² over its six triangles (0, a, b), each of area 1/2,
    is the mean of (|a|² + |b|² + a·b)/6 = 1/3, 2/3, 2/3 (twice): 5/9, so √(12·5/9)/ε (k = 2),
    the pool's estimate within 4 of its standard errors."""
    F = W.prefix(5)
    lap = LaplaceMechanism(F, epsilon=0.5)
    e = lap.expected_error(rms=True)
    assert e.exact and e.value == pytest.approx(np.sqrt(2 * 5) * 5 / 0.5, rel=1e-12)
    e = KNormMechanism(np.eye(4), epsilon=2.0).expected_error(rms=True)
    assert e.exact and e.value == pytest.approx(np.sqrt(8) / 2.0, rel=1e-12)
    hexagon = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, -1.0]])
    e = KNormMechanism(hexagon, epsilon=1.0, rng=0).expected_error(rms=True)
    assert not e.exact and abs(e.value - np.sqrt(12 * 5 / 9)) < 4 * e.stderr, e
    assert NIMechanism(hexagon, epsilon=1.0, rng=0).expected_error(rms=True).value > 0
    with pytest.raises(ValueError, match="rms must be True or False"):
        lap.expected_error(rms="yes")
