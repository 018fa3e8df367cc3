"""A marginal workload known by its structure, never made dense (knorm.body.marginal_ops; issue 49).

Every claim is checked against the dense matrix the structure describes, built independently
here from the definition (per table, one row per value combination of its attributes in C order,
the indicator of the matching cells): the canonical form against what ``recognise`` finds from
the dense entries, the answers, column counts and fingerprint against the dense products and
bytes, the body against the dense body bit for bit, and the mechanisms' releases against those
of the dense F under the same (non-private, test-only) seeds.
"""

import itertools

import numpy as np
import pytest

import knorm
import knorm.implicit as I
from knorm._fingerprint import fingerprint
from knorm.body.hull import SymmetricHull
from knorm.body.marginal import MarginalMatch, MarginalStructure, recognise
from knorm.body.marginal_ops import (answers, as_marginal, canonical, column_counts, complete, dense_marginal,
                                     fingerprint_of)


def dense(shape, cliques):
    """The marginal matrix from its definition (rows per table in C order over the table's attributes)."""
    cells = list(itertools.product(*[range(s) for s in shape]))
    rows = []
    for c in cliques:
        for vals in itertools.product(*[range(shape[a]) for a in c]):
            rows.append([1.0 if all(cell[a] == v for a, v in zip(c, vals)) else 0.0 for cell in cells])
    return np.array(rows)


def random_matches(seed, count):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        k = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 4, size=k))
        every = [c for j in range(k + 1) for c in itertools.combinations(range(k), j)]
        cliques = tuple(every[i] for i in rng.choice(len(every), size=int(rng.integers(1, len(every) + 1))))
        st = MarginalStructure(shape, cliques)
        rows = np.arange(st.rows) if len(out) % 2 else rng.integers(-1, st.rows, size=int(rng.integers(1, 2 * st.rows + 1)))
        m = MarginalMatch(st, float(rng.choice([1.0, 0.5, 3.0, -2.0])), rows.astype(np.int64))
        if np.any(m.rows >= 0):
            out.append(m)
    return out


def test_the_structure_describes_the_defined_matrix():
    for shape, cliques in [((2, 3, 4), ((0, 1), (2,), ())), ((3, 2, 2), ((0,), (1, 2), (0, 2)))]:
        st = MarginalStructure(shape, cliques)
        m = MarginalMatch(st, 1.0, np.arange(st.rows))
        assert np.array_equal(dense_marginal(m), dense(shape, cliques))


@pytest.mark.parametrize("m", random_matches(1, 120), ids=lambda m: f"{m.structure.shape}")
def test_operations_agree_with_the_dense_matrix(m):
    F = dense_marginal(m)
    ref = (np.where((m.rows >= 0)[:, None], dense(m.structure.shape, m.structure.cliques)[np.maximum(m.rows, 0)], 0.0)
           * m.scale + 0.0)
    assert np.array_equal(F, ref)
    found = recognise(F)
    c = canonical(m)
    assert found is not None and found.structure == c.structure and found.scale == c.scale
    assert np.array_equal(found.rows, c.rows) and np.array_equal(dense_marginal(c), F)
    assert fingerprint_of(m) == fingerprint(np.ascontiguousarray(F)) == fingerprint_of(c)
    X = np.random.default_rng(2).integers(0, 9, size=(3, F.shape[1])).astype(float)
    assert np.array_equal(answers(m, X), X @ F.T) and np.array_equal(answers(m, X[1]), F @ X[1])
    assert np.array_equal(column_counts(m), np.count_nonzero(F, axis=0))
    if complete(m):  # then every column is non-zero and the columns are distinct
        assert np.all(np.any(F != 0, axis=0))
        assert len({F[:, j].tobytes() for j in range(F.shape[1])}) == F.shape[1]


def test_incomplete_workloads_are_recognised_as_such():
    st = MarginalStructure((2, 3, 2), ((0,), (1,)))  # attribute 2 in no table: duplicate columns
    assert not complete(MarginalMatch(st, 1.0, np.arange(st.rows)))
    st = MarginalStructure((2, 3), ((0, 1),))
    assert not complete(MarginalMatch(st, 1.0, np.arange(st.rows - 1)))  # a row missing: a zero column
    assert complete(MarginalMatch(st, 1.0, np.arange(st.rows)[::-1].copy()))


@pytest.mark.parametrize("shape,k", [((2, 3, 4), 2), ((2,) * 6, 2), ((3, 3, 2, 2), 1), ((2, 2, 3, 2), 3)])
def test_the_body_is_the_dense_body_bit_for_bit(shape, k):
    cliques = [c for j in range(k + 1) for c in itertools.combinations(range(len(shape)), j)]
    w = I.marginals(shape, cliques)
    F = dense(shape, cliques)
    a, b = SymmetricHull(F), SymmetricHull(w)
    assert b._F is None  # built without F
    assert a._source == b._source and a.dim == b.dim and a._scale == b._scale
    assert np.array_equal(a.span_basis, b.span_basis) and np.array_equal(a.frame.T, b.frame.T)
    for x, y in zip(a.frame.A, b.frame.A):
        for u, v in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            assert np.array_equal(u, v)
    assert np.array_equal(b.F, F)  # made on request


def test_an_incomplete_workload_takes_the_dense_path():
    w = I.marginals((2, 3, 2), [(0,), (1,)])  # attribute 2 in no table: the body drops duplicate columns
    b = SymmetricHull(w)
    a = SymmetricHull(w.matrix())
    assert b.n_columns == a.n_columns == 6 and np.array_equal(a.span_basis, b.span_basis)


def test_implicit_workloads_that_are_not_marginal_stay_refused():
    assert as_marginal(I.prefix(5)) is None and as_marginal(np.eye(3)) is None
    with pytest.raises(ValueError, match="implicit workload"):
        knorm.LaplaceMechanism(I.prefix(5), epsilon=1.0)
    scaled = I.kron(I.identity(2), I.prefix(3))  # identity ⊗ prefix: not marginal
    assert as_marginal(scaled) is None


@pytest.mark.parametrize("cls,kw", [(knorm.LaplaceMechanism, {}), (knorm.GaussianMechanism, {"delta": 1e-6}),
                                    (knorm.KNormMechanism, {})])
def test_mechanisms_release_as_on_the_dense_matrix(cls, kw):
    """Seeds here are the tests' own (non-private runs): the same seed on the structure and on the
    dense matrix gives the same answers, bit for bit (the sensitivities, grid and noise agree; the
    answers' sums are exact on counts)."""
    w = I.marginals((2, 3, 4), [(0, 1), (1, 2), (0, 2)])
    F = dense((2, 3, 4), [(0, 1), (1, 2), (0, 2)])
    x = np.random.default_rng(3).integers(0, 50, size=24).astype(float)
    X = np.random.default_rng(4).integers(0, 50, size=(3, 24)).astype(float)
    a, b = cls(F, epsilon=1.0, rng=7, **kw), cls(w, epsilon=1.0, rng=7, **kw)
    assert b._F is None and b.d == F.shape[0] and b.n == 24
    assert np.array_equal(a.release(x), b.release(x))
    assert np.array_equal(a.release_each(X, disjoint=True), b.release_each(X, disjoint=True))
    assert a.privacy.epsilon == b.privacy.epsilon
    assert b._F is None  # nothing above made F dense


def test_a_prepared_marginal_workload_keeps_its_structure(tmp_path):
    w = I.marginals((2, 3, 2, 2), [(0, 1), (1, 2), (2, 3), (0, 3)])
    p = knorm.prepare(w, tmp_path / "m.knorm", recommend=False)
    loaded = knorm.load_prepared(tmp_path / "m.knorm")
    assert isinstance(loaded.workload, MarginalMatch) and loaded.body._F is None
    assert loaded.fingerprint == p.fingerprint == fingerprint(np.ascontiguousarray(w.matrix()))
    m = knorm.KNormMechanism(w, epsilon=1.0, prepared=loaded)
    assert m.body is loaded.body
    knorm.KNormMechanism(w.matrix(), epsilon=1.0, prepared=loaded)  # the dense F is the same workload
    with pytest.raises(ValueError, match="another matrix"):
        knorm.KNormMechanism(I.marginals((2, 3, 2, 2), [(0, 1), (1, 2)]), epsilon=1.0, prepared=loaded)


def test_a_domain_s_marginals_by_structure_are_its_matrix():
    from knorm.data import Attribute, Domain, marginal_workload

    dom = Domain([Attribute("a", categories=[0, 1]), Attribute("b", categories=["x", "y", "z"]),
                  Attribute("c", edges=[0, 1, 2, 3])])
    w = marginal_workload(dom, 2, dense=False)
    assert isinstance(w, I.ImplicitWorkload)
    assert np.array_equal(w.matrix(), marginal_workload(dom, 2))
    assert fingerprint_of(as_marginal(w)) == fingerprint(np.ascontiguousarray(marginal_workload(dom, 2)))
    with pytest.raises(ValueError, match="dense"):
        marginal_workload(dom, 2, dense="no")


@pytest.mark.parametrize("make", [
    lambda w: knorm.KNormMechanism(w, epsilon=1.0), lambda w: knorm.LaplaceMechanism(w, epsilon=1.0),
    lambda w: knorm.GaussianMechanism(w, epsilon=1.0, delta=1e-6), lambda w: knorm.NIMechanism(w, epsilon=1.0),
    lambda w: knorm.SVDGaussianMechanism(w, epsilon=1.0, delta=1e-6), lambda w: SymmetricHull(w)],
    ids=["knorm", "laplace", "gaussian", "nim", "svd-gaussian", "body"])
def test_a_domain_too_large_for_its_cells_fails_fast_naming_f(make):
    """2^70 cells: no mechanism can hold its cells (x alone would be 8 ZiB); each says so in one line
    naming F before anything is allocated (was numpy's "Maximum allowed dimension exceeded")."""
    w = I.marginals((2,) * 70, [(0, 1)])
    with pytest.raises(ValueError) as info:
        make(w)
    msg = str(info.value)
    assert msg.startswith("F needs about") and "\n" not in msg


def test_recommend_on_a_domain_too_large_for_its_cells_still_answers_from_the_structure():
    """The identity strategy's error is exact from F's structure alone; every other row says why it
    is skipped (memory), none fails."""
    rec = knorm.recommend(I.marginals((2,) * 70, [(0, 1)]), epsilon=1.0)
    assert rec.best == "identity"
    assert all("GiB" in (row.skipped or "") for name, row in rec.table.items() if name != "identity")


@pytest.mark.parametrize("scale, rows, msg", [
    (1.0, [-1, -1], "F has no non-zero column"), (0.0, [0, 1, 2], "F has no non-zero column"),
    (float("nan"), [0, 1], "F contains NaN or infinite entries"),
    (float("inf"), [0, 1], "F contains NaN or infinite entries")])
def test_a_degenerate_structure_gets_the_dense_matrix_s_error(scale, rows, msg):
    """A match whose F is zero or not finite: every mechanism says what validate_matrix says of the
    dense F, in one line (the SVD Gaussian raised an IndexError, a LinAlgError or a misleading
    underflow before)."""
    m = MarginalMatch(MarginalStructure((2, 3), ((0,), (1,))), scale, np.array(rows, np.int64))
    for make in (lambda: knorm.SVDGaussianMechanism(m, epsilon=1.0, delta=1e-6), lambda: knorm.KNormMechanism(m, epsilon=1.0),
                 lambda: knorm.LaplaceMechanism(m, epsilon=1.0), lambda: knorm.NIMechanism(m, epsilon=1.0)):
        with pytest.raises(ValueError, match=f"^{msg}"):
            make()


def test_signed_zeros_are_one_workload():
    """F with −0.0 where another has +0.0 is the same matrix: the same fingerprint, so a plan, a body
    or a prepared file of one serves the other (a NIM plan_of was refused as 'not this F')."""
    F = knorm.workloads.marginals((2, 3, 4), 2)
    Fm = np.where(F == 0, -0.0, F)
    a = knorm.NIMechanism(F, epsilon=1.0, rng=0, max_levels=1)
    b = knorm.NIMechanism(Fm, epsilon=1.0, rng=0, plan_of=a, max_levels=1)
    assert a.workload_fingerprint() == b.workload_fingerprint() == fingerprint(F)
    assert np.signbit(Fm).any() and not np.signbit(b.F).any()  # the caller's array is not changed


def test_a_subnormal_marginal_workload_says_to_rescale():
    """Entries near 2^-1029: the structure's weights leave float64; one line says to rescale (it said
    'a column of Euclidean norm ≈ 2^nan')."""
    with pytest.raises(ValueError, match="^F's entries .* rescale F by a power of two"):
        SymmetricHull(np.eye(3) * 1e-310)
