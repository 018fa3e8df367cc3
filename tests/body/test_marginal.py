"""Marginal workloads as operators (knorm.body.marginal, knorm.body._marginal).

The oracle of a marginal workload computes the pivots' product ``Fᵀ(W v)`` from the
workload's structure instead of from the dense columns. Checked here against
independent constructions: the matrix against a definition written out in the test,
the product against ``(WᵀF)ᵀv`` for every split of the attributes, and the oracle's
gauges and chords against HiGHS and against the dense layout of the same body. The
structure is recognised from F's entries: saved and loaded, rows shuffled, scaled, built
by hand; matrices that are not marginal workloads are not recognised.
"""

import itertools
import math

import numpy as np
import pytest
from numba import njit

from knorm import ReferenceOracle, SymmetricHull, workloads
from knorm.body import hull
from knorm.body._marginal import marginal_dots as _marginal_dots
from knorm.body._spectral import spectral_dots as _spectral_dots
from knorm.body.marginal import MarginalStructure, marginal_operator, recognise
from knorm.body.spectral import spectral_operator


@njit
def marginal_dots(M, v, out):
    """The kernel, which only kernels call (it has no Python wrapper of its own)."""
    _marginal_dots(M, v, out)


@njit
def spectral_dots(S, v, out):
    """The transform's kernel, which only kernels call."""
    _spectral_dots(S, v, out)

STRUCTURES = [
    MarginalStructure((2, 2, 2, 2, 2), tuple(itertools.combinations(range(5), 2))),
    MarginalStructure((3, 2, 4, 2), tuple(itertools.combinations(range(4), 2))),
    MarginalStructure((2, 3, 2, 2), tuple(itertools.combinations(range(4), 3))),
    MarginalStructure((3, 4, 2), ((0,), (1,), (2,))),
    MarginalStructure((2, 3, 2, 3), ((2, 3), (0,), (1, 3), (), (0, 1, 2))),  # any order, the total
    MarginalStructure((5,), ((0,),)),
]


def definition(shape, cliques):
    """Row (C, c) is 1 on the cells x with x_C = c (cells and values in C order)."""
    cells = list(itertools.product(*[range(s) for s in shape]))
    rows = []
    for C in cliques:
        for c in itertools.product(*[range(shape[a]) for a in C]):
            rows.append([1.0 if tuple(x[a] for a in C) == c else 0.0 for x in cells])
    return np.array(rows)


@pytest.mark.parametrize("st", STRUCTURES, ids=str)
def test_matrix_is_the_definition(st):
    F = definition(st.shape, st.cliques)
    np.testing.assert_array_equal(st.matrix(), F)
    assert st.rows == F.shape[0] and st.cells == math.prod(st.shape)
    assert st.matches(F)
    G = F.copy()
    G[0, 0] = 1.0 - G[0, 0]
    assert not st.matches(G) and not st.matches(F[:, :-1])


def test_workloads_marginals_is_recognised_from_its_entries():
    F = workloads.marginals((2, 3, 2), 2)
    m = recognise(F)
    assert m.structure == MarginalStructure((2, 3, 2), ((0, 1), (0, 2), (1, 2)))
    assert m.scale == 1.0 and m.rows.tolist() == list(range(16))
    np.testing.assert_array_equal(m.matrix(), F)
    G = F.copy()
    G[1, 2] += 1.0
    assert recognise(G) is None
    assert recognise(np.ones((3, 4))).structure == MarginalStructure((4,), ((),))  # three total rows


def by_hand(shape, cliques):
    """Marginal rows as Kronecker products of unit vectors (clique attributes) and ones."""
    rows = []
    for C in cliques:
        for c in itertools.product(*[range(shape[a]) for a in C]):
            row = np.ones(1)
            for a, s in enumerate(shape):
                row = np.kron(row, np.eye(s)[c[C.index(a)]] if a in C else np.ones(s))
            rows.append(row)
    return np.array(rows)


def variants(tmp_path):
    """The same marginal workloads as a user may hand them over: (name, F, domain size)."""
    rng = np.random.default_rng(7)
    F = workloads.marginals((3, 2, 4, 3), 2)
    path = tmp_path / "F.npy"
    np.save(path, F)
    yield "loaded", np.load(path), 72
    yield "shuffled", F[rng.permutation(F.shape[0])], 72
    yield "times 3.5", 3.5 * F, 72
    yield "times 2^-40", np.ldexp(F[::-1], -40), 72
    yield "times -2", -2.0 * F, 72
    yield "by hand", by_hand((2, 3, 4), [(0, 2), (1,), (), (1, 2)]), 24
    # Fortran-order cells: C order over the attributes reversed
    H = workloads.marginals((2, 3, 4), 2)
    yield "Fortran order", H[:, np.arange(24).reshape(2, 3, 4).ravel(order="F")], 24
    yield "duplicated, partial and zero rows", np.vstack([F[:-5], F[3:9], np.zeros((2, 72))]), 72
    # the values of attribute 2 in another order (cells still a mixed-radix index)
    x = np.indices((3, 2, 4, 3)).reshape(4, -1)
    x[2] = np.array([2, 0, 3, 1])[x[2]]
    yield "values relabelled", F[:, np.ravel_multi_index(x, (3, 2, 4, 3))], 72
    # attribute 1 in no clique: every cell twice (the body keeps one of each)
    yield "an unused attribute", workloads.clique_marginals((2, 3, 2), [(0,), (0, 2)]), 12


def test_recognise_finds_the_structure_from_the_entries(tmp_path):
    for name, F, n in variants(tmp_path):
        m = recognise(F)
        assert m is not None, name
        assert m.structure.cells == n, name
        np.testing.assert_array_equal(m.matrix(), F, err_msg=name)  # F = scale·M[rows], exactly
    # the domain and cliques of a shuffled workload are the ones that built it
    F = workloads.clique_marginals((2, 3, 2, 3), [(2, 3), (0,), (1, 3), ()])
    m = recognise(F[np.random.default_rng(1).permutation(F.shape[0])])
    assert m.structure.shape == (2, 3, 2, 3)
    assert sorted(m.structure.cliques) == [(), (0,), (1, 3), (2, 3)]


@pytest.mark.parametrize("name,F", [
    ("random ±1", np.random.default_rng(0).choice([-1.0, 1.0], (40, 200))),
    ("random 0/1", (np.random.default_rng(0).random((24, 64)) < 0.5) * 1.0),
    ("prefix", workloads.prefix(64)),
    ("one entry flipped", lambda: None),
    ("one entry moved", lambda: None),
    ("two values", lambda: None),
    ("a NaN", lambda: None),
    ("all zero", np.zeros((3, 8))),
])
def test_other_matrices_are_not_recognised(name, F):
    if callable(F):
        F = workloads.marginals((2, 3, 2, 2), 2)
        if name == "one entry flipped":
            F[7, 11] = 1.0 - F[7, 11]
        elif name == "one entry moved":  # same counts per row, no longer a cylinder set
            j = np.flatnonzero(F[7])[0]
            k = np.flatnonzero(F[7] == 0)[-1]
            F[7, j], F[7, k] = 0.0, 1.0
        elif name == "two values":
            F[7] *= 2.0
        else:
            F[0, 0] = np.nan
    assert recognise(F) is None


@pytest.mark.parametrize("st", STRUCTURES, ids=str)
def test_product_equals_dense_for_every_split(st):
    rng = np.random.default_rng(3)
    F = definition(st.shape, st.cliques)
    r = 4
    W = rng.standard_normal((F.shape[0], r))
    D = (W.T @ F).T  # columns of WᵀF as rows
    for outer in range(len(st.shape) + 1):
        M = marginal_operator(st, W, outer=outer)
        for _ in range(3):
            v = rng.standard_normal(r)
            out = np.full(F.shape[1], np.nan)
            marginal_dots(M, v, out)
            np.testing.assert_allclose(out, D @ v, rtol=1e-12, atol=1e-12 * np.abs(D).sum(axis=1).max())


def force(monkeypatch, kind):
    """Make the body take the operator ``kind`` ("tables" or "transform") whatever it costs."""
    monkeypatch.setattr(hull, "STRUCTURED_ABOVE", 0.0)
    monkeypatch.setattr(hull, "plan_ops", lambda s, r: 0.0 if kind == "tables" else np.inf)
    monkeypatch.setattr(hull, "spectral_cost", lambda s, r: 0.0 if kind == "transform" else np.inf)


OPERATORS = ["tables", "transform"]


@pytest.mark.parametrize("kind", OPERATORS)
@pytest.mark.parametrize("shape,k", [((4, 4, 4, 4), 2), ((3, 2, 4, 3), 2), ((2, 2, 3, 2), 3)])
def test_structured_oracle_matches_highs_and_the_dense_layout(shape, k, kind, monkeypatch):
    F = workloads.marginals(shape, k)
    force(monkeypatch, kind)  # always the operator
    K = SymmetricHull(F)
    assert K.frame.cols.structured == kind
    monkeypatch.setattr(hull, "STRUCTURED_ABOVE", np.inf)  # never
    Kd = SymmetricHull(F)
    assert not Kd.frame.cols.structured
    rng = np.random.default_rng(11)
    Y = (F @ rng.standard_normal((F.shape[1], 40))).T
    g = K.gauge(Y)
    np.testing.assert_allclose(g, ReferenceOracle(F).gauge(Y), rtol=1e-9)
    np.testing.assert_allclose(g, Kd.gauge(Y), rtol=1e-12)
    # chords, from interior points and from the centre (a wholly degenerate start)
    for i in range(8):
        x = np.zeros(F.shape[0]) if i % 2 == 0 else 0.5 * Y[i] / g[i]
        u = Y[i + 8]
        tm, tp = K.chord(x, u)
        np.testing.assert_allclose(K.gauge(np.array([x + tm * u, x + tp * u])), 1.0, rtol=1e-9)
        np.testing.assert_allclose((tm, tp), Kd.chord(x, u), rtol=1e-9)


def test_small_or_non_marginal_workloads_stay_dense():
    assert not SymmetricHull(workloads.marginals((2,) * 6, 2)).frame.cols.structured  # too small to gain
    assert not SymmetricHull(np.eye(40)).frame.cols.structured  # one clique of everything: no gain
    F = workloads.marginals((2,) * 12, 2)
    assert SymmetricHull(F).frame.cols.structured
    G = F.copy()
    G[0, 0] = 0.5
    assert not SymmetricHull(G).frame.cols.structured


@pytest.mark.parametrize("kind", OPERATORS)
def test_every_variant_gets_the_operator_with_the_dense_gauges(tmp_path, monkeypatch, kind):
    """Loaded, shuffled, scaled, hand-built: the operator's gauges and chords are the dense
    layout's (the same sums in another order, 1e-12) and HiGHS's (1e-9)."""
    rng = np.random.default_rng(11)
    for name, F, _ in variants(tmp_path):
        force(monkeypatch, kind)
        K = SymmetricHull(F)
        assert K.frame.cols.structured == kind, name
        monkeypatch.setattr(hull, "STRUCTURED_ABOVE", np.inf)
        Kd = SymmetricHull(F)
        assert not Kd.frame.cols.structured
        Y = (F @ rng.standard_normal((F.shape[1], 20))).T
        g = K.gauge(Y)
        np.testing.assert_allclose(g, Kd.gauge(Y), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(g, ReferenceOracle(F).gauge(Y), rtol=1e-9, err_msg=name)
        tm, tp = K.chord(0.5 * Y[0] / g[0], Y[1])
        np.testing.assert_allclose((tm, tp), Kd.chord(0.5 * Y[0] / g[0], Y[1]), rtol=1e-9, err_msg=name)


@pytest.mark.parametrize("kind", OPERATORS)
def test_operator_of_a_match_is_the_product_with_f(tmp_path, kind):
    """``Fᵀ(W v)`` from the match's weights equals the dense product for every variant (shuffled,
    scaled, partial, relabelled), by the tables and by the product transform."""
    rng = np.random.default_rng(2)
    build, dots = (marginal_operator, marginal_dots) if kind == "tables" else (spectral_operator, spectral_dots)
    for name, F, _ in variants(tmp_path):
        m = recognise(F)
        W = rng.standard_normal((F.shape[0], 5))
        D = (W.T @ F).T
        v = rng.standard_normal(5)
        out = np.empty(F.shape[1])
        dots(build(m.structure, m.weights(W)), v, out)
        np.testing.assert_allclose(out, D @ v, rtol=1e-12, atol=1e-12 * np.abs(D).sum(axis=1).max(), err_msg=name)


def test_clique_marginals_builds_the_definition_and_is_recognised():
    F = workloads.clique_marginals((2, 3, 2, 3), [(3, 2), (0,), (), (1, 3)])  # attributes sorted per clique
    np.testing.assert_array_equal(F, definition((2, 3, 2, 3), [(2, 3), (0,), (), (1, 3)]))
    assert recognise(F).structure == MarginalStructure((2, 3, 2, 3), ((2, 3), (0,), (), (1, 3)))
    np.testing.assert_array_equal(workloads.clique_marginals((2, 3, 2), list(itertools.combinations(range(3), 2))),
                                  workloads.marginals((2, 3, 2), 2))


@pytest.mark.parametrize("cliques", [[], "ab", [(0, 0)], [(3,)], [(-1,)], [(0.5,)], [2]])
def test_clique_marginals_rejects_bad_cliques(cliques):
    with pytest.raises(ValueError, match=r"^cliques"):
        workloads.clique_marginals((2, 3, 2), cliques)


def test_clique_marginals_refuses_matrices_over_the_cap():
    with pytest.raises(ValueError, match="cliques=.*over the cap"):
        workloads.clique_marginals((2,) * 30, [(0,), (1,)])


@pytest.mark.parametrize("kind", OPERATORS)
def test_structured_frame_survives_pickling(monkeypatch, kind):
    """Process pools and Dask get the frame pickled: the operator travels with it."""
    import pickle

    force(monkeypatch, kind)
    F = workloads.marginals((3, 2, 4, 3), 2)
    K = SymmetricHull(F)
    frame = pickle.loads(pickle.dumps(K.frame))
    assert frame.cols.structured == kind
    Y = (F @ np.random.default_rng(5).standard_normal((F.shape[1], 10))).T
    Z = K._to_frame(Y)[0]  # the oracle's coordinates (rows scaled by powers of two)
    np.testing.assert_allclose(frame.gauges(Z, oracle=True)[0], K.frame.gauges(Z, oracle=True)[0], rtol=1e-12)
