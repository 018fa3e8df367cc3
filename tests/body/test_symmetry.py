"""Value-permutation symmetries of marginal workloads, found from F's entries (knorm.body.symmetry)."""

import itertools

import numpy as np
import pytest

from knorm import SymmetricHull
from knorm.body.marginal import recognise
from knorm.body.symmetry import value_symmetry
from knorm.walks import round_body
from knorm.workloads import clique_marginals, marginals, random_pm1

SHAPE = (2, 3, 2)
CLIQUES = [(0, 1), (1, 2), (0,), (2,), ()]  # 2-way, 1-way tables and the total


def shuffled(F, seed=0):
    return F[np.random.default_rng(seed).permutation(F.shape[0])]


def group_elements(shape, swaps=((),)):
    """Every element (σ, π): σ a permutation of the attributes from ``swaps`` (as a dict
    a -> σ(a); () is the identity), then π_a a permutation of attribute a's values."""
    for sw in swaps:
        sigma = dict(sw)
        for perm in itertools.product(*[list(itertools.permutations(range(k))) for k in shape]):
            yield sigma, perm


def row_and_cell_permutations(match, element):
    """P (rows of F) and Q (cells) of one group element (σ, π), read off F's recognised
    structure: cell x goes to y with y[σ(a)] = π_a(x[a]); row i (table C, cell v) to the
    row of (σ(C), the same map on v)."""
    sigma, perm = element
    st = match.structure
    shape = st.shape
    s = [sigma.get(a, a) for a in range(len(shape))]
    offs = {c: o for c, o in zip(st.cliques, np.cumsum([0] + [int(np.prod([shape[a] for a in c])) for c in st.cliques]))}
    m_rows = []
    for c in st.cliques:
        image = tuple(sorted(s[a] for a in c))
        for v in itertools.product(*[range(shape[a]) for a in c]):
            w = {s[a]: perm[a][v[j]] for j, a in enumerate(c)}
            m_rows.append(offs[image] + (np.ravel_multi_index(tuple(w[b] for b in image), [shape[b] for b in image])
                                         if c else 0))
    m_rows = np.array(m_rows)
    where = {int(m): i for i, m in enumerate(match.rows)}  # F row of each structure row (tables are complete)
    P = np.zeros((len(match.rows), len(match.rows)))
    for i, m in enumerate(match.rows):
        P[where[int(m_rows[m])], i] = 1.0
    cells = np.indices(shape).reshape(len(shape), -1).T
    Q = np.zeros((len(cells), len(cells)))
    for j, x in enumerate(cells):
        y = [0] * len(shape)
        for a in range(len(shape)):
            y[s[a]] = perm[a][x[a]]
        Q[np.ravel_multi_index(tuple(y), shape), j] = 1.0
    return P, Q


SWAPS = ((), ((0, 2), (2, 0)))  # attributes 0 and 2 (both of size 2) are interchangeable in CLIQUES


def test_every_element_maps_F_onto_itself():
    """P·F = F·Q exactly for all 48 elements (24 value permutations, with and without the
    swap of attributes 0 and 2), with F's rows shuffled: P K = K."""
    F = shuffled(clique_marginals(SHAPE, CLIQUES))
    match = recognise(F)
    assert match is not None and match.structure.shape == SHAPE
    count = 0
    for element in group_elements(SHAPE, SWAPS):
        P, Q = row_and_cell_permutations(match, element)
        assert np.array_equal(P @ F, F @ Q)
        count += 1
    assert count == 48


def test_average_is_the_group_average_brute_force():
    """R(S) = (1/|G|) Σ_g P_g S P_gᵀ over all 48 elements, to rounding, for a random S."""
    F = shuffled(clique_marginals(SHAPE, CLIQUES), seed=1)
    K = SymmetricHull(F)
    sym = K.symmetry
    assert sym is not None
    d = F.shape[0]
    A = np.random.default_rng(2).standard_normal((d, d))
    S = A + A.T
    brute = np.zeros((d, d))
    elements = list(group_elements(SHAPE, SWAPS))
    for element in elements:
        P, _ = row_and_cell_permutations(recognise(F), element)
        brute += P @ S @ P.T
    brute /= len(elements)
    assert np.allclose(sym.average(S), brute, rtol=0, atol=1e-12)
    # a projection: idempotent, and its result commutes with every P_g
    R = sym.average(S)
    assert np.allclose(sym.average(R), R, atol=1e-12)
    for element in (elements[7], elements[30]):
        P, _ = row_and_cell_permutations(recognise(F), element)
        assert np.allclose(P @ R, R @ P, atol=1e-12)


def test_attributes_are_swapped_only_when_the_tables_allow_it():
    """Without the table (2,) the swap of 0 and 2 maps (0,) to a missing table: the
    average over value permutations alone (brute force, 24 elements) is the one used."""
    cliques = [(0, 1), (1, 2), (0,), ()]
    F = shuffled(clique_marginals(SHAPE, cliques), seed=5)
    sym = SymmetricHull(F).symmetry
    d = F.shape[0]
    A = np.random.default_rng(6).standard_normal((d, d))
    S = A + A.T
    brute = sum(P @ S @ P.T for P, _ in (row_and_cell_permutations(recognise(F), e) for e in group_elements(SHAPE)))
    assert np.allclose(sym.average(S), brute / 24, rtol=0, atol=1e-12)


def test_span_average_matches_the_ambient_one():
    F = shuffled(marginals((2, 3, 4), 2), seed=3)
    K = SymmetricHull(F)
    U = K.span_basis
    A = np.random.default_rng(4).standard_normal((K.dim, K.dim))
    C = A @ A.T
    assert np.allclose(U @ K.symmetry.average_span(C) @ U.T, K.symmetry.average(U @ C @ U.T), atol=1e-10)


def test_no_symmetry_where_a_permutation_would_not_map_the_rows_onto_themselves():
    assert SymmetricHull(random_pm1(6, 20, rng=0)).symmetry is None
    F = marginals((2, 3, 2), 2)
    assert SymmetricHull(F[:-1]).symmetry is None  # the last table lacks a cell
    assert SymmetricHull(np.vstack([F, F[:1]])).symmetry is None  # one cell counted twice
    assert SymmetricHull(np.vstack([F, F])).symmetry is not None  # every cell twice: still symmetric
    assert value_symmetry(None, np.eye(2)) is None


def test_symmetric_rounding_of_a_cross_polytope_is_exact_within_noise():
    """F = I_k: K is the cross-polytope, Cov(Uniform K) = 2/((k+1)(k+2))·I exactly (its
    coordinates are exchangeable, E x_i² = E‖x‖²/k and ‖x‖₁ ~ Beta(k, 1) on the ℓ1 sphere
    gives E x_i² = 2/((k+1)(k+2))). The averaged estimate from one iteration of 480 records
    must match: every eigenvalue of C^{-1/2} Ĉ C^{-1/2} within 25% of 1. The group (the 12
    values of one attribute) leaves two free parameters, the identity part and the
    all-ones direction; the worse of them, one direction's variance from 480 points at
    τ ≤ 1.5, has relative SE ≤ √(2·1.5/480) = 0.08, so 25% is ≥ 3 SE. Without the average
    the estimate has Marchenko–Pastur edges (1 ∓ √(12/480))² = 0.71, 1.34 and fails.
    """
    k = 12
    K = SymmetricHull(np.eye(k) * 3.0)
    assert K.symmetry is not None
    rnd = round_body(K.frame, chains=8, samples_per_dim=40, symmetry=K.symmetry)
    M = K.span_basis.T * 3.0 / K._scale  # ambient cross-polytope of radius 3 -> frame units
    exact = 2.0 / ((k + 1) * (k + 2)) * M @ M.T
    Lc = np.linalg.cholesky(exact)
    ev = np.linalg.eigvalsh(np.linalg.solve(Lc, np.linalg.solve(Lc, rnd.covariance).T))
    assert 0.75 < ev[0] and ev[-1] < 1.25, ev


@pytest.mark.parametrize("seed", [0, 1])
def test_rounding_uses_the_symmetry_whatever_the_row_order(seed):
    """Rows in any order: the same group is found (same number of classes)."""
    F = marginals((2, 3, 4), 2)
    a, b = SymmetricHull(F).symmetry, SymmetricHull(shuffled(F, seed)).symmetry
    assert a is not None and b is not None and a.n_classes == b.n_classes


def test_symmetric_rounding_with_one_chain_has_no_halves_and_runs_max_iter(recwarn):
    K = SymmetricHull(marginals((2, 3, 2), 2))
    rnd = round_body(K.frame, chains=1, max_iter=2, symmetry=K.symmetry)
    assert rnd.iterations == 2 and np.all(np.isfinite(rnd.T)) and np.all(np.linalg.eigvalsh(rnd.covariance) > 0)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_workload_of_thousands_of_rows_keeps_its_group():
    """3-way marginals of 13 binary attributes (2,288 rows, rows shuffled: above the old 2,048-row cap):
    every attribute is interchangeable and every value flippable, so the orbit of a pair of rows is
    fixed by k = |C_i ∩ C_j| ∈ {0, 1, 2, 3} and by how many of those k attributes have equal values
    (0 … k): 1 + 2 + 3 + 4 = 10 classes; and Σ₀ = F Fᵀ/n commutes with the group (R(Σ₀) = Σ₀)."""
    F = marginals((2,) * 13, 3)
    F = F[np.random.default_rng(2).permutation(F.shape[0])]
    K = SymmetricHull(F)
    sym = K.symmetry
    assert F.shape[0] == 2288 and sym is not None and sym.n_classes == 10
    Fr = K.frame.Ft.T
    S0 = Fr @ Fr.T / K.frame.n
    assert np.linalg.norm(sym.average_span(S0) - S0) <= 1e-9 * np.linalg.norm(S0)
