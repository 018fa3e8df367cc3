"""Standard linear query workloads: each an ordinary ``(d, n)`` numpy array F.

Answers are ``F @ x`` for a histogram ``x`` of length n.
"""

import itertools

import numpy as np

from ._rng import as_generator
from ._validate import positive_int

__all__ = ["identity", "prefix", "all_range", "width_range", "marginals", "random_pm1", "random_bernoulli", "by_name"]


def identity(n):
    """The n point queries: ``F = I_n``; K is the cross-polytope ``B₁ⁿ``."""
    return np.eye(positive_int("n", n))


def prefix(n):
    """Cumulative sums ``x_1 + … + x_i``, i = 1..n: lower-triangular ones (n × n)."""
    return np.tril(np.ones((positive_int("n", n),) * 2))


def width_range(n, k):
    """All ranges of width k, ``x_i + … + x_{i+k-1}``: (n-k+1) × n."""
    n = positive_int("n", n)
    k = positive_int("k", k)
    if k > n:
        raise ValueError(f"range width k={k} exceeds the domain size n={n}")
    F = np.zeros((n - k + 1, n))
    for i in range(n - k + 1):
        F[i, i : i + k] = 1.0
    return F


def all_range(n):
    """All ranges ``[i, j]``, 1 <= i <= j <= n: n(n+1)/2 × n."""
    n = positive_int("n", n)
    return np.vstack([width_range(n, k) for k in range(1, n + 1)])


def marginals(shape, k):
    """All k-way marginals of a product domain with attribute sizes ``shape``.

    Cells are the points of ``∏ range(shape[a])`` in C order (n = ∏ shape); one query
    per set of k attributes and value combination: the count of cells matching it.
    """
    shape = tuple(positive_int("domain size", s) for s in np.atleast_1d(shape))
    k = positive_int("k", k)
    if k > len(shape):
        raise ValueError(f"k={k} exceeds the number of attributes {len(shape)}")
    cells = np.array(list(itertools.product(*[range(s) for s in shape])))
    rows = []
    for attrs in itertools.combinations(range(len(shape)), k):
        for vals in itertools.product(*[range(shape[a]) for a in attrs]):
            rows.append(np.all(cells[:, attrs] == vals, axis=1).astype(float))
    return np.array(rows)


def random_pm1(d, n, *, rng=None):
    """Random ``{-1, +1}`` matrix (d × n), the workload of MATH.md §5 and §8."""
    return as_generator(rng).choice([-1.0, 1.0], size=(positive_int("d", d), positive_int("n", n)))


def random_bernoulli(d, n, *, p=0.5, rng=None):
    """Random ``{0, 1}`` matrix (d × n) with P(1) = p."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p must be in (0, 1], got {p}")
    return (as_generator(rng).random((positive_int("d", d), positive_int("n", n))) < p).astype(float)


def by_name(name, *, d=None, n=None, k=None, shape=None, rng=None):
    """Build a workload by name (used by the command line)."""
    makers = {
        "identity": lambda: identity(n or d),
        "prefix": lambda: prefix(n or d),
        "all_range": lambda: all_range(n),
        "width_range": lambda: width_range(n, k),
        "marginals": lambda: marginals(shape, k),
        "pm1": lambda: random_pm1(d, n, rng=rng),
        "bernoulli": lambda: random_bernoulli(d, n, rng=rng),
    }
    if name not in makers:
        raise ValueError(f"unknown workload {name!r}; choose from {sorted(makers)}")
    return makers[name]()
