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


TOO_BIG = [
    (lambda: W.all_range(10**7), r"^n=10000000: all_range\(n\) would be 50000005000000 x 10000000"),
    (lambda: W.identity(10**6), "^n=1000000: identity"),
    (lambda: W.prefix(2**40), "^n=1099511627776: prefix"),
    (lambda: W.width_range(10**6, 3), "^n=1000000: width_range"),
    (lambda: W.marginals((10**4, 10**4), 1), r"^shape=\(10000, 10000\): marginals"),
    (lambda: W.marginals((10,) * 30, 3), "^shape=.*at least"),
    (lambda: W.random_pm1(10**5, 10**5), "^n=100000: random_pm1"),
    (lambda: W.random_bernoulli(10**9, 10**9), "^n=1000000000: random_bernoulli"),
    (lambda: W.by_name("all_range", n=10**5), "^n=100000: all_range"),
]


@pytest.mark.parametrize("call,match", TOO_BIG)
def test_sizes_that_cannot_fit_fail_fast(call, match):
    """Checked before allocating: all_range(n=10**7) used to try 4e21 bytes."""
    with pytest.raises(ValueError, match=match):
        call()


BAD = [
    (lambda: W.identity(True), "^n must"), (lambda: W.identity(np.float64(3)), "^n must"),
    (lambda: W.identity(None), "^n must"), (lambda: W.width_range(5, 0), "^k must"),
    (lambda: W.width_range("5", 2), "^n must"), (lambda: W.all_range(-2), "^n must"),
    (lambda: W.marginals((2, 2.5), 1), r"^shape\[1\] must"), (lambda: W.marginals((2, 0), 1), r"^shape\[1\] must"),
    (lambda: W.marginals((), 1), "^shape must"), (lambda: W.marginals([[2, 2]], 1), "^shape must"),
    (lambda: W.marginals("ab", 1), r"^shape\[0\] must"), (lambda: W.marginals((2, 2), 0), "^k must"),
    (lambda: W.random_pm1(3, 0), "^n must"), (lambda: W.random_pm1(3, 4, rng="x"), "^rng must"),
    (lambda: W.random_pm1(3, 4, rng=-1), "^rng seed"), (lambda: W.random_bernoulli(2, 2, p="0.5"), "^p must"),
    (lambda: W.random_bernoulli(2, 2, p=np.nan), "^p must"), (lambda: W.random_bernoulli(2, 2, p=1.5), "^p must"),
    (lambda: W.random_bernoulli(2, 2, rng=1.5), "^rng must"),
    (lambda: W.by_name(["pm1"], d=2), "^name: unknown workload"),
    (lambda: W.by_name("identity", n=0, d=3), "^n must"),
]


@pytest.mark.parametrize("call,match", BAD)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_marginals_of_a_larger_domain_match_their_definition():
    M = W.marginals((2, 3, 4), 2)
    cells = np.array(np.unravel_index(np.arange(24), (2, 3, 4))).T
    assert M.shape == (2 * 3 + 2 * 4 + 3 * 4, 24)
    # the row of attributes (0, 2) and values (1, 3) counts the cells with a0 = 1 and a2 = 3
    row = 2 * 3 + 1 * 4 + 3
    np.testing.assert_array_equal(M[row], (cells[:, 0] == 1) & (cells[:, 2] == 3))


def test_marginals_too_large_to_be_dense_point_to_the_structure():
    """All 3-way marginals of 16 binary attributes (4,480 × 65,536: 2.2 GiB) are refused as a dense
    matrix, and the message names the structured path, which takes them."""
    import itertools

    import knorm.implicit as I

    with pytest.raises(ValueError, match=r"shape=.*over the cap.*knorm\.implicit\.marginals"):
        W.marginals((2,) * 16, 3)
    w = I.marginals((2,) * 16, list(itertools.combinations(range(16), 3)))
    assert (w.d, w.n) == (4480, 65536)
