"""The exact oracle against HiGHS / OSQP and against bodies with known gauges (docs/design.md §2, §6)."""

import itertools

import numpy as np
import pytest

from knorm import OracleError, ReferenceOracle, SymmetricHull


def random_F(kind, d, n, rng):
    if kind == "pm1":
        return rng.choice([-1.0, 1.0], size=(d, n))
    if kind == "bernoulli":
        F = rng.integers(0, 2, size=(d, n)).astype(float)
        F[:, 0] = 1.0  # make sure no row is zero
        return F
    return rng.standard_normal((d, n))


def cube_F(d):
    """One column per ± pair of the 2^d sign vectors: K = [-1, 1]^d."""
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=d - 1)))
    return np.column_stack([np.ones(len(signs)), signs]).T


CASES = [("pm1", 5, 8), ("pm1", 10, 50), ("bernoulli", 20, 100), ("gauss", 20, 30), ("pm1", 40, 200),
         ("gauss", 40, 1000), ("bernoulli", 40, 1000)]


@pytest.mark.parametrize("kind,d,n", CASES)
def test_gauge_matches_highs(kind, d, n):
    rng = np.random.default_rng(d * 1000 + n)
    F = random_F(kind, d, n, rng)
    K = SymmetricHull(F)
    ref = ReferenceOracle(F)
    Y = rng.standard_normal((12, d)) * rng.uniform(0.1, 10, size=(12, 1))
    got = K.gauge(Y)
    want = ref.gauge(Y)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # single point in, float out
    assert isinstance(K.gauge(Y[0]), float)
    assert K.gauge(Y[0]) == pytest.approx(want[0], rel=1e-9)


@pytest.mark.parametrize("kind,d,n", CASES[:5])
def test_chord_matches_highs_and_ends_on_boundary(kind, d, n):
    rng = np.random.default_rng(7 + d + n)
    F = random_F(kind, d, n, rng)
    K = SymmetricHull(F)
    ref = ReferenceOracle(F)
    for _ in range(3):
        v = rng.standard_normal(d)
        x = rng.uniform(0.1, 0.9) * v / K.gauge(v)
        u = rng.standard_normal(d)
        tm, tp = K.chord(x, u)
        rm, rp = ref.chord(x, u)
        assert tm < 0 < tp
        assert tp == pytest.approx(rp, rel=1e-8, abs=1e-12)
        assert tm == pytest.approx(rm, rel=1e-8, abs=1e-12)
        assert K.gauge(x + tp * u) == pytest.approx(1.0, abs=1e-9)
        assert K.gauge(x + tm * u) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("kind,d,n", CASES[:5])
def test_facet_normal_is_an_optimal_dual(kind, d, n):
    rng = np.random.default_rng(3 + d)
    F = random_F(kind, d, n, rng)
    K = SymmetricHull(F)
    Y = rng.standard_normal((5, d))
    lam = K.facet_normal(Y)
    g = K.gauge(Y)
    np.testing.assert_allclose(np.einsum("ij,ij->i", lam, Y), g, rtol=1e-9)
    assert np.max(np.abs(F.T @ lam.T)) <= 1 + 1e-9
    # HiGHS's dual attains the same value
    ref = ReferenceOracle(F)
    lam_ref = ref.facet_normal(Y[0])
    assert lam_ref @ Y[0] == pytest.approx(g[0], rel=1e-8)


def test_contains_near_the_boundary():
    rng = np.random.default_rng(11)
    F = random_F("pm1", 15, 60, rng)
    K = SymmetricHull(F)
    V = rng.standard_normal((20, 15))
    B = V / K.gauge(V)[:, None]
    assert np.all(K.contains(B * (1 - 1e-6)))
    assert not np.any(K.contains(B * (1 + 1e-6)))


def test_osqp_projection_agrees_on_membership():
    rng = np.random.default_rng(5)
    F = random_F("gauss", 6, 15, rng)
    K = SymmetricHull(F)
    qp = ReferenceOracle(F, method="osqp")
    V = rng.standard_normal((6, 6))
    B = V / K.gauge(V)[:, None]
    for b in B:
        assert qp.distance(0.9 * b) < 1e-6
        assert qp.contains(0.9 * b)
        assert qp.distance(1.2 * b) > 1e-3
        assert not qp.contains(1.2 * b)
    with pytest.raises(ValueError, match="method='highs'"):
        qp.gauge(B[0])


# ---- bodies with known truth (docs/design.md §6) ----------------------------------------

def test_cross_polytope_gauge_is_l1():
    rng = np.random.default_rng(0)
    K = SymmetricHull(np.eye(7))
    Y = rng.standard_normal((50, 7))
    np.testing.assert_allclose(K.gauge(Y), np.abs(Y).sum(1), rtol=1e-12)


def test_scaled_cross_polytope_gauge():
    rng = np.random.default_rng(1)
    s = np.array([0.5, 1.0, 2.0, 8.0])
    K = SymmetricHull(np.diag(s))
    Y = rng.standard_normal((50, 4))
    np.testing.assert_allclose(K.gauge(Y), (np.abs(Y) / s).sum(1), rtol=1e-12)


@pytest.mark.parametrize("d", [3, 6, 8])
def test_cube_gauge_is_linf_without_cycling(d):
    """The cube is maximally degenerate for the simplex (2^(d-1) columns on each facet)."""
    rng = np.random.default_rng(d)
    K = SymmetricHull(cube_F(d))
    Y = rng.standard_normal((200, d))
    Y[:50] = np.round(Y[:50])  # many ties: points on ridges and vertices of the cube's cones
    Y[:50, 0] = 1.0
    np.testing.assert_allclose(K.gauge(Y), np.abs(Y).max(1), rtol=1e-10)
    x = np.zeros(d)
    u = rng.standard_normal(d)
    tm, tp = K.chord(x, u)
    assert tp == pytest.approx(1 / np.abs(u).max(), rel=1e-10)
    assert tm == pytest.approx(-1 / np.abs(u).max(), rel=1e-10)


def test_redundant_columns_change_nothing():
    rng = np.random.default_rng(2)
    F = random_F("gauss", 5, 12, rng)
    extra = np.column_stack([F, F[:, :3], -F[:, 3:5], 0.5 * F[:, 0], 0.2 * F[:, 1] - 0.3 * F[:, 2],
                             np.zeros(5)])
    K, K2 = SymmetricHull(F), SymmetricHull(extra)
    Y = rng.standard_normal((30, 5))
    np.testing.assert_allclose(K2.gauge(Y), K.gauge(Y), rtol=1e-10)
    assert K2.n_columns <= extra.shape[1] - 1 - 5  # zero, duplicate and opposite columns dropped


def test_duplicates_are_found_across_the_pieces_the_columns_are_compared_in(monkeypatch):
    """The columns are compared up to sign in pieces of DISTINCT_CHUNK (memory); a duplicate or an
    opposite in another piece is dropped all the same, and the first of each kind is kept."""
    import knorm.body.hull as H

    rng = np.random.default_rng(4)
    F = rng.choice([-1.0, 0.0, 1.0], size=(6, 10))
    F[0] = 1.0  # no zero column
    extra = np.column_stack([F, -F[:, 7], F[:, 2], np.zeros(6), -F[:, 0], F[:, 9]])  # 5 repeats, 1 zero
    whole = SymmetricHull(extra)
    monkeypatch.setattr(H, "DISTINCT_CHUNK", 3)
    pieces = SymmetricHull(extra)
    expect = np.unique(F * np.sign(F[np.argmax(F != 0, axis=0), np.arange(10)]), axis=1).shape[1]
    assert pieces.n_columns == whole.n_columns == expect
    np.testing.assert_array_equal(pieces.F, whole.F)
    np.testing.assert_array_equal(pieces.frame.Ft, whole.frame.Ft)


def test_rank_deficient_body_lives_in_the_span():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((6, 3))
    F = A @ rng.choice([-1.0, 1.0], size=(3, 20))
    K = SymmetricHull(F)
    assert (K.ambient_dim, K.dim) == (6, 3)
    Q = K.span_basis
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), atol=1e-12)
    Y = rng.standard_normal((10, 3)) @ A.T  # in the span
    np.testing.assert_allclose(K.gauge(Y), ReferenceOracle(F).gauge(Y), rtol=1e-9)
    off = Y[0] + 0.1 * np.linalg.svd(A)[0][:, -1]
    assert K.gauge(off) == np.inf
    assert not K.contains(off)
    assert ReferenceOracle(F).gauge(off) == np.inf
    x = 0.5 * Y[1] / K.gauge(Y[1])
    tm, tp = K.chord(x, Y[2])
    assert K.gauge(x + tp * Y[2]) == pytest.approx(1.0, abs=1e-9)
    assert K.chord(x, off) == (0.0, 0.0)
    lam = K.facet_normal(Y[3])
    assert lam @ Y[3] == pytest.approx(K.gauge(Y[3]), rel=1e-9)
    np.testing.assert_allclose(lam - Q @ (Q.T @ lam), 0, atol=1e-12)


def test_zero_and_chord_edge_cases():
    K = SymmetricHull(np.eye(3))
    assert K.gauge(np.zeros(3)) == 0.0
    assert K.chord(np.zeros(3), np.zeros(3)) == (-np.inf, np.inf)
    with pytest.raises(ValueError, match="inside K"):
        K.chord(np.array([2.0, 0, 0]), np.ones(3))


# ---- bad input --------------------------------------------------------------------------

@pytest.mark.parametrize(
    "F,match",
    [
        (np.array([1.0, 2.0]), "2-D"),
        (np.zeros((3, 0)), "empty"),
        (np.zeros((3, 4)), "no non-zero column"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN or infinite"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), "NaN or infinite"),
        (np.eye(2) * (1 + 1j), "complex"),
        (np.array([[1, "a"], [2, 3]], dtype=object), "object"),
        (np.array([["a", "b"]]), "numeric"),
        (np.ones((2, 2, 2)), "2-D"),
    ],
)
def test_bad_matrix_raises(F, match):
    with pytest.raises(ValueError, match=match):
        SymmetricHull(F)


def test_bad_points_raise():
    K = SymmetricHull(np.eye(3))
    with pytest.raises(ValueError, match="shape"):
        K.gauge(np.ones(4))
    with pytest.raises(ValueError, match="NaN"):
        K.gauge(np.array([1.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="real"):
        K.gauge(np.ones(3) * 1j)
    with pytest.raises(ValueError, match="method"):
        ReferenceOracle(np.eye(3), method="simplex")


def test_pivot_limit_raises_clear_error():
    rng = np.random.default_rng(0)
    K = SymmetricHull(random_F("pm1", 20, 100, rng))
    K.frame.max_pivots = 1
    with pytest.raises(OracleError, match="pivot limit"):
        K.gauge(rng.standard_normal((5, 20)) * 100)


def test_concurrent_queries_from_threads_stay_exact():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(12)
    F = random_F("pm1", 15, 60, rng)
    K = SymmetricHull(F)
    batches = [rng.standard_normal((40, 15)) for _ in range(8)]
    want = [ReferenceOracle(F).gauge(b) for b in batches[:2]]
    with ThreadPoolExecutor(max_workers=4) as ex:
        got = list(ex.map(lambda b: np.concatenate([K.gauge(y[None]) for y in b]), batches))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9)
