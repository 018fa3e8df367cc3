"""The exact oracle on degenerate and ill-conditioned bodies (issue 9, items 1, 2, 6, 7).

0/1 workloads (marginals, ranges, sparse Bernoulli) give K's polar vertices far more
tight constraints than r: every dual simplex pivot ties. These bodies used to exhaust
the pivot limit, break down, or raise a raw LinAlgError from a singular basis.
"""

import numpy as np
import pytest
from scipy import stats

from knorm import OracleError, ReferenceOracle, SymmetricHull, sample_uniform, workloads
from knorm.body import _simplex as sx
from knorm.body.structure import detect


def hierarchical(n, b):
    """Range queries of a b-ary tree over n cells (root, children, ..., leaves)."""
    rows = []
    level = [(0, n)]
    while level:
        nxt = []
        for lo, hi in level:
            row = np.zeros(n)
            row[lo:hi] = 1.0
            rows.append(row)
            if hi - lo > 1:
                cuts = np.linspace(lo, hi, min(b, hi - lo) + 1).round().astype(int)
                nxt += [(a, c) for a, c in zip(cuts[:-1], cuts[1:]) if c > a]
        level = nxt
    return np.array(rows)


def sparse_bernoulli(d, n, p, seed):
    F = workloads.random_bernoulli(d, n, p=p, rng=np.random.default_rng(seed))
    return F[:, F.any(axis=0)]


def near_parallel(seed):
    rng = np.random.default_rng(seed)
    F = rng.choice([0.0, 1.0], size=(12, 30))
    F[0] = 1.0
    dup = F[:, :10].copy()
    near = F[:, 10:20] + 1e-7 * rng.standard_normal((12, 10))
    return np.hstack([F, dup, near, 2.0 * F[:, :5]])


def ill_conditioned(cond, seed):
    rng = np.random.default_rng(seed)
    d, n = 10, 40
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return U @ np.diag(np.logspace(0, -np.log10(cond), d)) @ rng.choice([-1.0, 1.0], size=(d, n))


BODIES = {
    "marg2_mixed": lambda: workloads.marginals((2, 3, 4, 2), 2),
    "marg3_mixed": lambda: workloads.marginals((2, 3, 2, 2), 3),
    "marg2_bin7": lambda: workloads.marginals((2,) * 7, 2),
    "marg3_bin7": lambda: workloads.marginals((2,) * 7, 3),
    "width_range": lambda: workloads.width_range(40, 5),
    "hier_3ary": lambda: hierarchical(27, 3),
    "hier_2ary": lambda: hierarchical(32, 2),
    "sparse_bern": lambda: sparse_bernoulli(30, 200, 0.05, 1),
    "near_parallel": lambda: near_parallel(2),
    "cond_1e6": lambda: ill_conditioned(1e6, 3),
    "marg2_scaled_up": lambda: 1e8 * workloads.marginals((2, 3, 2), 2),
    "marg2_scaled_down": lambda: 1e-8 * workloads.marginals((2, 3, 2), 2),
}


def in_span_points(F, m, rng):
    """Points of the span of F at random scales (combinations of its columns)."""
    return (F @ rng.standard_normal((F.shape[1], m))).T * rng.uniform(0.1, 10, size=(m, 1))


@pytest.mark.parametrize("name", sorted(BODIES))
def test_gauge_matches_highs(name):
    F = BODIES[name]()
    K = SymmetricHull(F)
    rng = np.random.default_rng(len(name))
    Y = in_span_points(F, 25, rng)
    got = K.gauge(Y)
    want = ReferenceOracle(F).gauge(Y)
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_facet_normals_and_chords_never_fail(name):
    F = BODIES[name]()
    K = SymmetricHull(F)
    rng = np.random.default_rng(100 + len(name))
    Y = in_span_points(F, 40, rng)
    lam = K.facet_normal(Y)
    g = K.gauge(Y)
    # λ is dual feasible and certifies the gauge: λ·y = ‖y‖_K, |Fᵀλ| <= 1 (in ambient
    # coordinates: the map from the frame costs a few ulps times ‖λ‖‖y‖ on thin bodies)
    np.testing.assert_allclose(np.einsum("ij,ij->i", lam, Y), g, rtol=1e-8)
    assert np.abs(lam @ K.F).max() <= 1 + 1e-9
    for i in range(12):
        x = rng.uniform(0.05, 0.95) * Y[i] / g[i]
        u = in_span_points(F, 1, rng)[0]
        tm, tp = K.chord(x, u)
        assert tm < 0 < tp
        ends = np.array([x + tm * u, x + tp * u])
        np.testing.assert_allclose(K.gauge(ends), 1.0, rtol=1e-9)


def test_marginals_of_8_binary_attributes_gauges():
    """The body whose gauges exhausted the pivot limit (body_radius) before."""
    F = workloads.marginals((2,) * 8, 2)
    K = SymmetricHull(F)
    fr = K.frame
    rng = np.random.default_rng(0)
    V = rng.standard_normal((60, fr.r))
    g, _ = fr.gauges(V, state=fr.crash_basis())
    assert np.all(np.isfinite(g)) and np.all(g > 0)
    Y = in_span_points(F, 8, rng)
    np.testing.assert_allclose(K.gauge(Y), ReferenceOracle(F).gauge(Y), rtol=1e-9)


def test_marginals_of_10_binary_attributes_gauges():
    """Rank 56, n 1024: 'numerical breakdown' in rounding before."""
    F = workloads.marginals((2,) * 10, 2)
    K = SymmetricHull(F)
    rng = np.random.default_rng(1)
    Y = in_span_points(F, 6, rng)
    np.testing.assert_allclose(K.gauge(Y), ReferenceOracle(F).gauge(Y), rtol=1e-9)
    fr = K.frame
    V = rng.standard_normal((30, fr.r))
    g, _ = fr.gauges(V, state=fr.crash_basis())
    assert np.all(np.isfinite(g)) and np.all(g > 0)
    assert K.exact_structure is None


def test_singular_basis_is_repaired_not_raised():
    """A singular basis (a column twice) is replaced by a crash basis: no LinAlgError."""
    F = workloads.marginals((2, 2, 3), 2)
    K = SymmetricHull(F)
    fr = K.frame
    st = fr.crash_basis()
    st.basis[1] = st.basis[0]  # two equal columns: B is singular
    assert sx.refactor(fr.A, *st.args()) == sx.REPAIRED
    assert len(set(st.basis.tolist())) == fr.r
    # the repaired basis is dual feasible and the oracle works from it
    assert np.abs(st.g).max() <= 1 + 1e-9
    y = np.random.default_rng(1).standard_normal(fr.r)
    g, _ = fr.gauges(y[None], state=st)
    g2, _ = fr.gauges(y[None], state=fr.crash_basis())
    assert g[0] == pytest.approx(g2[0], rel=1e-12)


def test_structure_detection_never_raises():
    """Bodies it cannot classify give None (MCMC takes over), even when the oracle fails."""
    F = workloads.marginals((2, 3, 2), 2)
    fr = SymmetricHull(F).frame
    assert detect(fr) is None

    class Broken:
        Ft = fr.Ft

        def crash_basis(self, direction=None):
            raise OracleError("facet-walk oracle found no starting basis")

        solve = crash_basis

        def gauges(self, Y, state=None):
            raise np.linalg.LinAlgError("singular matrix")

    assert detect(Broken()) is None
    # exact structures are still found
    assert detect(SymmetricHull(np.eye(4)).frame).kind == "cross-polytope"


def test_uniformity_on_a_marginal_body():
    """‖z‖_K^r ~ U(0,1) for z ~ Uniform(K), K the 2-way marginals of a 2×3×2 table."""
    F = workloads.marginals((2, 3, 2), 2)
    K = SymmetricHull(F)
    Z = sample_uniform(K, 2000, rng=5)
    u = K.gauge(Z) ** K.dim
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_cross_structure_found_with_many_interior_columns():
    """Many columns (n > 16 r): the one-solve test finds G·B₁^r with interior columns."""
    rng = np.random.default_rng(3)
    G = rng.standard_normal((5, 5))
    W = rng.standard_normal((5, 200))
    W *= rng.uniform(0.1, 0.99, 200) / np.abs(W).sum(axis=0)
    found = detect(SymmetricHull(np.hstack([G, G @ W])).frame)
    assert found is not None and found.kind == "cross-polytope"


def test_cross_structure_found_with_boundary_columns_that_are_not_vertices():
    """n <= 16 r and columns on K's boundary that are not vertices (edge midpoints): the facet
    of the one-solve test holds more than r columns, so the n-solve test runs and finds G."""
    rng = np.random.default_rng(4)
    G = rng.standard_normal((5, 5))
    mid = np.array([(G[:, i] + s * G[:, j]) / 2 for i in range(5) for j in range(i + 1, 5) for s in (1, -1)]).T
    found = detect(SymmetricHull(np.hstack([mid, G])).frame)
    assert found is not None and found.kind == "cross-polytope"


def test_no_cross_structure_is_proved_by_one_simple_facet(monkeypatch):
    """A random ±1 F (40×200): the generic facet holds exactly r columns, which are then
    vertices of K and, were K = G·B₁^r, G itself; they fail the check, so detection says None
    without gauging every column (n solves)."""
    F = np.random.default_rng(5).choice([-1.0, 1.0], size=(40, 200))
    fr = SymmetricHull(F).frame

    def no_n_solves(*args, **kwargs):
        raise AssertionError("the n-solve test ran")

    monkeypatch.setattr(fr, "gauges", no_n_solves)
    assert detect(fr) is None


def test_no_cross_structure_is_proved_by_exposed_columns(monkeypatch):
    """2-way marginals of a 3×4×5 table: degenerate facets (more than r columns on each), but
    every 0/1 column with one 1 per table is exposed by its own functional, so K has 2n > 2r
    vertices and detection says None without gauging every column. A cross-polytope image
    with interior and edge-midpoint columns has only r exposed columns: the n-solve test runs."""
    from knorm.body.structure import _more_than_r_vertices

    fr = SymmetricHull(workloads.marginals((3, 4, 5), 2)).frame
    assert fr.n <= 16 * fr.r

    def no_n_solves(*args, **kwargs):
        raise AssertionError("the n-solve test ran")

    monkeypatch.setattr(fr, "gauges", no_n_solves)
    assert detect(fr) is None
    rng = np.random.default_rng(4)
    G = rng.standard_normal((5, 5))
    mid = np.array([(G[:, i] + s * G[:, j]) / 2 for i in range(5) for j in range(i + 1, 5) for s in (1, -1)]).T
    assert not _more_than_r_vertices(SymmetricHull(np.hstack([mid, G, G @ rng.uniform(-0.1, 0.1, (5, 7))])).frame.Ft, 1e-9)


@pytest.mark.parametrize("cond", [1e8, 1e10, 1e12])
def test_ill_conditioned_bodies_match_their_well_conditioned_preimage(cond):
    """F = U·diag(s)·G with U orthogonal, s from 1 down to 1/cond, G a ±1 matrix.

    For y = F·w:  F w' = y  ⇔  G w' = diag(s)⁻¹Uᵀy = G w, so ‖y‖_K = ‖Gw‖_{G·B₁ⁿ}: the
    exact value comes from HiGHS on the well-conditioned G (HiGHS on F itself fails from
    cond 1e10 on). The float y = F·w is only known to ≈ 1e-16·‖F‖‖w‖ in its thin
    directions, so agreement is expected to ≈ 1e-16·cond (relative), no better.
    """
    rng = np.random.default_rng(3)
    d, n = 10, 40
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    s = np.logspace(0, -np.log10(cond), d)
    G = rng.choice([-1.0, 1.0], size=(d, n))
    F = U @ np.diag(s) @ G
    K = SymmetricHull(F)
    assert K.dim == d
    W = rng.standard_normal((30, n))
    got = K.gauge(W @ F.T)
    want = ReferenceOracle(G).gauge(W @ G.T)
    np.testing.assert_allclose(got, want, rtol=max(1e-9, 1e-14 * cond))
    # chords never fail and end on the boundary, in the oracle's own (well-conditioned,
    # whitened) coordinates: there no map from ill-conditioned coordinates intervenes
    fr = K.frame
    V = rng.standard_normal((12, d))
    g, _ = fr.gauges(V, state=fr.crash_basis(), oracle=True)
    for v, gv in zip(V, g):
        x = 0.5 * v / gv
        u = rng.standard_normal(d)
        st = fr.solve_copy(x, oracle=True)
        t, hit = fr.move(x, u, np.inf, st, oracle=True)
        assert hit
        end = fr.gauges((x + t * u)[None], state=fr.crash_basis(), oracle=True)[0][0]
        assert end == pytest.approx(1.0, rel=1e-8)  # Harris tolerance of the moves: 1e-9 on reduced costs


def test_uniformity_on_an_ill_conditioned_body():
    """‖z‖_K^r ~ U(0,1) for z ~ Uniform(K) at cond(F) = 1e12 (gauges in the frame)."""
    rng = np.random.default_rng(4)
    d, n = 6, 20
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    F = U @ np.diag(np.logspace(0, -12, d)) @ rng.choice([-1.0, 1.0], size=(d, n))
    K = SymmetricHull(F)
    from knorm.walks.sampler import Sampler

    s = Sampler(K, rng=7)
    Z = s.sample(2000)
    # back to span (frame) coordinates exactly as the sampler produced them: c = Uᵀy/unit
    C = (Z @ K.span_basis) / K._scale
    g, _ = K.frame.gauges(C)
    assert stats.kstest(g ** K.dim, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("shape", [(4, 4, 4, 4), (3, 2, 4, 3, 3)])
def test_marginal_bodies_whose_exact_ties_made_the_ray_walk_cycle(shape):
    """In coordinates made of rows of F (exact 0/1 data) these bodies' billiard walks hit
    the pivot limit (ties the parametric walk cycled on); the oracle's coordinates are
    now rotations of the span, and 400 certified draws come out."""
    F = workloads.marginals(shape, 2)
    Z = sample_uniform(F, 400, rng=1)
    assert Z.shape == (400, F.shape[0])
    assert np.all(SymmetricHull(F).gauge(Z) <= 1 + 1e-9)


@pytest.mark.parametrize("name", ["marg2_mixed", "sparse_bern", "cond_1e6", "hier_2ary"])
def test_compressed_storage_gives_the_same_oracle(name, monkeypatch):
    """Force F's compressed layout (used where the oracle's coordinates are at most 10%
    non-zero) on bodies that would be stored dense: gauges still match HiGHS, and
    chords end on the boundary."""
    from knorm.body import hull

    monkeypatch.setattr(hull, "DENSE_ABOVE", 2.0)  # nnz > 2·size never holds: always compressed
    F = BODIES[name]()
    K = SymmetricHull(F)
    assert not K.frame.cols.dense
    rng = np.random.default_rng(7)
    Y = in_span_points(F, 20, rng)
    np.testing.assert_allclose(K.gauge(Y), ReferenceOracle(F).gauge(Y), rtol=1e-9)
    g = K.gauge(Y)
    for i in range(6):
        x = 0.5 * Y[i] / g[i]
        tm, tp = K.chord(x, Y[i + 6])
        ends = np.array([x + tm * Y[i + 6], x + tp * Y[i + 6]])
        np.testing.assert_allclose(K.gauge(ends), 1.0, rtol=1e-9)


def test_the_centre_crash_basis_is_made_once_per_body(monkeypatch):
    """crash_basis() without a direction walks along the oracle's (1, …, 1), the same for every
    frame of a body: made once (7 s at census size), then copies equal to it, for any frame."""
    fr = SymmetricHull(workloads.marginals((2, 3, 4), 2)).frame
    first = fr.crash_basis()
    monkeypatch.setattr(sx, "crash", lambda *a: (_ for _ in ()).throw(AssertionError("crashed again")))
    again = fr.mapped(np.diag(np.linspace(1.0, 2.0, fr.r))).crash_basis()
    for a, b in zip(first.args(), again.args()):
        np.testing.assert_array_equal(a, b)
    again.basis[0] = -1  # a copy: the kept state is not touched
    assert fr.crash_basis().basis[0] == first.basis[0]
