"""knorm.integer.integer_tables: non-negative integer counts whose tables are consistent and closest in ℓ₁."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from knorm import workloads as W
from knorm.integer import EXACT_MAX_CELLS, IntegerTables, integer_tables


def _l1(F, x, a):
    return float(np.abs(F @ x - a).sum())


@pytest.mark.parametrize("method", ["exact", "two-stage"])
def test_identity_rounds_the_clipped_answers(method):
    """F = I: the ℓ₁ problem separates by cell, its optimum is round(max(a, 0)) (no ties in these answers)."""
    rng = np.random.default_rng(1)
    a = rng.normal(3.0, 4.0, size=12)
    r = integer_tables(np.eye(12), a, method=method, mip_gap=0.0)
    want = np.rint(np.maximum(a, 0.0))
    assert isinstance(r, IntegerTables)
    assert r.counts.dtype == np.int64
    np.testing.assert_array_equal(r.counts, want)
    assert r.distance == pytest.approx(_l1(np.eye(12), want, a), rel=1e-12)
    assert r.optimal == (method == "exact")  # two-stage's bound is the LP relaxation's: optimality unproved


def test_two_by_two_with_margins_against_exhaustive_search():
    """A 2×3 table published by its row and column margins: the exact MILP's distance is the least over a
    box of integer tables (searched exhaustively), and its margins agree."""
    F = W.marginals((2, 3), 1)  # 2 row sums, 3 column sums
    rng = np.random.default_rng(7)
    box = np.array(list(itertools.product(range(7), repeat=6)), dtype=np.float64)  # 7^6 tables
    for _ in range(5):
        a = F @ rng.integers(0, 3, size=6) + rng.normal(0, 1.5, size=5)
        r = integer_tables(F, a, method="exact", mip_gap=0.0)
        best = np.abs(box @ F.T - a).sum(axis=1).min()
        assert r.distance <= best + 1e-9
        assert r.distance == pytest.approx(_l1(F, r.counts, a), abs=1e-9)
        rows, cols = r.tables[:2], r.tables[2:]
        assert rows.sum() == cols.sum() == r.counts.sum()  # the margins agree, exactly
        assert r.optimal and r.gap <= 1e-6


def test_two_stage_within_its_bound_and_never_worse_than_controlled_rounding_bound():
    """Two-stage on 2-way marginals: integer, non-negative, consistent; the LP bound below the distance;
    every cell within one unit of the LP optimum, so the distance is at most bound + Σ column norms."""
    shape = (2, 3, 4, 5)
    F = W.marginals(shape, 2)
    rng = np.random.default_rng(3)
    x = rng.poisson(4.0, size=F.shape[1])
    a = F @ x + rng.laplace(scale=3.0, size=F.shape[0])
    r = integer_tables(F, a, method="two-stage")
    assert r.method in ("two-stage", "two-stage, controlled rounding")
    assert np.all(r.counts >= 0)
    np.testing.assert_array_equal(r.tables, F @ r.counts)
    assert r.bound <= r.distance + 1e-9
    assert r.distance <= r.bound + np.abs(F).sum()
    assert r.distance < _l1(F, np.zeros(F.shape[1]), a)
    exact = integer_tables(F, a, method="exact", mip_gap=0.0, time_limit=30)
    assert exact.distance <= r.distance + 1e-9  # the exact path is at least as close
    assert exact.bound >= r.bound - 1e-6  # and its bound at least the LP's


def test_consistency_every_table_from_one_integer_vector():
    """The tables of a 2-way marginal workload sum to the same total and their 1-way margins agree."""
    shape = (2, 3, 4)
    F = W.marginals(shape, 2)
    rng = np.random.default_rng(5)
    a = F @ rng.poisson(3.0, size=24) + rng.laplace(scale=2.0, size=F.shape[0])
    r = integer_tables(F, a)
    tables = np.split(r.tables, np.cumsum([6, 8]))  # pairs (0,1), (0,2), (1,2)
    t01, t02, t12 = (t.reshape(p) for t, p in zip(tables, [(2, 3), (2, 4), (3, 4)]))
    np.testing.assert_array_equal(t01.sum(axis=1), t02.sum(axis=1))  # attribute 0's margin
    np.testing.assert_array_equal(t01.sum(axis=0), t12.sum(axis=1))  # attribute 1's
    np.testing.assert_array_equal(t02.sum(axis=0), t12.sum(axis=0))  # attribute 2's
    assert np.all(r.tables == np.rint(r.tables))


def test_batch_rows_are_independent_and_huge_counts_exact():
    """A batch gives each row the result it gets alone, a row holding a count of 10^13 included."""
    F = W.marginals((2, 3, 2), 2)
    rng = np.random.default_rng(11)
    X = rng.poisson(5.0, size=(4, F.shape[1])).astype(np.float64)
    X[1, 3] = 1e13
    A = X @ F.T + rng.laplace(scale=0.5, size=(4, F.shape[0]))
    batch = integer_tables(F, A, mip_gap=0.0)
    assert batch.counts.shape == X.shape and batch.distance.shape == (4,)
    for i in range(4):
        one = integer_tables(F, A[i], mip_gap=0.0)
        np.testing.assert_array_equal(batch.counts[i], one.counts)
        assert batch.distance[i] == one.distance
        assert batch.method[i] == one.method
    np.testing.assert_array_equal(batch.tables, batch.counts @ F.T)
    assert batch.counts[1, 3] > 10**12


def test_sparse_and_dense_F_agree_and_auto_switches_path():
    F = W.marginals((2, 2, 3), 2)
    a = F @ np.arange(12.0) + 0.3
    dense, sp = integer_tables(F, a, mip_gap=0.0), integer_tables(sparse.csr_matrix(F), a, mip_gap=0.0)
    np.testing.assert_array_equal(dense.tables, sp.tables)
    assert dense.method == "exact"
    big = sparse.csr_array(np.ones((1, EXACT_MAX_CELLS + 1)))
    r = integer_tables(big, np.array([10.4]))
    assert r.method.startswith("two-stage") and r.counts.sum() == 10 and r.distance == pytest.approx(0.4)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([(2, 2), (2, 3), (3, 3), (2, 2, 2)]),
       st.sampled_from(["exact", "two-stage"]), st.sampled_from([0.0, 0.01, 0.2]),
       st.floats(0.1, 1e6))
def test_property_integer_nonnegative_consistent_and_bounded(seed, shape, method, gap, scale):
    """Any answers (negative ones too): integer, non-negative counts; tables F·counts exactly; bound <= distance;
    the exact path's distance within its gap of the best possible, so never past the all-zero table's / (1 − gap)."""
    F = W.marginals(shape, len(shape) - 1)
    rng = np.random.default_rng(seed)
    a = F @ rng.poisson(scale, size=F.shape[1]) + rng.laplace(scale=scale ** 0.5, size=F.shape[0]) - scale / 4
    r = integer_tables(F, a, method=method, mip_gap=gap)
    assert r.counts.dtype == np.int64 and np.all(r.counts >= 0)
    np.testing.assert_array_equal(r.tables, F @ r.counts)
    assert r.distance == pytest.approx(_l1(F, r.counts, a), rel=1e-9, abs=1e-6)
    assert r.bound <= r.distance + 1e-6 * max(1.0, r.distance)
    if method == "exact":
        assert r.distance <= _l1(F, np.zeros(F.shape[1]), a) / (1 - gap) * (1 + 1e-9) + 1e-6
    else:
        assert r.distance <= r.bound + np.abs(F).sum() + 1e-6


SECRET = 123456.789


@pytest.mark.parametrize("kwargs, name", [
    ({"F": np.ones(4)}, "F"),
    ({"F": np.full((2, 2), np.nan)}, "F"),
    ({"F": np.zeros((0, 3))}, "F"),
    ({"F": "F.npy"}, "F"),
    ({"answers": np.ones(3)}, "answers"),
    ({"answers": np.ones((2, 2, 2))}, "answers"),
    ({"answers": np.array([SECRET, np.nan])}, "answers"),
    ({"answers": np.array([SECRET, 2.0**51])}, "answers"),
    ({"answers": ["a", "b"]}, "answers"),
    ({"method": "greedy"}, "method"),
    ({"time_limit": 0}, "time_limit"),
    ({"time_limit": -1.0}, "time_limit"),
    ({"time_limit": float("nan")}, "time_limit"),
    ({"time_limit": True}, "time_limit"),
    ({"time_limit": "10"}, "time_limit"),
    ({"mip_gap": 1.0}, "mip_gap"),
    ({"mip_gap": -0.1}, "mip_gap"),
    ({"mip_gap": None}, "mip_gap"),
])
def test_bad_inputs_refused_by_name_without_values(kwargs, name):
    args = {"F": np.eye(2), "answers": np.array([SECRET, 1.0]), **kwargs}
    F, a = args.pop("F"), args.pop("answers")
    with pytest.raises(ValueError) as info:
        integer_tables(F, a, **args)
    msg = str(info.value)
    assert name in msg and "\n" not in msg
    assert "123456" not in msg


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        integer_tables(np.eye(2), np.ones(2), "exact")  # type: ignore[misc]
