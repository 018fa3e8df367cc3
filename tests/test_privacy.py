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


# ---- export to dp-accounting DpEvents (the `accounting` extra) --------------------------------

F_PM = np.random.default_rng(3).choice([-1.0, 1.0], size=(4, 9))  # Δ₁ = 4, Δ₂ = 2
X = np.arange(9.0)


def _pld(dpa):
    from dp_accounting.pld import PLDAccountant

    return PLDAccountant(value_discretization_interval=1e-4)


def rr_delta(eps, k, eps_prime):
    """Exact δ(ε') of k-fold binary randomized response at ε: the privacy loss is
    L = (k − 2j)ε with j ~ Binomial(k, 1/(1+e^ε)) (j flipped answers), and
    δ(ε') = E[(1 − e^{ε' − L})₊] (hockey-stick divergence)."""
    j = np.arange(k + 1)
    loss = (k - 2 * j) * eps
    return float(np.sum(stats.binom.pmf(j, k, 1 / (1 + np.exp(eps))) * np.maximum(0.0, 1 - np.exp(eps_prime - loss))))


def test_laplace_claims_export_as_laplace_events_and_compose_to_k_epsilon():
    dpa = pytest.importorskip("dp_accounting")
    from knorm import LaplaceMechanism

    mech = LaplaceMechanism(F_PM, epsilon=0.5)  # scale Δ₁/ε = 8: noise multiplier 8/4 = 2 = 1/ε
    assert mech.privacy_per_answer.to_dp_event() == dpa.LaplaceDpEvent(noise_multiplier=2.0)
    assert mech.privacy.to_dp_event() == dpa.NoOpDpEvent()  # nothing released yet
    mech.release(X, size=5)
    event = mech.privacy.to_dp_event()
    assert event == dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(noise_multiplier=2.0), 5)
    acc = _pld(dpa).compose(event)
    # 5 Laplace answers lose exactly kε = 2.5 with probability 2^-5 (every shift against the
    # noise's sign), so at δ = 1e-9 the tight ε is within −log(1 − 32e-9) ≈ 3e-8 of kε = 2.5
    assert acc.get_epsilon(1e-9) == pytest.approx(5 * 0.5, abs=1e-3)
    assert acc.get_epsilon(1e-9) <= mech.privacy.epsilon + 1e-3  # never looser than the claim


def test_a_d_dimensional_laplace_shift_is_dominated_by_the_one_coordinate_shift():
    """Why a d-dimensional Laplace claim is one LaplaceDpEvent: splitting the ℓ₁ shift over
    coordinates (a composition of smaller Laplace shifts) never raises δ(ε)."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    def lap(s):
        return pld.from_laplace_mechanism(1.0, sensitivity=s, value_discretization_interval=1e-4)

    one = lap(1.0)
    for a in (0.5, 0.2):
        split = lap(a).compose(lap(1 - a))
        for eps in (0.0, 0.3, 0.7):
            assert split.get_delta_for_epsilon(eps) <= one.get_delta_for_epsilon(eps) + 1e-6


def test_gaussian_claims_export_as_gaussian_events():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import RdpAccountant

    from knorm import GaussianMechanism

    mech = GaussianMechanism(F_PM, epsilon=1.0, delta=1e-6)
    nm = mech.sigma / 2.0  # Δ₂ = 2
    assert mech.privacy_per_answer.to_dp_event() == dpa.GaussianDpEvent(noise_multiplier=pytest.approx(nm))
    mech.release(X, size=10)
    event = mech.privacy.to_dp_event()
    # k Gaussian answers are √k/nm-GDP: the PLD accountant's ε at δ = kδ is gdp_epsilon(kδ, √k/nm),
    # far below basic composition's kε = 10
    pld_eps = _pld(dpa).compose(event).get_epsilon(1e-5)
    assert pld_eps == pytest.approx(P.gdp_epsilon(1e-5, np.sqrt(10) / nm), rel=2e-3)
    rdp_eps = RdpAccountant().compose(event).get_epsilon(1e-5)
    assert pld_eps <= rdp_eps <= mech.privacy.epsilon


def test_pure_claims_export_as_the_randomized_response_pair_with_the_exact_composition():
    """K-norm, NIM and other pure ε-DP claims: discrete Laplace at sensitivity 1, whose privacy
    loss is ±ε as binary randomized response's (trade-off f_{ε,0}); the accountant's k-fold
    composition is the optimal one (rr_delta)."""
    dpa = pytest.importorskip("dp_accounting")
    from knorm.mechanisms import PrivacyClaim

    eps, k = 0.3, 20
    claim = PrivacyClaim("K-norm", eps, 0.0, "pure ε-DP", "mcmc-approximate").composed(k)
    event = claim.to_dp_event()
    assert event == dpa.SelfComposedDpEvent(dpa.dp_event.DiscreteLaplaceDpEvent(noise_parameter=eps, sensitivity=1), k)
    acc = _pld(dpa).compose(event)
    # L = kε with probability (e^ε/(1+e^ε))^k ≈ 1.4e-5, so at δ = 1e-12 the tight ε is within
    # −log(1 − 1e-12/1.4e-5) ≈ 7e-8 of kε: basic composition is tight for small δ
    assert acc.get_epsilon(1e-12) == pytest.approx(k * eps, abs=1e-3)
    for eps_prime in (2.0, 4.0):
        assert acc.get_delta(eps_prime) == pytest.approx(rr_delta(eps, k, eps_prime), rel=1e-3)
    e_adv, _ = P.advanced_composition(eps, 0.0, k, 1e-3)
    assert acc.get_epsilon(1e-3) <= min(k * eps, e_adv)


def test_budget_accountant_exports_every_spend():
    dpa = pytest.importorskip("dp_accounting")
    from knorm import GaussianMechanism, LaplaceMechanism

    budget = P.BudgetAccountant(epsilon=10.0, delta=1e-3)
    LaplaceMechanism(F_PM, epsilon=0.5, accountant=budget).release(X, size=3)
    GaussianMechanism(F_PM, epsilon=1.0, delta=1e-6, accountant=budget).release(X)
    event = budget.to_dp_event()
    assert isinstance(event, dpa.ComposedDpEvent) and len(event.events) == 2
    assert event.events[0] == dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(noise_multiplier=2.0), 3)
    acc = _pld(dpa).compose(event)
    eps_total, delta_total = budget.total
    assert acc.get_epsilon(delta_total) <= eps_total  # tighter than (never above) basic composition
    budget.spend(0.5)  # a bare pure spend: the randomized-response pair
    assert budget.to_dp_event().events[-1] == P.epsilon_delta_dp_event(0.5)
    budget.spend(0.1, 1e-6)  # a bare (ε, δ) pair has no dp-accounting event: accountants refuse it
    assert budget.to_dp_event().events[-1] == dpa.UnsupportedDpEvent()
    assert not _pld(dpa).supports(budget.to_dp_event())


def test_seeded_claims_are_not_private_events():
    dpa = pytest.importorskip("dp_accounting")
    from knorm import LaplaceMechanism

    assert LaplaceMechanism(F_PM, epsilon=1.0, rng=1).privacy_per_answer.to_dp_event() == dpa.NonPrivateDpEvent()


def test_dp_event_export_without_the_extra_names_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ImportError, match=r"knorm\[accounting\]"):
        P.epsilon_delta_dp_event(1.0)


# ---- issue 17: odd arguments, results past float64, and a composed δ over 1 -------------------

@pytest.mark.parametrize("call, name", [
    (lambda v: P.gdp_delta(v, 1.0), "epsilon"), (lambda v: P.gdp_delta(1.0, v), "mu"),
    (lambda v: P.tradeoff_eps_delta(v, 1.0), "alpha"), (lambda v: P.tradeoff_gdp(v, 1.0), "alpha"),
    (lambda v: P.advanced_composition(v, 0.0, 2, 1e-5), "epsilon"), (lambda v: P.advanced_composition(1.0, 0.0, v, 1e-5), "k"),
    (lambda v: P.gaussian_mu(v, 1.0), "sensitivity"), (lambda v: P.gaussian_mu(1.0, v), "sigma"),
    (lambda v: P.group_gdp(1.0, v), "k"), (lambda v: P.group_privacy(1.0, 0.1, v), "k"),
    (lambda v: P.basic_composition([1.0, v]), "epsilons"), (lambda v: P.gdp_compose(1.0, v), "mus"),
    (lambda v: P.gdp_mu_for(v, 1e-5), "epsilon"), (lambda v: P.gdp_epsilon(1e-5, v), "mu"),
    (lambda v: P.epsilon_delta_dp_event(v), "epsilon"), (lambda v: P.BudgetAccountant(delta=v), "delta"),
    (lambda v: P.BudgetAccountant(epsilon=2.0).spend(v), "epsilon"),
])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "1", None, 1j, True])
def test_helpers_refuse_odd_arguments_by_name(call, name, value):
    """Each used to return NaN/inf or raise a raw TypeError/OverflowError for some of these."""
    with pytest.raises(ValueError, match=rf"(^|\W){name}\W"):
        call(value)


def test_an_unlimited_budget_is_the_one_infinite_epsilon():
    acc = P.BudgetAccountant(epsilon=float("inf"))
    assert acc.spend(1.7e308) == (1.7e308, 0.0)
    with pytest.raises(ValueError, match="epsilon"):  # the total itself would leave float64
        acc.spend(1.7e308)
    assert len(acc.spends) == 1


def test_results_past_float64_are_refused_and_saturating_ones_are_exact():
    with pytest.raises(ValueError, match="epsilon = 1e.300, k = 2"):
        P.advanced_composition(1e300, 0.0, 2, 1e-5)  # ε(e^ε − 1) overflows
    with pytest.raises(ValueError, match="k·mu"):
        P.group_gdp(1e300, 10**10)
    with pytest.raises(ValueError, match="mu = 1e.300"):
        P.gdp_epsilon(1e-5, 1e300)  # ε ≈ μ²/2
    # e^{(k−1)ε}·kδ >= 1 exactly where it saturates; below that, the formula itself
    assert P.group_privacy(1e300, 0.1, 3) == (3e300, 1.0)
    assert P.group_privacy(1.0, 1e-10, 3)[1] == pytest.approx(3 * np.exp(2.0) * 1e-10, rel=1e-13)
    assert P.gdp_compose(1e300, 1e300) == pytest.approx(np.sqrt(2) * 1e300, rel=1e-15)  # was inf
    assert P.gdp_compose(3e-300, 4e-300) == pytest.approx(5e-300, rel=1e-15)  # was 0
    # f_{ε,0}(0) = 1 for every ε (e^ε·0 used to give NaN at ε = 1e300)
    assert P.tradeoff_eps_delta(0.0, 1e300) == 1.0
    assert P.gdp_delta(1e300, 1.0) == 0.0 and P.gdp_delta(1.0, 1e300) == 1.0
    with pytest.raises(ValueError, match="sensitivity/sigma"):
        P.gaussian_mu(1e300, 1e-300)


def test_gdp_mu_for_tiny_delta_brackets_below_1e_12():
    """δ(0; μ) = 2Φ(μ/2) − 1 ≈ μ/√(2π): at δ = 1e-300 the μ is ≈ 2.5e-300 (the old bracket
    started at 1e-12 and failed)."""
    mu = P.gdp_mu_for(0.0, 1e-300)
    assert mu == pytest.approx(1e-300 * np.sqrt(2 * np.pi), rel=1e-6)
    assert P.gdp_delta(0.0, mu) == pytest.approx(1e-300, rel=1e-9)


def test_a_composed_delta_over_one_exceeds_the_budget():
    """Gaussian δ = 0.5 releasing 3 answers spends kδ = 1.5: BudgetExceededError, not "delta
    must be in [0, 1]"; nothing recorded, nothing released."""
    from knorm.mechanisms import GaussianMechanism

    acc = P.BudgetAccountant(epsilon=10.0, delta=0.9)
    mech = GaussianMechanism(np.eye(2), epsilon=1.0, delta=0.5, accountant=acc)
    with pytest.raises(P.BudgetExceededError, match="delta = 1.5"):
        mech.release(np.zeros(2), size=3)
    assert acc.spends == [] and mech.answers == 0
    # a budget δ = 1 holds any δ: min(1, Σδ) <= 1
    open_acc = P.BudgetAccountant(epsilon=10.0, delta=1.0)
    GaussianMechanism(np.eye(2), epsilon=1.0, delta=0.5, accountant=open_acc).release(np.zeros(2), size=3)
    assert open_acc.total == (3.0, 1.0)


def test_threads_sharing_an_accountant_never_pass_its_budget(monkeypatch):
    """8 threads, each its own Laplace mechanism (ε = 1) on one accountant of ε = 5, each asking for
    3 answers one at a time: exactly 5 answers are returned, the accountant holds ε = 5, and every
    mechanism's count is the answers it returned (a refused release counts nothing). The budget's
    check is slowed (1 ms after reading the total) so that, were a spend's check and record two
    steps, threads would pass it together (they did, without the accountant's lock)."""
    import threading
    import time

    import knorm
    from knorm.errors import BudgetExceededError
    from knorm.privacy import BudgetAccountant

    check = BudgetAccountant.check

    def slow_check(self, epsilon, delta=0.0):
        out = check(self, epsilon, delta)
        time.sleep(0.001)
        return out

    monkeypatch.setattr(BudgetAccountant, "check", slow_check)

    acc = knorm.privacy.BudgetAccountant(epsilon=5.0)
    F = np.eye(4)
    mechs = [knorm.LaplaceMechanism(F, epsilon=1.0, accountant=acc) for _ in range(8)]
    got = [0] * 8
    start = threading.Barrier(8)

    def run(i):
        start.wait()
        for _ in range(3):
            try:
                mechs[i].release(np.ones(4))
                got[i] += 1
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(got) == 5 and acc.total == (5.0, 0.0) and len(acc.spends) == 5
    assert [m.answers for m in mechs] == got
    import pickle
    assert pickle.loads(pickle.dumps(acc)).total == (5.0, 0.0)  # the lock is not pickled
