"""Workload matrices: shapes, contents, known bodies."""

import numpy as np
import pytest

from knorm import SymmetricHull
from knorm import workloads as W


def test_identity_and_prefix():
    np.testing.assert_array_equal(W.identity(3), np.eye(3))
    P = W.prefix(4)
    x = np.array([1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(P @ x, np.cumsum(x))


def test_ranges():
    x = np.arange(1.0, 6.0)
    R2 = W.width_range(5, 2)
    np.testing.assert_array_equal(R2 @ x, x[:-1] + x[1:])
    A = W.all_range(5)
    assert A.shape == (15, 5)
    want = sorted(x[i : j + 1].sum() for i in range(5) for j in range(i, 5))
    assert sorted(A @ x) == want
    with pytest.raises(ValueError, match="exceeds"):
        W.width_range(3, 4)


def test_marginals_of_a_product_domain():
    M = W.marginals((2, 3), 1)
    assert M.shape == (5, 6)
    x = np.arange(6.0)  # cells (a, b) in C order: index 3a + b
    table = x.reshape(2, 3)
    np.testing.assert_array_equal(M @ x, np.concatenate([table.sum(1), table.sum(0)]))
    M2 = W.marginals((2, 2, 2), 2)
    assert M2.shape == (12, 8)
    assert np.all(M2.sum(axis=1) == 2)


def test_random_workloads_are_seeded():
    a = W.random_pm1(4, 7, rng=1)
    np.testing.assert_array_equal(a, W.random_pm1(4, 7, rng=1))
    assert set(np.unique(a)) <= {-1.0, 1.0}
    b = W.random_bernoulli(4, 7, p=0.3, rng=2)
    assert set(np.unique(b)) <= {0.0, 1.0}


def test_every_workload_is_a_valid_body():
    for F in [W.identity(4), W.prefix(4), W.all_range(4), W.width_range(6, 3), W.marginals((2, 3), 2),
              W.random_pm1(5, 12, rng=0), W.random_bernoulli(5, 12, rng=0)]:
        K = SymmetricHull(F)
        assert K.ambient_dim == F.shape[0]


@pytest.mark.parametrize("call", [lambda: W.identity(0), lambda: W.prefix(-1), lambda: W.random_pm1(2.5, 3),
                                  lambda: W.marginals((2, 2), 3), lambda: W.random_bernoulli(2, 2, p=0),
                                  lambda: W.by_name("nope", d=2)])
def test_bad_arguments(call):
    with pytest.raises(ValueError):
        call()
