"""Implicit workloads (knorm.implicit) and the strategies on them: every closed form against the explicit
matrix it stands for (brute force on small sizes), the Kronecker identities, bad inputs, memory fail-fast."""

import math

import numpy as np
import pytest

from knorm import implicit as I
from knorm import workloads as W
from knorm.mechanisms import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism,
                              KroneckerHierarchicalMechanism, KroneckerPIdentityMechanism, KroneckerStrategyMechanism,
                              LaplaceMechanism, NIMechanism, PIdentityMechanism)
from knorm.mechanisms.strategy import Hierarchy, hierarchy_errors, p_identity_inverse
from knorm.privacy import BudgetAccountant


def dense_error_factor(F, A):
    """‖F A⁺‖_F² from numpy's dense pseudo-inverse."""
    return float(np.sum((F @ np.linalg.pinv(A)) ** 2))


# ---- the workloads against their explicit matrices -------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_one_attribute_builders_are_the_explicit_workloads(n):
    """Gram closed forms (prefix n − max(i,j), all ranges (min+1)(n − max), width-k ranges) and the
    operators' row order, entry by entry against knorm.workloads."""
    k = min(3, n)
    for imp, F in ((I.prefix(n), W.prefix(n)), (I.all_range(n), W.all_range(n)), (I.identity(n), W.identity(n)),
                   (I.width_range(n, k), W.width_range(n, k)), (I.total(n), np.ones((1, n)))):
        assert (imp.d, imp.n, imp.shape) == (F.shape[0], n, (n,))
        assert np.array_equal(imp.matrix(), F)
        assert np.array_equal(imp.gram(), F.T @ F)
        assert imp.frobenius_squared() == np.sum(F**2)
        x = np.arange(n) - 2.5
        assert np.allclose(imp.apply(x), F @ x)
        assert np.allclose(imp.apply(np.vstack([x, -x])), np.vstack([F @ x, -F @ x]))


def test_kronecker_products_and_unions():
    """ranges((3, 4)) = all_range(3) ⊗ all_range(4) (np.kron, same row order); marginals = clique_marginals;
    a union stacks rows; a Kronecker product of unions has the queries of np.kron of the stacks."""
    K = I.ranges((3, 4))
    F = np.kron(W.all_range(3), W.all_range(4))
    assert (K.d, K.n, K.shape) == (60, 12, (3, 4))
    assert np.array_equal(K.matrix(), F) and np.array_equal(K.gram(), F.T @ F)
    assert K.frobenius_squared() == np.sum(F**2)
    M = I.marginals((2, 3, 2), [(0, 1), (2,), ()])
    assert np.array_equal(M.matrix(), W.clique_marginals((2, 3, 2), [(0, 1), (2,), ()]))
    U = I.union(I.prefix(3), np.eye(3))
    assert np.array_equal(U.matrix(), np.vstack([W.prefix(3), np.eye(3)]))
    R = np.random.default_rng(0).normal(size=(2, 3))
    KU = I.kron(R, U)
    want = np.kron(R, np.vstack([W.prefix(3), np.eye(3)]))
    got = KU.matrix()
    assert got.shape == want.shape and np.allclose(KU.gram(), want.T @ want)
    assert sorted(map(tuple, np.round(got, 12))) == sorted(map(tuple, np.round(want, 12)))


def test_scales_are_exact_at_any_magnitude():
    """from_matrix keeps W·2^-e (Gram at unit scale); from_gram the same workload from WᵀW alone."""
    R = np.random.default_rng(1).normal(size=(5, 6)) * 1e150
    a, b = I.from_matrix(R), I.from_gram(R.T @ (R * 1e-150) * 1e-150, queries=5)  # Gram of R·1e-150
    assert np.allclose(a.matrix(), R) and a.frobenius_squared() == pytest.approx(np.sum((R / 1e150) ** 2) * 1e300)
    assert b.frobenius_squared() == pytest.approx(np.sum((R / 1e150) ** 2)) and not b.can_apply
    big = IdentityMechanism(a, epsilon=1.0)  # 1e300-scale errors: no square overflows
    assert big.rms_error() == pytest.approx(np.sqrt(2 * np.sum((R / 1e150) ** 2)) * 1e150)


def test_kron_trace_is_the_error_factor_of_a_kronecker_strategy():
    """‖W (A₁⊗A₂)⁺‖_F² = Σ_j Π_i ⟨G_ji, (A_iᵀA_i)⁻¹⟩ (unit scale), against the dense pinv."""
    rng = np.random.default_rng(2)
    W1, W2, V1, V2 = rng.normal(size=(4, 3)), rng.normal(size=(2, 5)), rng.normal(size=(3, 3)), rng.normal(size=(6, 5))
    imp = I.union(I.kron(W1, W2), I.kron(V1, V2))
    A1, A2 = rng.normal(size=(5, 3)), rng.normal(size=(7, 5))
    X = [np.linalg.inv(A.T @ A) for A in (A1, A2)]
    F = np.vstack([np.kron(W1, W2), np.kron(V1, V2)])
    want = dense_error_factor(F, np.kron(A1, A2))
    assert math.ldexp(imp.kron_trace(X), 2 * imp.exponent) == pytest.approx(want, rel=1e-10)


# ---- the strategies on implicit workloads equal the explicit path ----------------------------

CASES = [(I.prefix(13), W.prefix(13)), (I.all_range(11), W.all_range(11)),
         (I.ranges((4, 5)), np.kron(W.all_range(4), W.all_range(5)))]


@pytest.mark.parametrize("imp,F", CASES)
def test_strategies_on_the_gram_equal_the_explicit_path(imp, F):
    """Identity, hierarchical (both trees) and p-identity: the same strategy and error from WᵀW
    as from F, and that error is the dense pinv's."""
    eps = 0.7
    for make in (lambda G: IdentityMechanism(G, epsilon=eps), lambda G: HierarchicalMechanism(G, epsilon=eps),
                 lambda G: HierarchicalMechanism(G, epsilon=eps, root=True),
                 lambda G: PIdentityMechanism(G, epsilon=eps, p=2, starts=1)):
        a, b = make(imp), make(F)
        assert a.expected_squared_error() == pytest.approx(b.expected_squared_error(), rel=1e-9)
    h = HierarchicalMechanism(imp, epsilon=eps)
    A = h.strategy_matrix().toarray()
    assert h.expected_squared_error() == pytest.approx(2 * (h.levels / eps) ** 2 * dense_error_factor(F, A), rel=1e-9)
    p = PIdentityMechanism(imp, epsilon=eps, p=2, starts=1)
    assert p.expected_squared_error() == pytest.approx(2 / eps**2 * dense_error_factor(F, p.strategy_matrix()),
                                                       rel=1e-9)


@pytest.mark.parametrize("imp,F", CASES)
def test_release_on_an_implicit_workload_is_least_squares(imp, F):
    """release(x) = F A⁺(Ax + z) and release_estimate(x) = A⁺(Ax + z), z the mechanism's Laplace draws
    (seeded twin generators), each rounded to its public grid (docs/design.md §10); each call charged once."""
    x = np.arange(imp.n, dtype=float)
    for make in (lambda G, **k: HierarchicalMechanism(G, epsilon=0.5, **k),
                 lambda G, **k: PIdentityMechanism(G, epsilon=0.5, p=2, starts=1, **k),
                 lambda G, **k: KroneckerPIdentityMechanism(G, epsilon=0.5, p=1, starts=1, **k)):
        acc = BudgetAccountant(epsilon=10.0)
        m = make(imp, rng=3, accountant=acc)
        A = m.strategy_matrix()
        A = A.toarray() if hasattr(A, "toarray") else A
        z = np.random.default_rng(3).laplace(0.0, m.scale, size=(1, A.shape[0]))[0]
        xh = np.linalg.lstsq(A, A @ x + z, rcond=None)[0]
        grid = m.privacy_per_answer.details["grid"]
        assert np.all(np.abs(m.release(x) - F @ xh) <= grid / 2 + 1e-9)
        est = make(imp, rng=3)
        assert np.all(np.abs(est.release_estimate(x) - xh) <= est.privacy.details["estimate_grid"] / 2 + 1e-9)
        assert m.answers == 1 and acc.total[0] == pytest.approx(0.5)


def test_hierarchical_without_root_is_its_strategy_matrix():
    """Without the root, Δ₁ = levels − 1 and the exact tree least squares is the dense lstsq."""
    for n, b in ((10, 3), (17, 4), (26, 5), (9, 9)):
        t = Hierarchy(n, b, root=False)
        A = t.matrix().toarray()
        assert t.measured == np.abs(A).sum(axis=0).max() == Hierarchy(n, b).levels - 1
        assert A.shape[0] == t.rows == Hierarchy(n, b).rows - 1
        Y = np.random.default_rng(n).normal(size=(3, t.rows))
        assert np.allclose(t.solve(Y), np.linalg.lstsq(A, Y.T, rcond=None)[0].T)


# ---- Kronecker strategies ----------------------------------------------------------------------

def test_kronecker_strategy_error_and_sensitivity():
    """Δ₁(A₁⊗A₂) = Δ₁(A₁)Δ₁(A₂); E‖err‖² = 2(Δ₁/ε)²‖W (A₁⊗A₂)⁺‖_F² against the dense pinv, on a union."""
    imp = I.union(I.ranges((3, 4)), I.marginals((3, 4), [(0,), (1,)]))
    F = imp.matrix()
    A1, A2 = Hierarchy(3, 2, root=False).matrix(), Hierarchy(4, 2).matrix().toarray()
    m = KroneckerStrategyMechanism(imp, epsilon=0.9, strategies=[A1, A2])
    A = np.kron(A1.toarray(), A2)
    assert m.sensitivity == np.abs(A).sum(axis=0).max() == 2 * 3
    assert m.expected_squared_error() == pytest.approx(2 * (6 / 0.9) ** 2 * dense_error_factor(F, A), rel=1e-10)
    assert np.allclose(m.strategy_matrix(), A)


def test_kronecker_p_identity_on_a_product_and_a_union():
    """Unit sensitivity per attribute; the error is the dense one of its strategy; never worse than the
    identity, exactly (`<=`, no slack): the result's exact error is compared with the identity's and the
    identity kept unless strictly better (with OPENBLAS_CORETYPE=Haswell or Zen the search's own objective
    said better while the exact error was 4128.0024 against 4128.0)."""
    for imp in (I.ranges((8, 6)), I.union(I.kron(I.prefix(8), I.all_range(6)), I.kron(I.identity(8), I.total(6)))):
        m = KroneckerPIdentityMechanism(imp, epsilon=1.0, starts=1)
        A = m.strategy_matrix()
        assert np.allclose(np.abs(A).sum(axis=0), 1.0)
        want = 2 * dense_error_factor(imp.matrix(), A)
        assert m.expected_squared_error() == pytest.approx(want, rel=1e-9)
        assert m.expected_squared_error() <= IdentityMechanism(imp, epsilon=1.0).expected_squared_error()
    theta = np.random.default_rng(4).random((2, 8))
    A1 = np.vstack([np.eye(8), theta]) / (1 + theta.sum(axis=0))
    assert np.allclose(p_identity_inverse(theta), np.linalg.inv(A1.T @ A1))



@pytest.mark.parametrize("make,payload", [
    (lambda imp: KroneckerPIdentityMechanism(imp, epsilon=1.0, starts=1), lambda s: np.full((1, s), 5.0)),
    (lambda imp: KroneckerHierarchicalMechanism(imp, epsilon=1.0), lambda s: Hierarchy(s, 2, root=False))])
def test_a_kronecker_search_worse_than_the_identity_falls_back_to_it(make, payload, monkeypatch):
    """A descent that returns a strategy worse than the identity (forced here: every attribute's p-Identity
    Θ = 5, every tree binary, on a workload of cells and their row totals) gives the identity instead,
    with IdentityMechanism's exact error to the bit."""
    from knorm.mechanisms import strategy
    imp = I.union(I.kron(I.identity(8), I.identity(6)), I.kron(I.identity(8), I.total(6)))
    descent = strategy._kron_descent

    def worse(terms, rounds, choose):
        _, total, done = descent(terms, rounds, choose)
        return [payload(8), payload(6)], total, done
    monkeypatch.setattr(strategy, "_kron_descent", worse)
    m = make(imp)
    assert m.expected_squared_error() == IdentityMechanism(imp, epsilon=1.0).expected_squared_error()
    assert np.array_equal(m.strategy_matrix(), np.eye(48)) and m.sensitivity == 1.0


def test_one_attribute_kronecker_strategies_are_the_plain_ones():
    """An explicit F is one attribute: Kronecker p-Identity runs p-Identity's search on the same Gram
    (same starts) and Kronecker hierarchical picks HB's b; the strategy mechanism on [A] is A's."""
    F = W.prefix(20)
    kp, p = KroneckerPIdentityMechanism(F, epsilon=1.0, p=2), PIdentityMechanism(F, epsilon=1.0, p=2)
    assert np.allclose(kp.thetas[0], p.theta) and kp.expected_squared_error() == pytest.approx(
        p.expected_squared_error(), rel=1e-9)
    kh, h = KroneckerHierarchicalMechanism(F, epsilon=1.0), HierarchicalMechanism(F, epsilon=1.0)
    assert kh.branchings == [h.branching] and kh.expected_squared_error() == pytest.approx(
        h.expected_squared_error(), rel=1e-9)
    ks = KroneckerStrategyMechanism(F, epsilon=1.0, strategies=[h.strategy_matrix()])
    assert ks.sensitivity == h.levels and ks.expected_squared_error() == pytest.approx(h.expected_squared_error(),
                                                                                         rel=1e-9)


def test_kronecker_hierarchical_is_exact_and_its_branchings_minimise_one_product():
    """Δ₁ = Π levels_i; the error is the dense pinv's of ⊗ trees; for one product each b_i is the exact
    argmin of levels² · tr(G_i (A_iᵀA_i)⁻¹) over 2..n_i (the attributes separate), on a union never above
    the identity."""
    imp = I.ranges((9, 12))
    m = KroneckerHierarchicalMechanism(imp, epsilon=0.8)
    A = m.strategy_matrix()
    assert m.sensitivity == np.abs(A).sum(axis=0).max()
    dense = 2 * (m.sensitivity / 0.8) ** 2 * dense_error_factor(imp.matrix(), A)
    assert m.expected_squared_error() == pytest.approx(dense, rel=1e-9)
    for n, b in zip((9, 12), m.branchings):
        F = W.all_range(n)
        errs = hierarchy_errors(F.T @ F)
        assert errs[b][0] ** 2 * errs[b][1] == min(lv**2 * tr for lv, tr in errs.values())
    union = I.union(I.kron(I.prefix(8), I.all_range(6)), I.kron(I.identity(8), I.total(6)))
    u = KroneckerHierarchicalMechanism(union, epsilon=1.0)
    A = u.strategy_matrix()
    assert u.expected_squared_error() == pytest.approx(2 * u.sensitivity**2 * dense_error_factor(union.matrix(), A),
                                                       rel=1e-9)
    assert u.expected_squared_error() <= IdentityMechanism(union, epsilon=1.0).expected_squared_error()


def test_monte_carlo_agrees_with_the_exact_error_on_an_implicit_workload():
    """noise = F A⁺ z, z Laplace iid: E‖noise‖² = 2(Δ₁/ε)²‖F A⁺‖_F², within 5 Monte-Carlo SEs of the
    draws' mean squared norm (sample_noise, computed through the workload's operator)."""
    imp = I.ranges((5, 4))
    m = HierarchicalMechanism(imp, epsilon=1.1, rng=8)
    sq = np.sum(m.sample_noise(40000) ** 2, axis=1)
    assert abs(sq.mean() - m.expected_squared_error()) < 5 * sq.std(ddof=1) / np.sqrt(len(sq))
    e = m.expected_error(n_samples=20000)  # through R with RᵀR = FᵀF
    norms = np.sqrt(sq[:20000])
    assert norms.mean() == pytest.approx(e.value, abs=5 * np.hypot(e.stderr, norms.std() / np.sqrt(20000)))


# ---- bad inputs --------------------------------------------------------------------------------

def test_mechanisms_that_need_the_matrix_refuse_an_implicit_workload():
    imp = I.all_range(6)
    for make in (lambda: LaplaceMechanism(imp, epsilon=1.0), lambda: GaussianMechanism(imp, epsilon=1.0, delta=1e-6),
                 lambda: KNormMechanism(imp, epsilon=1.0), lambda: NIMechanism(imp, epsilon=1.0)):
        with pytest.raises(ValueError, match="F") as info:
            make()
        assert "\n" not in str(info.value) and "implicit workload" in str(info.value)


def test_gram_only_workload_gives_estimates_not_answers():
    G = W.prefix(6).T @ W.prefix(6)
    imp = I.from_gram(G, queries=6)
    acc = BudgetAccountant(epsilon=5.0)
    m = HierarchicalMechanism(imp, epsilon=1.0, accountant=acc)
    assert m.expected_squared_error() == pytest.approx(HierarchicalMechanism(W.prefix(6), epsilon=1.0)
                                                       .expected_squared_error(), rel=1e-10)
    with pytest.raises(ValueError, match="release_estimate"):
        m.release(np.ones(6))
    assert m.answers == 0 and acc.total == (0.0, 0.0)
    assert m.release_estimate(np.ones(6)).shape == (6,) and m.answers == 1


@pytest.mark.parametrize("call,name", [
    (lambda: I.prefix(0), "n"), (lambda: I.all_range(2.0), "n"), (lambda: I.width_range(4, 5), "k"),
    (lambda: I.from_gram(np.ones((2, 3)), queries=2), "gram"), (lambda: I.from_gram(np.eye(2), queries=0), "queries"),
    (lambda: I.from_gram(np.array([[1.0, 2.0], [0.0, 1.0]]), queries=2), "gram"),
    (lambda: I.from_matrix("abc"), "W"), (lambda: I.ranges([]), "shape"), (lambda: I.ranges((3, -1)), "shape"),
    (lambda: I.marginals((2, 2), [(0, 0)]), "cliques"), (lambda: I.marginals((2, 2), [(5,)]), "cliques"),
    (lambda: I.union(I.prefix(3), I.prefix(4)), "shape"), (lambda: I.kron(), "kron"),
    (lambda: I.ImplicitWorkload([]), "terms"), (lambda: I.ImplicitWorkload([[np.eye(2)]]), "terms"),
    (lambda: I.ImplicitWorkload([[I.Factor(np.ones((2, 3)), 2, 0, "bad")]]), "terms"),
    (lambda: I.prefix(4).apply(np.ones(5)), "x"), (lambda: I.prefix(4).kron_trace([]), "inverses"),
    (lambda: KroneckerStrategyMechanism(I.ranges((2, 3)), epsilon=1.0, strategies=[np.eye(2)]), "strategies"),
    (lambda: KroneckerStrategyMechanism(I.ranges((2, 3)), epsilon=1.0, strategies=[np.eye(2), np.eye(2)]),
     "strategies[1]"),
    (lambda: KroneckerStrategyMechanism(I.ranges((2, 3)), epsilon=1.0, strategies=[np.eye(2), np.ones((3, 3))]),
     "strategies[1]"),
    (lambda: KroneckerPIdentityMechanism(I.ranges((2, 3)), epsilon=1.0, p=[1]), "p"),
    (lambda: KroneckerPIdentityMechanism(I.ranges((2, 3)), epsilon=1.0, p=3), "p"),
    (lambda: KroneckerPIdentityMechanism(I.ranges((2, 3)), epsilon=0), "epsilon"),
    (lambda: HierarchicalMechanism(I.prefix(4), epsilon=1.0, root="no"), "root"),
    (lambda: PIdentityMechanism(I.prefix(4), epsilon=1.0, starts=0), "starts"),
    (lambda: KroneckerHierarchicalMechanism(I.ranges((2, 3)), epsilon=1.0, rounds=0), "rounds"),
])
def test_bad_inputs_are_one_line_errors_naming_the_argument(call, name):
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg and name in msg, msg


def test_too_large_requests_fail_before_allocating():
    """n = 10⁶ cells: an n × n Gram (8 TB) is refused by the memory check, not attempted."""
    for call in (lambda: I.all_range(10**6), lambda: I.prefix(10**6), lambda: Hierarchy(10**15, 2)):
        with pytest.raises(ValueError, match="GiB"):
            call()
    big = I.ranges((1000, 1000))  # per-attribute Grams are small; the flattened one is 8 TB
    with pytest.raises(ValueError, match="GiB"):
        big.gram()
    with pytest.raises(ValueError, match="GiB"):
        HierarchicalMechanism(big, epsilon=1.0)
    ident = IdentityMechanism(big, epsilon=1.0, accountant=BudgetAccountant(epsilon=1.0))
    assert ident.rms_error() > 0  # Σ_j Π_i tr(G_ji): no n × n matrix
    with pytest.raises(ValueError, match="F needs about"):  # 2.5·10¹¹ answers
        ident.release(np.ones(big.n))
    assert ident.answers == 0 and ident.accountant.total == (0.0, 0.0)
    assert ident.release_estimate(np.ones(big.n)).shape == (10**6,)  # x̂ fits: n values
