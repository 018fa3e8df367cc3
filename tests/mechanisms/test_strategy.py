"""Strategy baselines: the tree and its least squares, exact error formulas, privacy claims."""

import numpy as np
import pytest

from knorm import workloads as W
from scipy import optimize

from knorm.mechanisms import HierarchicalMechanism, IdentityMechanism, PIdentityMechanism
from knorm.mechanisms.strategy import BRANCHINGS, Hierarchy, hierarchy_errors, p_identity_objective
from knorm.privacy import BudgetAccountant, BudgetExceededError


def dense_error_factor(F, A):
    """‖F A⁺‖_F² from numpy's dense pseudo-inverse (independent of the tree code)."""
    return float(np.sum((F @ np.linalg.pinv(A)) ** 2))


def levels_of(n, b):
    """⌈log_b n⌉ + 1 by integer arithmetic: the smallest k with b^k >= n, plus the root."""
    k = 0
    while b**k < n:
        k += 1
    return k + 1


def mc_check_squared_error(noise, exact):
    """|mean ‖noise‖² − exact| within 5 Monte-Carlo standard errors."""
    sq = np.sum(noise**2, axis=1)
    se = sq.std(ddof=1) / np.sqrt(len(sq))
    assert abs(sq.mean() - exact) < 5 * se, (sq.mean(), exact, se)


# ---- the tree -------------------------------------------------------------------------------

@pytest.mark.parametrize("n,b", [(1, 2), (2, 2), (5, 2), (8, 2), (9, 3), (10, 3), (26, 4), (31, 5), (100, 16)])
def test_every_level_partitions_the_cells(n, b):
    t = Hierarchy(n, b)
    A = t.matrix().toarray()
    assert t.levels == levels_of(n, b)
    assert np.all(A.sum(axis=0) == t.levels)  # each cell in one block per level: Δ₁(A) = levels
    assert np.array_equal(A[-n:], np.eye(n))  # the last level is the identity
    for lev in range(1, t.levels):  # nested: each block lies inside its parent
        parent = t.parents[lev]
        assert np.all(t.starts[lev] >= t.starts[lev - 1][parent])
        assert np.all(t.starts[lev] + t.sizes[lev] <= t.starts[lev - 1][parent] + t.sizes[lev - 1][parent])
        assert np.all(np.bincount(parent) <= b)
    x = np.arange(n, dtype=float)
    assert np.allclose(t.measure(x), A @ x)


def test_complete_tree_is_the_classic_one():
    t = Hierarchy(27, 3)  # n = b^k: no carried singletons, (b^{k+1} − 1)/(b − 1) blocks
    assert t.levels == 4 and t.rows == (3**4 - 1) // 2


@pytest.mark.parametrize("b", [2, 3, 4, 7])
@pytest.mark.parametrize("n", [3, 5, 10, 13, 31, 50])
def test_tree_least_squares_equals_dense_lstsq(n, b):
    t = Hierarchy(n, b)
    A = t.matrix().toarray()
    Y = np.random.default_rng(n * 100 + b).normal(size=(4, t.rows)) * 10
    want = np.linalg.lstsq(A, Y.T, rcond=None)[0].T
    assert np.allclose(t.solve(Y), want, atol=1e-10 * np.abs(want).max())
    assert np.allclose(t.solve(Y[0]), want[0], atol=1e-10 * np.abs(want).max())  # one vector


@pytest.mark.parametrize("n,b,d", [(10, 3, 4), (10, 3, 25), (16, 2, 16), (31, 4, 100)])
def test_error_factor_equals_the_dense_pseudo_inverse(n, b, d):
    t = Hierarchy(n, b)
    F = np.random.default_rng(d).normal(size=(d, n))  # d > n takes the Gram-matrix route
    assert t.error_factor(F) == pytest.approx(dense_error_factor(F, t.matrix().toarray()), rel=1e-10)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 17, 31, 50])
def test_hierarchy_errors_without_root_equal_the_dense_pseudo_inverse(n):
    """For every b in 2..n+1 (deep trees with carried singletons, two-level trees from the 2-D
    cumulative sum, b >= n the identity): (Δ₁, tr(G (AᵀA)⁻¹)) = (max column ℓ₁ norm of A, ‖F A⁺‖_F²)
    with A = Hierarchy(n, b, root=False).matrix() and numpy's pinv."""
    F = np.random.default_rng(n).normal(size=(7, n))
    errs = hierarchy_errors(F.T @ F, range(2, n + 2))
    assert sorted(errs) == list(range(2, n + 2))
    from_rows = hierarchy_errors(F, range(2, n + 2), rows=True)  # FᵀF never formed
    assert all(from_rows[b][0] == errs[b][0] and from_rows[b][1] == pytest.approx(errs[b][1], rel=1e-10)
               for b in errs)
    for b, (levels, trace) in errs.items():
        A = Hierarchy(n, b, root=False).matrix().toarray()
        assert levels == np.abs(A).sum(axis=0).max()
        assert trace == pytest.approx(dense_error_factor(F, A), rel=1e-10)


def test_hierarchy_errors_validates():
    for bad in ([1], [2.0], [True], ["2"]):
        with pytest.raises(ValueError, match="branchings"):
            hierarchy_errors(np.eye(3), bad)
    for gram in (np.ones((2, 3)), np.array([[np.nan]]), "x"):
        with pytest.raises(ValueError, match="gram"):
            hierarchy_errors(gram)
    with pytest.raises(ValueError, match="F"):
        hierarchy_errors(np.ones(3), rows=True)


def test_a_wide_matrix_never_forms_its_gram():
    """d = 3 queries over 40,000 cells: the Gram matrix would be 12.8 GB; the tree's exact error comes
    from F's rows (identity strategy for b >= n: 2/ε²‖F‖_F², checked; the chosen tree is no worse)."""
    F = np.zeros((3, 40_000))
    F[0, :10], F[1, 5:20_000], F[2] = 1.0, 1.0, 1.0
    m = HierarchicalMechanism(F, epsilon=1.0, branching=None)
    assert m.branching_errors[40_000] == pytest.approx(2 * np.sum(F**2))
    assert m.expected_squared_error() == min(m.branching_errors.values()) <= 2 * np.sum(F**2)


def test_tree_validates():
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="branching"):
            Hierarchy(8, bad)
    with pytest.raises(ValueError, match="y must have"):
        Hierarchy(8, 2).solve(np.zeros(5))


# ---- exact errors, checked by Monte Carlo ---------------------------------------------------

def test_identity_error_is_exact():
    """noise = F w, w ~ Lap(1/ε)ⁿ iid with variance 2/ε²: E‖Fw‖² = 2/ε² trace(FᵀF) = 2/ε² ‖F‖_F²."""
    F = W.random_pm1(6, 15, rng=0)
    m = IdentityMechanism(F, epsilon=0.7, rng=1)
    exact = 2 / 0.7**2 * 6 * 15
    assert m.expected_squared_error() == pytest.approx(exact, rel=1e-12)
    mc_check_squared_error(m.sample_noise(40000), exact)
    e = m.expected_error(n_samples=20000)
    assert not e.exact and e.value < np.sqrt(exact)  # Jensen
    norms = np.linalg.norm(m.sample_noise(20000), axis=1)
    assert norms.mean() == pytest.approx(e.value, abs=5 * np.hypot(e.stderr, norms.std() / np.sqrt(20000)))


@pytest.mark.parametrize("root", [False, True])
@pytest.mark.parametrize("F,b", [(W.prefix(10), 3), (W.all_range(9), 2), (W.random_pm1(5, 12, rng=3), 4)])
def test_hierarchical_error_is_exact(F, b, root):
    """noise = F A⁺ z, z ~ Lap(L/ε) iid with variance 2(L/ε)²: E‖F A⁺ z‖² = 2 (L/ε)² ‖F A⁺‖_F²
    (L: the measured levels, ⌈log_b n⌉ + 1 with the root, one less without)."""
    m = HierarchicalMechanism(F, epsilon=1.3, branching=b, root=root, rng=2)
    A = m.strategy_matrix().toarray()
    exact = 2 * (m.levels / 1.3) ** 2 * dense_error_factor(F, A)
    assert m.levels == levels_of(F.shape[1], b) - (not root) == np.abs(A).sum(axis=0).max()
    assert m.privacy.details["l1_sensitivity"] == m.levels
    assert m.expected_squared_error() == pytest.approx(exact, rel=1e-10)
    mc_check_squared_error(m.sample_noise(40000), exact)
    e = m.expected_error(n_samples=20000)
    norms = np.linalg.norm(m.sample_noise(20000), axis=1)
    assert norms.mean() == pytest.approx(e.value, abs=5 * np.hypot(e.stderr, norms.std() / np.sqrt(20000)))


def test_release_is_least_squares_on_the_noisy_strategy_answers():
    """release(x) = F A⁺ (A x + z) with z the mechanism's Laplace draw (seeded twin generator), rounded
    to the mechanism's public grid (docs/design.md §10)."""
    F, x = W.prefix(11), np.arange(11.0)
    m = HierarchicalMechanism(F, epsilon=0.5, branching=3, rng=7)
    A = m.strategy_matrix().toarray()
    z = np.random.default_rng(7).laplace(0.0, m.levels / 0.5, size=(1, A.shape[0]))[0]
    out, grid = m.release(x), m.privacy.details["grid"]
    assert np.all(np.abs(out - F @ np.linalg.lstsq(A, A @ x + z, rcond=None)[0]) <= grid / 2 + 1e-9)
    assert np.all(out / grid == np.round(out / grid))


@pytest.mark.parametrize("root", [False, True])
def test_branching_is_the_exact_minimiser(root):
    """Without the root every b in 2..n is tried, with it b in BRANCHINGS; each candidate's error is the
    error of the mechanism built with that b, checked against numpy's dense pseudo-inverse."""
    F = W.prefix(40)
    m = HierarchicalMechanism(F, epsilon=1.0, root=root)
    assert set(m.branching_errors) == (set(b for b in BRANCHINGS if b <= 40) if root else set(range(2, 41)))
    assert m.expected_squared_error() == min(m.branching_errors.values())
    for b in sorted({2, 5, 7, 16, 39, 40, m.branching} & set(m.branching_errors)):
        one = HierarchicalMechanism(F, epsilon=1.0, branching=b, root=root)
        dense = 2 * one.levels**2 * dense_error_factor(F, one.strategy_matrix().toarray())
        assert one.expected_squared_error() == pytest.approx(m.branching_errors[b], rel=1e-12)
        assert one.expected_squared_error() == pytest.approx(dense, rel=1e-9)
    one = HierarchicalMechanism(np.array([[2.0]]), epsilon=1.0, root=root)  # n = 1: the root is the cell
    assert one.levels == 1 and one.expected_squared_error() == pytest.approx(2 * 4.0)


def test_hierarchical_beats_identity_on_prefix_256():
    """Exact errors: identity 2/ε²·‖prefix‖_F² = 2/ε² · n(n+1)/2; hierarchical from the dense pinv."""
    n, eps = 256, 1.0
    hier = HierarchicalMechanism(W.prefix(n), epsilon=eps)
    ident = IdentityMechanism(W.prefix(n), epsilon=eps)
    assert ident.expected_squared_error() == pytest.approx(2 / eps**2 * n * (n + 1) / 2)
    dense = 2 * (hier.levels / eps) ** 2 * dense_error_factor(W.prefix(n), hier.strategy_matrix().toarray())
    assert hier.expected_squared_error() == pytest.approx(dense, rel=1e-9)
    assert hier.expected_squared_error() < ident.expected_squared_error() / 2


def test_prefix_1024_against_hdmm_published_rmse():
    """HDMM (McKenna et al. 2018), pure ε-DP, ε = √2, n = 1024, per-query RMSE on prefix:
    identity 22.64 (= √((n+1)/2) exactly), hierarchical 9.10. Ours chooses b, so it is no worse."""
    n, eps = 1024, np.sqrt(2)
    ident = IdentityMechanism(W.prefix(n), epsilon=eps)
    assert np.sqrt(ident.expected_squared_error() / n) == pytest.approx(22.64, abs=0.005)
    hier = HierarchicalMechanism(W.prefix(n), epsilon=eps)
    assert np.sqrt(hier.expected_squared_error() / n) <= 9.10


# ---- p-Identity (HDMM) ---------------------------------------------------------------------------

def test_p_identity_objective_and_gradient():
    """f(Θ) = ‖F A⁺‖_F² with A = [I; Θ]/c against numpy's dense pinv; ∇f against finite differences."""
    rng = np.random.default_rng(0)
    F, p, n = W.random_pm1(7, 12, rng=1), 3, 12
    theta = rng.random((p, n))
    A = np.vstack([np.eye(n), theta]) / (1 + theta.sum(axis=0))
    assert p_identity_objective(theta, F.T @ F)[0] == pytest.approx(dense_error_factor(F, A), rel=1e-10)
    fun = lambda t: p_identity_objective(t.reshape(p, n), F.T @ F)[0]  # noqa: E731
    jac = lambda t: p_identity_objective(t.reshape(p, n), F.T @ F)[1].ravel()  # noqa: E731
    t0 = theta.ravel()
    assert optimize.check_grad(fun, jac, t0) < 1e-5 * np.linalg.norm(jac(t0))


def test_p_identity_search_on_a_low_rank_gram_uses_its_factor_and_the_same_objective():
    """1-way marginals over (4,4,4,4): a Gram of rank 1 + 4·3 = 13 of 256 cells. The factor's LᵀL is
    the Gram to rounding, and (f, ∇f) through it equal those through the Gram to 1e-12 relative
    (the test above pins the Gram's against a dense pinv and finite differences); a full-rank
    Gram gets no factor."""
    from knorm.mechanisms._p_identity import _low_rank_factor, _p_identity_fg
    G = W.marginals((4, 4, 4, 4), 1)
    gram = G.T @ G
    L = _low_rank_factor(gram)
    assert L is not None and L.shape == (13, 256)
    np.testing.assert_allclose(L.T @ L, gram, atol=1e-12 * np.abs(gram).max())
    theta = np.random.default_rng(3).random((16, 256))
    f0, g0 = _p_identity_fg(theta, gram, np.diag(gram).copy())
    f1, g1 = _p_identity_fg(theta, gram, np.diag(gram).copy(), L)
    assert f1 == pytest.approx(f0, rel=1e-12)
    np.testing.assert_allclose(g1, g0, rtol=0, atol=1e-12 * np.abs(g0).max())
    assert _low_rank_factor(W.random_pm1(300, 256, rng=2).T @ W.random_pm1(300, 256, rng=2)) is None  # full rank


def test_p_identity_strategy_has_unit_sensitivity_and_exact_error():
    """Columns [e_j; Θ_j]/(1 + Σ_i Θ_ij) with Θ >= 0 have ℓ₁ norm 1; noise F A⁺ z, z ~ Lap(1/ε) iid:
    E‖F A⁺ z‖² = 2/ε² ‖F A⁺‖_F²."""
    F = W.prefix(16)
    m = PIdentityMechanism(F, epsilon=0.9, p=2, rng=4)
    A = m.strategy_matrix()
    assert A.shape == (18, 16) and np.all(m.theta >= 0)
    assert np.allclose(np.abs(A).sum(axis=0), 1.0) and m.privacy.details["l1_sensitivity"] == pytest.approx(1.0)
    exact = 2 / 0.9**2 * dense_error_factor(F, A)
    assert m.expected_squared_error() == pytest.approx(exact, rel=1e-9)
    mc_check_squared_error(m.sample_noise(40000), exact)
    x = np.arange(16.0)
    z = np.random.default_rng(4).laplace(0.0, m.scale, size=(1, 18))[0]
    out = PIdentityMechanism(F, epsilon=0.9, p=2, rng=4).release(x)  # rounded to the grid (design §10)
    assert np.all(np.abs(out - F @ np.linalg.lstsq(A, A @ x + z, rcond=None)[0]) <= m.privacy.details["grid"] / 2 + 1e-9)


def test_p_identity_keeps_the_best_of_its_starts():
    """starts = k runs the search from seeds 0..k-1 and keeps the least objective: never above one
    start's; the objective reported is the error factor of the strategy it keeps (dense pinv)."""
    F = W.prefix(48)
    one = PIdentityMechanism(F, epsilon=1.0, starts=1)
    four = PIdentityMechanism(F, epsilon=1.0, starts=4)
    objs = four.optimization["start_objectives"]
    assert len(objs) == 4 and objs[0] == pytest.approx(one.optimization["start_objectives"][0], rel=1e-12)
    assert four.expected_squared_error() <= one.expected_squared_error() * (1 + 1e-9)
    assert four.optimization["objective"] == pytest.approx(min(objs), rel=1e-5)  # search: Woodbury; kept: QR
    assert four.optimization["objective"] == pytest.approx(dense_error_factor(F, four.strategy_matrix()), rel=1e-9)
    assert PIdentityMechanism(W.prefix(600), epsilon=1.0, maxiter=1).starts == 1  # one start above n = 512
    assert PIdentityMechanism(W.prefix(300), epsilon=1.0, maxiter=1).starts == 4
    assert PIdentityMechanism(W.prefix(64), epsilon=1.0, maxiter=1).starts == 8


def test_p_identity_beats_hierarchical_on_prefix_and_never_loses_to_identity():
    """Exact errors. On prefix(64) at ε = √2, HDMM's optimised strategy beats the hierarchical one
    (HDMM's published n = 1024 numbers: 6.77 against 9.10). On F = I the identity is optimal
    (‖F A⁺‖_F² >= n for Δ₁(A) = 1: Θ = 0 is kept)."""
    F, eps = W.prefix(64), np.sqrt(2)
    pid = PIdentityMechanism(F, epsilon=eps)
    assert pid.p == 4
    assert pid.expected_squared_error() < HierarchicalMechanism(F, epsilon=eps).expected_squared_error()
    assert pid.expected_squared_error() < IdentityMechanism(F, epsilon=eps).expected_squared_error() / 2
    eye = PIdentityMechanism(np.eye(10), epsilon=1.0)
    ident = IdentityMechanism(np.eye(10), epsilon=1.0)
    assert eye.expected_squared_error() <= ident.expected_squared_error()



def test_a_p_identity_search_worse_than_the_identity_falls_back_to_it(monkeypatch):
    """A search whose Θ is worse than the identity (forced: Θ = 5 everywhere on F = I) leaves Θ = 0,
    with IdentityMechanism's exact error to the bit and x̂ = the identity's noisy cells."""
    from knorm.mechanisms import strategy
    monkeypatch.setattr(strategy, "_search_p_identity", lambda gram, p, maxiter, starts: (
        np.full((p, gram.shape[0]), 5.0), 0.0, {"iterations": 1, "converged": True, "message": "forced",
                                                "start_objectives": []}))
    m = PIdentityMechanism(np.eye(10), epsilon=1.0, p=2)
    assert m.expected_squared_error() == IdentityMechanism(np.eye(10), epsilon=1.0).expected_squared_error()
    assert np.array_equal(m.theta, np.zeros((2, 10))) and m.sensitivity == 1.0
    z = np.random.default_rng(0).normal(size=(3, 12))
    assert np.array_equal(m._solve(z), z[:, :10])

# ---- privacy ----------------------------------------------------------------------------------

MAKERS = [lambda F, **kw: IdentityMechanism(F, epsilon=0.8, **kw),
          lambda F, **kw: HierarchicalMechanism(F, epsilon=0.8, **kw),
          lambda F, **kw: PIdentityMechanism(F, epsilon=0.8, p=2, **kw)]


@pytest.mark.parametrize("make", MAKERS)
def test_claims_are_pure_exact_and_compose(make):
    F, x = W.prefix(9), np.ones(9)
    m = make(F)
    c = m.privacy_per_answer
    assert c.epsilon == 0.8 and c.delta == 0.0 and c.notion == "pure ε-DP" and c.exact
    assert "strategy" in c.mechanism and c.private
    m.release(x, size=3)
    assert m.privacy.epsilon == pytest.approx(2.4) and m.privacy.answers == 3


@pytest.mark.parametrize("make", MAKERS)
def test_unseeded_differ_and_seeded_say_not_private(make):
    F, x = W.prefix(9), np.ones(9)
    assert not np.array_equal(make(F).release(x), make(F).release(x))
    seeded = make(F, rng=3)
    assert np.array_equal(seeded.release(x), make(F, rng=3).release(x))
    c = seeded.privacy_per_answer
    assert c.noise_source == "seed" and not c.private and "NOT PRIVATE" in str(c)


@pytest.mark.parametrize("make", MAKERS)
def test_noise_does_not_depend_on_the_data(make):
    F = W.prefix(9)
    x1, x2 = np.zeros(9), np.arange(9.0) * 3
    assert np.allclose(make(F, rng=5).release(x1) - F @ x1, make(F, rng=5).release(x2) - F @ x2)


@pytest.mark.parametrize("make", MAKERS)
def test_accountant_refuses_before_drawing(make):
    acc = BudgetAccountant(epsilon=1.0)
    m = make(W.prefix(9), accountant=acc)
    m.release(np.ones(9))
    with pytest.raises(BudgetExceededError):
        m.release(np.ones(9))
    assert m.answers == 1


def test_validation():
    F = W.prefix(4)
    for make in (IdentityMechanism, HierarchicalMechanism, PIdentityMechanism):
        for eps in (0, -1, np.inf, "1", True):
            with pytest.raises(ValueError, match="epsilon"):
                make(F, epsilon=eps)
        with pytest.raises(ValueError, match="x must be a vector of length 4"):
            make(F, epsilon=1).release(np.ones(5))
    for b in (1, 0, 2.0, True, "2"):
        with pytest.raises(ValueError, match="branching"):
            HierarchicalMechanism(F, epsilon=1, branching=b)
    for p in (0, 2.0, True, "2"):
        with pytest.raises(ValueError, match="p must"):
            PIdentityMechanism(F, epsilon=1, p=p)
    with pytest.raises(ValueError, match="maxiter"):
        PIdentityMechanism(F, epsilon=1, maxiter=0)
