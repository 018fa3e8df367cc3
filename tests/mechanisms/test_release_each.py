"""One workload, many regions (issue 44): ``release_each(X)`` gives one answer per row of X, each
with its own noise, accounted by parallel composition over data sets known to be disjoint (issue 51:
histograms(by=...) or disjoint=True; tests/mechanisms/test_magnitude_disjoint.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import knorm
import knorm.privacy
from knorm import workloads as W
from knorm.data import Attribute, Domain, histogram, histograms

F = W.marginals([2, 3, 4], 2)  # 26 answers over 24 cells
X = np.random.default_rng(0).integers(0, 30, (60, F.shape[1]))


def test_laplace_rows_are_independent_draws_of_the_exact_law():
    """Each row's noise is Laplace(b) on every answer, independent across rows: the pooled
    standardised noise against Laplace(0, 1) (KS; the grid moves a value by at most b·2⁻¹¹), and
    the correlation of consecutive rows' noise against 0 (SE 1/√N)."""
    m = knorm.LaplaceMechanism(F, epsilon=0.7, rng=3)
    X2 = np.tile(X, (5, 1))  # 300 regions
    e = (m.release_each(X2) - X2 @ F.T) / m.scale
    assert stats.kstest(e.ravel(), stats.laplace.cdf).pvalue > 1e-3
    r = np.corrcoef(e[:-1].ravel(), e[1:].ravel())[0, 1]
    assert abs(r) < 4 / np.sqrt(e[1:].size)


def test_knorm_rows_have_the_exact_mean_l1_norm():
    """K-norm on F = I (K the cross-polytope, an exact sampler): noise r·z with r ~ Gamma(d+1, 1/ε)
    and z uniform in B₁^d, so E‖noise‖₁ = (d+1)/ε · d/(d+1) = d/ε; the mean over 400 regions within
    4 standard errors."""
    d, eps = 5, 2.0
    m = knorm.KNormMechanism(np.eye(d), epsilon=eps, rng=1)
    Xr = np.random.default_rng(2).integers(0, 100, (400, d))
    l1 = np.abs(m.release_each(Xr) - Xr).sum(axis=1)
    assert abs(l1.mean() - d / eps) < 4 * l1.std(ddof=1) / np.sqrt(len(l1))


def test_knorm_mcmc_rows_come_from_the_bank_consecutive_rows_from_different_chains():
    """MCMC K-norm: the rows' draws are the bank's, in order (no draw used twice), and after the
    first refill consecutive rows come from different chains."""
    F2 = W.random_pm1(6, 12, rng=0)
    m = knorm.KNormMechanism(F2, epsilon=1.0, rng=5)
    Xr = np.zeros((40, 12))
    a = m.release_each(Xr)
    src = m.last_info.extra["sources"][:40]
    assert len({tuple(s) for s in src}) == 40  # every row its own draw
    chains = src[:, 0]
    assert m.last_info.chains > 1 and np.all(chains[1:] != chains[:-1])
    assert len({tuple(np.round(r, 12)) for r in a}) == 40


@pytest.mark.parametrize("make", [
    lambda acc: knorm.LaplaceMechanism(F, epsilon=0.5, rng=0, accountant=acc),
    lambda acc: knorm.KNormMechanism(F, epsilon=0.5, rng=0, accountant=acc),
    lambda acc: knorm.NIMechanism(F, epsilon=0.5, rng=0, accountant=acc),
    lambda acc: knorm.HierarchicalMechanism(F, epsilon=0.5, rng=0, accountant=acc),
    lambda acc: knorm.GaussianMechanism(F, epsilon=0.5, delta=1e-6, rng=0, accountant=acc),
], ids=["laplace", "knorm", "nim", "hierarchical", "gaussian"])
def test_a_batch_over_disjoint_regions_costs_one_answer(make):
    """Parallel composition: one batch over 60 regions is (ε, δ); a second batch on the same regions
    composes to (2ε, 2δ); the accountant records each batch at one answer's (ε, δ) with the claim
    saying it; a single release after them counts one more answer."""
    acc = knorm.privacy.BudgetAccountant(epsilon=1.0, delta=1e-5)
    m = make(acc)
    eps, delta = m.privacy_per_answer.epsilon, m.privacy_per_answer.delta
    out = m.release_each(X, disjoint=True)  # a plain array: disjoint by the caller's word (issue 51)
    assert out.shape == (60, F.shape[0])
    p = m.privacy
    assert (p.epsilon, p.delta, p.answers, p.datasets) == (eps, delta, 1, 60)
    assert "parallel composition over 60 disjoint data sets (disjoint by the caller's declaration)" in p.composition
    assert "in one of 60 disjoint" in p.neighbours
    assert "on each of 60 disjoint data sets" in str(p)
    assert acc.total == pytest.approx((eps, delta)) and acc.spends[0].claim.datasets == 60
    m.release_each(X, disjoint=True)
    assert (m.privacy.epsilon, m.privacy.answers) == (2 * eps, 2)
    with pytest.raises(knorm.privacy.BudgetExceededError):
        m.release(X[0])  # a third answer on a region passes the budget of 1.0 (3 × 0.5)
    m.reset()
    assert (m.privacy.answers, m.privacy.datasets) == (0, 1)


def test_the_dp_event_of_a_batch_is_one_answers():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant as pld
    m = knorm.LaplaceMechanism(F, epsilon=0.5)  # OS entropy: a private claim (a seed's is NonPrivateDpEvent)
    m.release_each(X, disjoint=True)
    one = knorm.LaplaceMechanism(F, epsilon=0.5)
    one.release(X[0])
    assert m.privacy.to_dp_event() == one.privacy.to_dp_event()
    eps = pld.PLDAccountant().compose(m.privacy.to_dp_event()).get_epsilon(1e-9)
    assert eps == pytest.approx(0.5, rel=1e-3)


@pytest.mark.parametrize("bad,match", [
    (np.zeros(24), r"^X must be a 2-D array with at least one row of 24 counts"),
    (np.zeros((3, 5)), r"^X must be a 2-D array .* got rows of another length"),
    (np.zeros((0, 24)), r"^X must be a 2-D array .* got rows of another length or no row"),
    (-np.ones((2, 24)), r"^X has negative or non-integer entries"),
    (np.full((2, 24), np.nan), r"^X contains NaN or infinite entries"),
    ([["a"] * 24], r"^X must be a real numeric array"),
])
def test_bad_batches_are_refused_by_name_before_anything_is_drawn(bad, match):
    m = knorm.LaplaceMechanism(F, epsilon=1.0, rng=0)
    state = m._rng.bit_generator.state
    with pytest.raises(ValueError, match=match):
        m.release_each(bad)
    assert m.privacy.answers == 0 and m._rng.bit_generator.state == state


def test_histograms_by_a_declared_region_match_one_histogram_per_region():
    """Each row is the histogram of its region's records; a declared region without records is a
    row of zeros; an undeclared region is refused without naming it."""
    pd = pytest.importorskip("pandas")
    dom = Domain([Attribute("sex", categories=["F", "M"]), Attribute("age", edges=[0, 30, 60, np.inf])])
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"sex": rng.choice(["F", "M"], 500), "age": rng.uniform(0, 99, 500),
                       "state": rng.choice(["b", "a", "d"], 500)})
    by = Attribute("state", categories=["a", "b", "c", "d"])
    Xh, labels = histograms(df, dom, by=by)
    assert labels == ("a", "b", "c", "d") and Xh.shape == (4, dom.size) and Xh.dtype == np.int64
    for i, s in enumerate(labels):
        assert np.array_equal(Xh[i], histogram(df[df.state == s], dom))
    assert Xh.sum() == 500 and not Xh[2].any()
    with pytest.raises(ValueError, match="not among the declared categories") as e:
        histograms(df, dom, by=Attribute("state", categories=["a", "b"]))
    assert "'d'" not in str(e.value)
    with pytest.raises(ValueError, match="^by must be a knorm.data.Attribute declaring every region"):
        histograms(df, dom, by="state")
    X2, _ = histograms(df.rename(columns={"state": "region"}), dom, by=by, columns={"state": "region"})
    assert np.array_equal(X2, Xh)


def test_a_batch_on_a_dask_cluster_gives_the_answers_of_threads():
    """The rows' draws come from chains run on the given workers: a local cluster of 2 processes
    gives, for a seeded (non-private) run, the same answers to the bit as threads."""
    distributed = pytest.importorskip("dask.distributed")
    from knorm.distributed import DaskExecutor

    F2 = W.random_pm1(6, 12, rng=0)
    Xr = np.random.default_rng(3).integers(0, 9, (30, 12))
    want = knorm.KNormMechanism(F2, epsilon=1.0, rng=9, sampler_options={"workers": 2}).release_each(Xr)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        m = knorm.KNormMechanism(F2, epsilon=1.0, rng=9, sampler_options={"workers": DaskExecutor(client)})
        got = m.release_each(Xr)
    np.testing.assert_array_equal(got, want)
