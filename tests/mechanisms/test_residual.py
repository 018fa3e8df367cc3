"""The optimal Gaussian strategies (knorm.mechanisms.residual; issue 29).

Targets are ResidualPlanner's (Xiao et al. 2023) errors, derived here in closed form from
the paper's formulas, not from the code: for marginals over sizes n_i with unit weights,
p_S = Π_{i∈S}(n_i−1)/n_i, v_S = Σ_{A⊇S} Π_{i∈S}(n_i−1) Π_{j∈A∖S} 1/n_j, and the least
total variance at ρ-zCDP is (Σ_S √(v_S p_S))²/(2ρ).
"""

import itertools
import math

import numpy as np
import pytest

from knorm.body.marginal import MarginalStructure
from knorm.mechanisms.additive import analytic_gaussian_sigma
from knorm.mechanisms.residual import (MarginalPlan, ResidualGaussianMechanism, SVDGaussianMechanism, gaussian_mu,
                                       marginal_plan)
from knorm.privacy import gdp_delta


def kway(shape, k):
    return MarginalStructure(tuple(shape), tuple(itertools.combinations(range(len(shape)), k)))


# 2-way marginals of 10 binary attributes: |S| = 0: v = 45/4, p = 1 (one set);
# |S| = 1: v = 9/2, p = 1/2 (10 sets); |S| = 2: v = 1, p = 1/4 (45 sets).
# Σ√(vp) = √11.25 + 10·1.5 + 45·0.5 = 40.8541; total var at ρ=1: 40.8541²/2 = 834.53;
# 180 queries: per-query √(834.53/180) = 2.15320.
ROOT_10x2 = math.sqrt(11.25) + 15.0 + 22.5
# 3-way marginals of 8 binary attributes (56 tables, 448 queries): |S| = s has C(8, s) sets,
# p = 2^-s, v = C(8−s, 3−s)·2^-(3−s); Σ√(vp) = Σ_s C(8,s)√(C(8−s,3−s)·2^-3) =
# (√56 + 8√21 + 28√6 + 56)/√8.
ROOT_8x3 = sum(math.comb(8, s) * math.sqrt(math.comb(8 - s, 3 - s) * 2.0 ** -3) for s in range(4))


def root_2345_6():
    """2-way marginals over sizes (2,3,4,5,6): |S| = 0: v = Σ_{i<j} 1/(n_i n_j), p = 1;
    S = {i}: v = (n_i − 1)·Σ_{j≠i} 1/n_j, p = (n_i−1)/n_i; S = {i,j}: v = (n_i−1)(n_j−1),
    p = (n_i−1)(n_j−1)/(n_i n_j). (15 tables; 155 queries.)"""
    n = (2, 3, 4, 5, 6)
    total = math.sqrt(sum(1 / (a * b) for a, b in itertools.combinations(n, 2)))
    for i, a in enumerate(n):
        v = (a - 1) * sum(1 / b for j, b in enumerate(n) if j != i)
        total += math.sqrt(v * (a - 1) / a)
    for a, b in itertools.combinations(n, 2):
        total += (a - 1) * (b - 1) / math.sqrt(a * b)
    return total


CASES = [((2,) * 10, 2, ROOT_10x2, 180, 2.153), ((2, 3, 4, 5, 6), 2, root_2345_6(), 155, 1.641),
         ((2,) * 8, 3, ROOT_8x3, 448, 1.993)]


@pytest.mark.parametrize("shape,k,root,queries,target", CASES)
def test_zcdp_errors_match_residual_planner(shape, k, root, queries, target):
    plan = MarginalPlan.build(shape, list(itertools.combinations(range(len(shape)), k)))
    assert plan.queries == queries
    assert plan.root_sum == pytest.approx(root, rel=1e-12)
    want = math.sqrt(root**2 / 2.0 / queries)  # ρ = 1
    assert want == pytest.approx(target, rel=5e-3)  # the ResidualPlanner numbers, to 0.5%
    assert plan.per_query_rmse(rho=1.0) == pytest.approx(want, rel=1e-12)


# (√2, 1e-6)-DP: μ = 1/σ₁ with σ₁ the analytic Gaussian σ at unit sensitivity; per query Σ√(vp)·σ₁/√d
@pytest.mark.parametrize("shape,k,root,queries,target", [(c[0], c[1], c[2], c[3], t) for c, t in
                                                         zip(CASES, (9.34, 7.12, 8.64))])
def test_eps_delta_errors(shape, k, root, queries, target):
    sigma1 = analytic_gaussian_sigma(1.0, math.sqrt(2), 1e-6)
    F = kway(shape, k).matrix()
    F = F[np.random.default_rng(3).permutation(len(F))]  # rows in any order
    m = ResidualGaussianMechanism(F, epsilon=math.sqrt(2), delta=1e-6, rng=0)
    assert m.rms_error() / math.sqrt(queries) == pytest.approx(root * sigma1 / math.sqrt(queries), rel=1e-9)
    assert m.rms_error() / math.sqrt(queries) == pytest.approx(target, rel=1e-2)
    assert m.privacy.notion == "(ε, δ)-DP" and m.privacy.exact


def test_svd_strategy_attains_the_bound_on_marginals():
    """On marginals G^½ has a constant diagonal: A = G^¼ attains (tr G^½)²/n, the residual optimum."""
    F = kway((2, 3, 3), 2).matrix()
    s = SVDGaussianMechanism(F, epsilon=1.0, delta=1e-5, rng=0)
    r = ResidualGaussianMechanism(F, epsilon=1.0, delta=1e-5, rng=0)
    assert s.attains_bound and s.rms_error() == pytest.approx(r.rms_error(), rel=1e-9)
    lam = np.linalg.eigvalsh(F.T @ F)  # F is rank-deficient: its zero eigenvalues come out ±1e-15,
    bound = np.sqrt(np.clip(lam, 0, None)).sum() / math.sqrt(F.shape[1]) * analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    assert s.rms_error() == pytest.approx(bound, rel=1e-7)  # ... whose roots add ~1e-8 each here


def test_svd_strategy_above_the_bound_says_so():
    """Prefix sums (n = 4): diag G^½ is not constant; rms² = σ₁² max diag G^½ · tr G^½."""
    F = np.tril(np.ones((4, 4)))
    s = SVDGaussianMechanism(F, epsilon=1.0, delta=1e-5, rng=0)
    lam, U = np.linalg.eigh(F.T @ F)
    half = (U * np.sqrt(lam)) @ U.T
    sigma1 = analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    assert s.rms_error() == pytest.approx(sigma1 * math.sqrt(half.diagonal().max() * np.trace(half)), rel=1e-9)
    assert not s.attains_bound and s.bound_ratio > 1.01


def _residual_cov(shape, cliques, sig2):
    """The noise covariance of M's tables, from the definition: residual S measured with
    covariance σ_S²·⊗P_i on its S-table, A's table rebuilt as Σ_{S⊆A} (S-table broadcast)/Π_{A∖S} n_j."""
    blocks = []
    for c in cliques:
        rows = []
        for S in sig2:
            if not set(S) <= set(c):
                rows.append(np.zeros((math.prod(shape[a] for a in c), math.prod(shape[a] for a in S))))
                continue
            L = np.ones((1, 1))
            for a in c:  # C order over the clique's attributes
                L = np.kron(L, np.eye(shape[a]) if a in S else np.ones((shape[a], 1)) / shape[a])
            rows.append(L)
        blocks.append(rows)
    Lfull = np.block(blocks)
    P = []
    for S, v in sig2.items():
        Q = np.ones((1, 1))
        for a in S:
            Q = np.kron(Q, np.eye(shape[a]) - 1.0 / shape[a])
        P.append(v * Q)
    from scipy.linalg import block_diag
    return Lfull @ block_diag(*P) @ Lfull.T


def test_privacy_is_exactly_mu():
    """The released noise's Mahalanobis sensitivity max_j (F e_j)ᵀ Cov⁺ (F e_j) is μ², and
    every F e_j lies in Cov's range (else the release would not be private at all)."""
    shape, k = (2, 3, 3), 2
    st = kway(shape, k)
    F = st.matrix()
    m = ResidualGaussianMechanism(F, epsilon=1.0, delta=1e-6, rng=0)
    sig2 = dict(zip(m.plan.subsets, m.sigmas**2))
    cov = _residual_cov(shape, st.cliques, sig2)
    pinv = np.linalg.pinv(cov, rcond=1e-10)
    proj = cov @ pinv
    assert np.allclose(proj @ F, F, atol=1e-9)
    maha = np.einsum("ij,ik,kj->j", F, pinv, F)
    assert maha.max() == pytest.approx(m.mu**2, rel=1e-8)
    assert gdp_delta(1.0, m.mu) == pytest.approx(1e-6, rel=1e-6)  # μ is the analytic calibration's
    # and the trace is the closed form
    assert np.trace(cov) == pytest.approx(m.expected_squared_error(), rel=1e-10)


def test_noise_covariance_monte_carlo():
    """Sampled noise has the covariance of the definition: every entry within 5 MC standard errors
    (entry (a, b) of an empirical covariance has SE √((Σ_aa Σ_bb + Σ_ab²)/m))."""
    shape = (2, 3, 3)
    st = kway(shape, 2)
    F = st.matrix()
    perm = np.random.default_rng(1).permutation(len(F))
    m = ResidualGaussianMechanism(F[perm] * 2.5, epsilon=1.0, delta=1e-6, rng=7)
    cov = 2.5**2 * _residual_cov(shape, st.cliques, dict(zip(m.plan.subsets, m.sigmas**2)))[np.ix_(perm, perm)]
    n = 40_000
    z = m.sample_noise(n)
    emp = z.T @ z / n
    se = np.sqrt((np.outer(cov.diagonal(), cov.diagonal()) + cov**2) / n)
    assert np.all(np.abs(emp - cov) <= 5 * se + 1e-12)


def test_weights_from_duplicated_tables():
    """A table twice counts twice: weights (2, 1, 1), and a partial table is not a marginal plan."""
    st = kway((2, 3, 2), 2)
    F = st.matrix()
    plan = marginal_plan(np.vstack([F, F[:6]]))  # the (0, 1) table (6 rows) twice
    assert plan is not None and plan.weights == (2.0, 1.0, 1.0)
    assert marginal_plan(np.vstack([F, F[:3]])) is None
    assert marginal_plan(np.random.default_rng(0).standard_normal((4, 6))) is None


def test_bad_inputs():
    F = kway((2, 2, 2), 2).matrix()
    with pytest.raises(ValueError, match="^delta"):
        ResidualGaussianMechanism(F, epsilon=1.0, delta=1.0)
    with pytest.raises(ValueError, match="^F: not a marginal workload"):
        ResidualGaussianMechanism(np.tril(np.ones((4, 4))), epsilon=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="^shape"):
        MarginalPlan.build([2, 0], [(0,)])
    with pytest.raises(ValueError, match="^cliques"):
        MarginalPlan.build([2, 2], [(1, 0)])
    with pytest.raises(ValueError, match="^weights"):
        MarginalPlan.build([2, 2], [(0,), (1,)], [1.0])
    with pytest.raises(ValueError, match="^epsilon"):
        gaussian_mu(0.0, 1e-6)
