"""The oracle's character coordinates (knorm.body.characters): a rotation of a marginal workload's
spectrum, with the products of both structured operators exact in them."""

import numpy as np
import pytest
from numba import njit

from knorm import sample_uniform, workloads
from knorm.body import hull
from knorm.body._spectral import rotate_t as _rotate_t
from knorm.body.characters import butterfly, character_coordinates, rotate
from knorm.body.hull import SymmetricHull
from knorm.body.marginal import recognise
from knorm.body.reference import ReferenceOracle
from knorm.body.spectral import span_of, span_rows
from test_marginal import force, marginal_dots, spectral_dots, variants  # tests/body is on the path (pytest prepend)


@njit
def rotate_t(rot, v, out):
    _rotate_t(rot, v, out)


@pytest.mark.parametrize("r", [1, 2, 3, 7, 8, 95, 130])
def test_the_rotation_is_orthogonal_and_the_kernel_applies_its_transpose(r):
    rot = butterfly(r)
    R = rotate(rot, np.eye(r))
    np.testing.assert_allclose(R @ R.T, np.eye(r), atol=1e-14)
    v = np.random.default_rng(r).standard_normal(r)
    out = np.empty(r)
    rotate_t(rot, v, out)
    np.testing.assert_allclose(out, R.T @ v, rtol=0, atol=1e-14 * np.abs(v).sum())
    if r > 2:  # every coordinate mixed: no entry of R is 0 or ±1 where two levels reach
        assert np.count_nonzero(np.isin(np.abs(R), [0.0, 1.0]).all(axis=1)) == 0


SHAPES = [((2, 3, 3, 4), 2), ((4, 4, 4, 4), 2), ((2,) * 6, 3), ((3, 2, 4), 3), ((2, 2, 3), 1)]


def _coordinates(F):
    m = recognise(F)
    e = hull._exponent(F)
    U, S = span_of(m, e)
    r = int(np.sum(S > S[0] * max(F.shape) * np.finfo(float).eps))
    return m, e, U[:, :r]


@pytest.mark.parametrize("shape,k", SHAPES)
def test_the_coordinates_map_the_span_onto_the_columns(shape, k):
    """``Fz = Mc·UᵀF·2^-e`` (the same columns by the map and by the structure), rows of
    ``R⁻¹Fz`` orthogonal with norms within √2 of √n (the basis is well conditioned)."""
    F = workloads.marginals(shape, k)
    m, e, U = _coordinates(F)
    Mc, Fz, _, _ = character_coordinates(m, e, U)
    n = F.shape[1]
    np.testing.assert_allclose(Mc @ span_rows(m, U, e), Fz, atol=1e-12 * np.sqrt(n))
    G = rotate(butterfly(Fz.shape[0]), np.eye(Fz.shape[0])).T @ Fz  # diag(g)·Φ
    gram = G @ G.T / n
    np.testing.assert_allclose(gram, np.diag(np.diag(gram)), atol=1e-12)
    assert np.all((np.diag(gram) >= 0.5 - 1e-12) & (np.diag(gram) <= 2.0 + 1e-12))


@pytest.mark.parametrize("shape,k", SHAPES)
def test_both_products_are_the_columns_dot_v(shape, k):
    """Each structured operator's ``α_j = f_jᵀv`` in these coordinates is the dense columns' product."""
    from knorm.body.marginal import marginal_operator
    from knorm.body.spectral import spectral_operator

    F = workloads.marginals(shape, k)
    m, e, U = _coordinates(F)
    _, Fz, lift, into = character_coordinates(m, e, U)
    rng = np.random.default_rng(5)
    for _ in range(3):
        v = rng.standard_normal(Fz.shape[0])
        want = Fz.T @ v
        tol = 1e-13 * np.abs(Fz).sum(axis=0).max() * np.abs(v).max()
        for build, dots in ((lambda: marginal_operator(m.structure, None, into=into), marginal_dots),
                            (lambda: spectral_operator(m.structure, None, lift=lift), spectral_dots)):
            out = np.full(F.shape[1], np.nan)
            dots(build(), v, out)
            np.testing.assert_allclose(out, want, rtol=0, atol=tol)


def test_a_table_without_characters_of_its_own_is_written_zero():
    """A clique inside another owns no character: its table's part of t is 0, not stale scratch."""
    from knorm.body.marginal import MarginalMatch, MarginalStructure, marginal_operator

    st = MarginalStructure((3, 4, 2), ((0, 1), (0,), (1, 2)))
    F = st.matrix()
    m = MarginalMatch(st, 1.0, np.arange(F.shape[0]))
    _, e, U = _coordinates(F)
    _, Fz, _, into = character_coordinates(m, e, U)
    M = marginal_operator(st, None, into=into)
    v = np.random.default_rng(0).standard_normal(Fz.shape[0])
    out = np.empty(F.shape[1])
    for _ in range(2):  # the second call finds the first's values in fresh scratch memory or not
        marginal_dots(M, v, out)
        np.testing.assert_allclose(out, Fz.T @ v, atol=1e-12)


def test_a_partial_workload_keeps_the_span_coordinates():
    """Rank below r_Φ (a table's rows dropped): no character coordinates; the body still works."""
    F = workloads.marginals((3, 4, 5), 1)  # 1-way tables of 3, 4, 5 rows: r_Φ = 1 + 2 + 3 + 4 = 10
    F = np.delete(F, [7, 8], axis=0)  # two rows of the last table: only their sum is implied
    assert np.linalg.matrix_rank(F) == 9
    m, e, U = _coordinates(F)
    assert character_coordinates(m, e, U) is None
    K = SymmetricHull(F)
    assert K._zscale.ndim == 1
    Y = (F @ np.random.default_rng(1).standard_normal((F.shape[1], 10))).T
    np.testing.assert_allclose(K.gauge(Y), ReferenceOracle(F).gauge(Y), rtol=1e-9)


@pytest.mark.parametrize("kind", ["tables", "transform"])
def test_bodies_in_character_coordinates_give_highs_gauges_and_normals(kind, monkeypatch):
    """The body's maps in and out of these coordinates: gauges against HiGHS, facet normals λ with
    ``λ·y = ‖y‖_K`` and ``|Fᵀλ| ≤ 1`` (the dual map Mcᵀ)."""
    F = workloads.marginals((2, 3, 3, 4), 2)
    force(monkeypatch, kind)
    K = SymmetricHull(F)
    assert K.frame.cols.structured == kind and K._zscale.ndim == 2
    Y = (F @ np.random.default_rng(2).standard_normal((F.shape[1], 12))).T
    g = K.gauge(Y)
    np.testing.assert_allclose(g, ReferenceOracle(F).gauge(Y), rtol=1e-9)
    lam = K.facet_normal(Y)
    np.testing.assert_allclose(np.einsum("ij,ij->i", lam, Y), g, rtol=1e-9)
    assert np.abs(lam @ F).max() <= 1 + 1e-9


@pytest.mark.parametrize("kind", ["tables", "transform"])
def test_seeded_walks_in_character_coordinates_repeat_bit_for_bit(kind, monkeypatch):
    force(monkeypatch, kind)
    F = workloads.marginals((2, 3, 3, 4), 2)
    assert SymmetricHull(F)._zscale.ndim == 2
    a, b = (sample_uniform(F, 30, rng=4) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    assert np.all(SymmetricHull(F).gauge(a) <= 1 + 1e-9)


def test_the_longest_column_from_the_structure_is_the_dense_one(tmp_path):
    """``column_norm_max`` (the body's unit in these coordinates) against ``max‖f_j‖·2^-e`` from F's
    entries, for every way a user hands a marginal workload over (shuffled, scaled, partial,
    duplicated and zero rows, relabelled)."""
    from knorm.body.characters import column_norm_max

    for name, F, _ in variants(tmp_path):
        m = recognise(F)
        e = hull._exponent(F)
        want = np.max(np.linalg.norm(np.ldexp(F, -e), axis=0))
        assert column_norm_max(m, e) == pytest.approx(want, rel=1e-15), name


@pytest.mark.parametrize("r", [5, 9, 13, 697])
def test_every_coordinate_is_turned_when_two_levels_leave_the_last_one(r):
    """r ≡ 1 (mod 4): the levels pair every index but r − 1; the closing turn E mixes it too
    (an unturned coordinate keeps Φ's exact ±2^k entries, the ties R is there to break)."""
    rot = butterfly(r)
    R = rotate(rot, np.eye(r))
    np.testing.assert_allclose(R @ R.T, np.eye(r), atol=1e-14)
    assert not np.any(np.isin(np.abs(R), [0.0, 1.0]).all(axis=1))
    v = np.random.default_rng(r).standard_normal(r)
    out = np.empty(r)
    rotate_t(rot, v, out)
    np.testing.assert_allclose(out, R.T @ v, rtol=0, atol=1e-14 * np.abs(v).sum())


def test_a_structure_with_a_clique_out_of_order_is_refused():
    from knorm.body.marginal import MarginalStructure

    with pytest.raises(ValueError, match=r"clique \(1, 0\) must list distinct attributes"):
        MarginalStructure((2, 3), ((1, 0), (0,)))
    with pytest.raises(ValueError, match=r"clique \(2,\)"):
        MarginalStructure((2, 3), ((2,),))
