"""NIM and the SVD Gaussian on a marginal workload known by its structure (issue 49, item 1).

Given by its structure (``knorm.implicit.marginals``, a ``MarginalMatch``), neither mechanism ever
makes the d × n matrix F: NIM's first level takes the structure (as K-norm does), each later level's
``UᵀF`` and the SVD Gaussian's ``WᵀF`` are summed over F's rows made a piece at a time
(``marginal_ops.project_rows``). The dense matrix goes through the same products in the same order,
so plans, noise laws and seeded releases are those of the dense F bit for bit. Seeds here are the
tests' own (non-private runs).
"""

import contextlib
import itertools
import sys

import numpy as np
import pytest

import knorm
import knorm.implicit as I
from knorm._fingerprint import fingerprint
from knorm import NIMechanism, SVDGaussianMechanism
from knorm.body.marginal import MarginalMatch, MarginalStructure
from knorm.body.marginal_ops import ROW_CHUNK, as_marginal, dense_marginal, project_rows
from knorm.walks import prepared as P


def kway(shape, k):
    return [c for c in itertools.combinations(range(len(shape)), k)]


def shuffled():
    """2-way marginals over (2, 3, 2) at scale 3, rows shuffled, some repeated, one zero row."""
    st = MarginalStructure((2, 3, 2), tuple(kway((2, 3, 2), 2)))
    rows = np.random.default_rng(2).permutation(np.r_[np.arange(st.rows), [0, 5, 7], [-1]]).astype(np.int64)
    return MarginalMatch(st, 3.0, rows)


WORKLOADS = {
    "2-way (2,3,4)": lambda: I.marginals((2, 3, 4), kway((2, 3, 4), 2)),
    "2-way (2,2,2,2)": lambda: I.marginals((2, 2, 2, 2), kway((2, 2, 2, 2), 2)),
    "3-way 5 binary": lambda: I.marginals((2,) * 5, kway((2,) * 5, 3)),  # d = 80: two pieces of rows
    "shuffled match": shuffled,
}


@pytest.fixture
def never_dense(monkeypatch):
    """Inside ``with never_dense():`` anything that makes a marginal workload's F dense raises."""
    def refuse(*args, **kwargs):
        raise AssertionError("F was made dense")

    @contextlib.contextmanager
    def context():
        with monkeypatch.context() as mp:
            for name, mod in list(sys.modules.items()):
                if name.startswith("knorm") and getattr(mod, "dense_marginal", None) is dense_marginal:
                    mp.setattr(mod, "dense_marginal", refuse)
            mp.setattr(MarginalMatch, "matrix", refuse)
            yield
    return context


def fresh():
    """Forget this process's bodies: each mechanism builds its own root body."""
    P._BODIES.clear()


def same_levels(a, b):
    assert a.plan == b.plan and a.predicted_error == b.predicted_error
    for u, v in zip(a.levels, b.levels):
        assert np.array_equal(u.basis, v.basis) and np.array_equal(u.kept, v.kept)
        assert np.array_equal(u.eigenvalues, v.eigenvalues)


@pytest.mark.parametrize("which", list(WORKLOADS))
@pytest.mark.parametrize("kw", [{"split": "halves", "max_levels": 3}, {}])
def test_nim_by_its_structure_is_the_dense_nim_bit_for_bit(which, kw, never_dense):
    w = WORKLOADS[which]()
    F = dense_marginal(as_marginal(w))
    x = np.random.default_rng(3).integers(0, 40, size=F.shape[1]).astype(float)
    fresh()
    a = NIMechanism(F, epsilon=1.0, rng=7, **kw)
    ra, na = a.release(x, size=3), a.sample_noise(2)
    fresh()
    with never_dense():
        b = NIMechanism(w, epsilon=1.0, rng=7, **kw)
        rb, nb = b.release(x, size=3), b.sample_noise(2)
        assert b._F is None and b.levels[0].mechanism._F is None
    same_levels(a, b)
    if kw:
        assert len(b.levels) == 3  # later levels on UᵀF, summed piece by piece
    assert np.array_equal(ra, rb) and np.array_equal(na, nb)
    assert a.privacy == b.privacy


def test_plans_carry_over_between_the_structure_and_its_matrix(never_dense):
    w = I.marginals((2, 3, 4), kway((2, 3, 4), 2))
    F = w.matrix()
    x = np.arange(24.0)
    kw = {"split": "halves", "max_levels": 2}
    dense_plan = NIMechanism(F, epsilon=1.0, rng=1, **kw)
    with never_dense():
        by_structure = NIMechanism(w, epsilon=1.0, rng=1, **kw)
        reused = NIMechanism(w, epsilon=1.0, rng=5, plan_of=dense_plan, **kw)
        assert reused._F is None and dense_plan._F is not None
        with pytest.raises(ValueError, match="plan_of"):  # another workload's plan
            NIMechanism(I.marginals((2, 3, 4), [(0, 1), (1, 2)]), epsilon=1.0, plan_of=by_structure, **kw)
        with pytest.raises(ValueError, match="plan_of"):  # other plan options
            NIMechanism(w, epsilon=1.0, plan_of=by_structure)
        got = reused.release(x)
    same_levels(reused, by_structure)
    back = NIMechanism(F, epsilon=1.0, rng=5, plan_of=by_structure, **kw)
    assert np.array_equal(back.release(x), got)


def test_a_prepared_marginal_file_serves_nim_by_its_structure(tmp_path, never_dense):
    w = I.marginals((2, 3, 2, 2), [(0, 1), (1, 2), (2, 3), (0, 3)])
    knorm.prepare(w, tmp_path / "m.knorm", recommend=False)
    loaded = knorm.load_prepared(tmp_path / "m.knorm")
    kw = {"split": "halves", "max_levels": 2}
    x = np.arange(24.0)
    a = NIMechanism(w.matrix(), epsilon=1.0, rng=4, prepared=loaded, **kw)
    with never_dense():
        b = NIMechanism(w, epsilon=1.0, rng=4, prepared=loaded, **kw)
        assert b.levels[0].mechanism.body is loaded.body and b._F is None
        got = b.release(x)
        with pytest.raises(ValueError, match="another matrix"):
            NIMechanism(I.marginals((2, 3, 2, 2), [(0, 1), (1, 2)]), epsilon=1.0, prepared=loaded)
    same_levels(a, b)
    assert np.array_equal(a.release(x), got)


def test_an_incomplete_structure_takes_the_dense_root_and_the_same_levels():
    """An attribute in no table (duplicate columns): the root body is made dense (docs/design.md §2.2),
    the later levels still from the structure; the same bits as the dense F."""
    w = I.marginals((2, 3, 2), [(0,), (1,), (0, 1)])
    kw = {"split": "halves", "max_levels": 3}
    fresh()
    a = NIMechanism(w.matrix(), epsilon=1.0, rng=2, **kw)
    fresh()
    b = NIMechanism(w, epsilon=1.0, rng=2, **kw)
    same_levels(a, b)
    assert np.array_equal(a.release(np.arange(12.0)), b.release(np.arange(12.0)))


@pytest.mark.parametrize("which", list(WORKLOADS))
def test_the_svd_gaussian_by_its_structure_is_the_dense_one_bit_for_bit(which, never_dense):
    w = WORKLOADS[which]()
    F = dense_marginal(as_marginal(w))
    x = np.random.default_rng(5).integers(0, 40, size=F.shape[1]).astype(float)
    a = SVDGaussianMechanism(F, epsilon=1.0, delta=1e-6, rng=9)
    ra = a.release(x, size=3)
    with never_dense():
        b = SVDGaussianMechanism(w, epsilon=1.0, delta=1e-6, rng=9)
        rb = b.release(x, size=3)
        assert b._F is None
    assert np.array_equal(ra, rb) and a.rms_error() == b.rms_error() and a.noise_scale == b.noise_scale
    assert b.attains_bound == (which != "shuffled match")  # whole tables, each once: G^½'s diagonal constant
    # the strategy's noise is F A⁺ z with A = (FᵀF)^¼: its covariance (F A⁺)(F A⁺)ᵀ = F G^-½ Fᵀ = (F Fᵀ)^½
    B = b._WP @ b._Qt
    U, S, _ = np.linalg.svd(np.ldexp(F, -b._e))
    np.testing.assert_allclose(B @ B.T, (U[:, :len(S)] * S) @ U[:, :len(S)].T, atol=1e-12)


def test_the_svd_gaussian_of_any_matrix_keeps_its_law():
    """Not a marginal workload: F's span from its SVD; the noise law is still (FFᵀ)^½ σ², and the
    error the closed form √(max diag G^½·tr G^½)/μ."""
    F = knorm.workloads.random_pm1(12, 40, rng=4)
    s = SVDGaussianMechanism(F, epsilon=1.0, delta=1e-6, rng=0)
    _, S, Vt = np.linalg.svd(F, full_matrices=False)
    half = (Vt.T * S) @ Vt  # G^½ (FᵀF's eigenvalues near 0 would add ~1e-7 each under a square root)
    assert s.rms_error() == pytest.approx(np.sqrt(half.diagonal().max() * np.trace(half)) / s.mu, rel=1e-9)
    B = s._WP @ s._Qt
    U, S, _ = np.linalg.svd(np.ldexp(F, -s._e))
    np.testing.assert_allclose(B @ B.T, (U * S) @ U.T, atol=1e-12)
    with pytest.raises(ValueError, match="^F"):
        SVDGaussianMechanism(np.zeros((3, 4)), epsilon=1.0, delta=1e-6)


def test_project_rows_is_one_product_for_the_structure_and_the_matrix():
    m = as_marginal(I.marginals((2,) * 6, kway((2,) * 6, 2)))  # d = 60 ...
    m = MarginalMatch(m.structure, 2.0, np.r_[m.rows, m.rows[:30]])  # ... 90: two pieces of rows
    F = dense_marginal(m)
    U = np.random.default_rng(0).standard_normal((F.shape[0], 5))
    got = project_rows(U, m)
    assert F.shape[0] > ROW_CHUNK and np.array_equal(got, project_rows(U, F))
    np.testing.assert_allclose(got, U.T @ F, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="^U must have shape"):
        project_rows(U[:-1], m)


def test_requests_too_large_fail_fast_naming_f(monkeypatch):
    import knorm._validate as V

    w = I.marginals((2,) * 8, kway((2,) * 8, 2))
    m = as_marginal(w)
    monkeypatch.setattr(V, "memory_limit", lambda: 8.0 * 256 * 20)  # F's result rows fit, a piece of rows not
    for make in (lambda: project_rows(np.zeros((m.shape[0], 3)), m),
                 lambda: NIMechanism(w, epsilon=1.0), lambda: SVDGaussianMechanism(w, epsilon=1.0, delta=1e-6)):
        with pytest.raises(ValueError) as info:
            make()
        assert str(info.value).startswith("F needs about") and "\n" not in str(info.value)


def test_recommend_runs_nim_and_the_svd_gaussian_by_the_structure(never_dense):
    w = I.marginals((2, 3, 4), kway((2, 3, 4), 2))
    names = ["gaussian-marginal", "gaussian-svd", "knorm", "nim"]
    fresh()
    dense = knorm.recommend(w.matrix(), epsilon=1.0, delta=1e-6, rng=0, n_samples=300, candidates=names)
    fresh()
    with never_dense():
        r = knorm.recommend(w, epsilon=1.0, delta=1e-6, rng=0, n_samples=300, candidates=names)
        for name in names:
            assert r.table[name].rms is not None, r.table[name].skipped
    for name in names:
        assert r.table[name].rms == dense.table[name].rms, name
    # the cost model holds the body's r × n for the structure (never d × n)
    from knorm.recommend import row_cost
    for name in ("nim", "gaussian-svd"):
        assert row_cost(name, 4993, 65536, rank=697, shape=(2,) * 16)[1] < row_cost(name, 4993, 65536, rank=697)[1]


def test_a_structure_is_fingerprinted_once(monkeypatch):
    """NIM and its first level's K-norm mechanism name the same F: its rows are streamed once."""
    import knorm.body.marginal_ops as ops

    w = I.marginals((2, 3, 2), [(0, 1), (1, 2), (0, 2)])
    expected = fingerprint(np.ascontiguousarray(w.matrix()))
    streamed = []
    rows = ops._row_chunks

    def counted(match):
        streamed.append(match.shape)
        return rows(match)
    monkeypatch.setattr(ops, "_FINGERPRINTS", type(ops._FINGERPRINTS)())
    monkeypatch.setattr(ops, "_row_chunks", counted)
    fresh()
    m = NIMechanism(w, epsilon=1.0, max_levels=1)
    assert streamed == [(16, 12)]
    assert m.levels[0].mechanism.workload_fingerprint() == m.workload_fingerprint() == expected
    other = MarginalMatch(as_marginal(w).structure, 2.0, as_marginal(w).rows)  # another scale: another F
    assert ops.fingerprint_of(other) != m.workload_fingerprint() and len(streamed) == 2


@pytest.mark.parametrize("F", [knorm.workloads.all_range(8), knorm.workloads.random_pm1(6, 2, rng=1) @ np.diag([1.0, 1e-8]),
                               np.diag([1.0, 1e-8]) @ knorm.workloads.random_pm1(2, 6, rng=1),
                               np.diag([1.0, 1e-8])], ids=["tall", "thin tall", "thin wide", "thin square"])
def test_every_direction_of_f_gets_its_noise(F, monkeypatch):
    """Tall F (from FᵀF when far from singular, else its reduced QR), wide and square (F itself): the
    noise covariance is (FFᵀ)^½·scale², down to F's thinnest direction (the n × n eigendecomposition
    dropped G's eigenvalues below 16·n·eps·λ_max: there Fx was released with no noise)."""
    from knorm.mechanisms import residual

    qr, used = np.linalg.qr, []
    monkeypatch.setattr(residual.np.linalg, "qr", lambda *a, **k: used.append(1) or qr(*a, **k))
    s = SVDGaussianMechanism(F, epsilon=1.0, delta=1e-6, rng=0)
    tall = F.shape[0] > F.shape[1]
    assert bool(used) == (tall and np.linalg.cond(F) > 1e6)  # the QR only where FᵀF is near singular
    B = s._WP @ s._Qt
    U, S, _ = np.linalg.svd(np.ldexp(F, -s._e), full_matrices=False)
    want = (U * S) @ U.T
    np.testing.assert_allclose(B @ B.T, want, rtol=1e-9, atol=1e-13 * S[0])
    np.testing.assert_allclose(np.diag(U.T @ (B @ B.T) @ U) / S, 1.0, rtol=1e-6)  # the thinnest too
