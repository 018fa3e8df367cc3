"""The product transform of a marginal workload (knorm.body.spectral, knorm.body._spectral).

Exact values: the attribute bases' orthogonality (integers), the spectrum's size against the
rank of the workload's matrix, the product ``Fᵀ(W v)`` against the dense product, the chosen
operator against the cost model's terms, and the law of a walk on the transform's oracle
(``‖z‖_K^r ~ U(0,1)``, gauges by an independent LP).
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from knorm import ReferenceOracle, SymmetricHull, sample_uniform, workloads
from knorm.body import hull
from knorm.body.marginal import MarginalStructure, plan_ops
from knorm.body.spectral import attribute_basis, spectral_cost, spectral_operator, spectrum

from test_marginal import STRUCTURES, force, spectral_dots  # tests/body is on the path (pytest prepend)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 7])
def test_attribute_basis_is_orthogonal_with_a_constant_first_column(m):
    H = attribute_basis(m)
    np.testing.assert_array_equal(H[:, 0], np.ones(m))
    G = H.T @ H
    np.testing.assert_array_equal(G, np.diag(np.diag(G)))  # small integers: exact
    assert np.all(np.diag(G) > 0)
    if m == 2:
        np.testing.assert_array_equal(H, [[1, 1], [1, -1]])


@pytest.mark.parametrize("st", STRUCTURES, ids=str)
def test_spectrum_spans_the_row_space(st):
    """r_Φ = Σ over the sets S inside some clique of Π_{a∈S}(m_a − 1) = rank of the matrix."""
    sets = {S for c in st.cliques for j in range(len(c) + 1) for S in itertools.combinations(c, j)}
    want = sum(math.prod(st.shape[a] - 1 for a in S) for S in sets)
    assert len(spectrum(st)) == want == np.linalg.matrix_rank(st.matrix())


@pytest.mark.parametrize("st", STRUCTURES, ids=str)
def test_transform_is_the_dense_product(st):
    rng = np.random.default_rng(3)
    M = st.matrix()
    W = rng.standard_normal((M.shape[0], 6))
    S = spectral_operator(st, W)
    for _ in range(3):
        v = rng.standard_normal(6)
        out = np.full(M.shape[1], np.nan)
        spectral_dots(S, v, out)
        want = M.T @ (W @ v)
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12 * np.abs(W).sum(axis=0).max() * 6)


def test_the_cheaper_operator_is_chosen():
    """3-way marginals of binary attributes: the transform (its passes touch few cells);
    2-way marginals of a census-like domain: the tables (mode products of up to 8 values)."""
    binary = MarginalStructure((2,) * 9, tuple(itertools.combinations(range(9), 3)))
    r = len(spectrum(binary))
    assert spectral_cost(binary, r) < plan_ops(binary, r)
    assert SymmetricHull(binary.matrix()).frame.cols.structured == "transform"
    census = MarginalStructure((2, 2, 3, 4, 5, 5, 6, 8), tuple(itertools.combinations(range(8), 2)))
    r = len(spectrum(census))
    assert plan_ops(census, r) < spectral_cost(census, r)


@pytest.mark.parametrize("shape,k", [((2, 2, 2, 2, 2), 2), ((2, 3, 2), 2)])
def test_a_walk_on_the_transform_has_the_uniform_law(shape, k, monkeypatch):
    """Draws from the transform's oracle: ‖z‖_K^r ~ U(0,1), and the same law as the dense layout's
    draws (two-sample KS on the gauge and on a coordinate). P(√n·D > 1.95) ≈ 0.001, n = the smaller
    ESS. The gauges are the dense layout's exact oracle's, checked against HiGHS (an independent LP)
    on every tenth draw of each path (HiGHS on all 6,000 took 19 s)."""
    F = workloads.marginals(shape, k)
    force(monkeypatch, "transform")
    K = SymmetricHull(F)
    assert K.frame.cols.structured == "transform"
    x, info = sample_uniform(K, 3000, rng=5, return_info=True)
    assert info.converged, info.summary()
    monkeypatch.setattr(hull, "STRUCTURED_ABOVE", np.inf)
    Kd = SymmetricHull(F)
    assert not Kd.frame.cols.structured
    xd, infod = sample_uniform(Kd, 3000, rng=6, return_info=True)
    ess = min(info.min_ess, infod.min_ess) * 3000 / info.draws
    ref = ReferenceOracle(F)
    r = np.linalg.matrix_rank(F)
    gx, gxd = Kd.gauge(x), Kd.gauge(xd)
    np.testing.assert_allclose(gx[::10], ref.gauge(x[::10]), rtol=1e-9)
    np.testing.assert_allclose(gxd[::10], ref.gauge(xd[::10]), rtol=1e-9)
    u = gx ** r
    assert np.sqrt(ess) * stats.kstest(u, "uniform").statistic < 1.95
    ud = gxd ** r
    # two samples of sizes n, m: √(nm/(n+m))·D > 1.95 with probability ≈ 0.001
    assert np.sqrt(ess / 2) * stats.ks_2samp(u, ud).statistic < 1.95
    assert np.sqrt(ess / 2) * stats.ks_2samp(x[:, 0], xd[:, 0]).statistic < 1.95
