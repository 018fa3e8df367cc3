"""Standard linear query workloads: each an ordinary ``(d, n)`` numpy array F.

Answers are ``F @ x`` for a histogram ``x`` of length n. Every generator checks its sizes
before allocating: a matrix of more than ``MAX_ENTRIES`` float64 entries (2 GiB) is
refused with a ``ValueError`` naming the argument and the size it would need.
"""

from __future__ import annotations

import itertools
import math

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._rng import as_generator
from ._validate import is_real, positive_int, short_repr
from .body.marginal import MarginalStructure

__all__ = ["identity", "prefix", "all_range", "width_range", "marginals", "clique_marginals", "random_pm1",
           "random_bernoulli", "by_name", "MAX_ENTRIES"]

MAX_ENTRIES = 2**28  # float64 entries of one workload matrix: 2 GiB


MARGINAL_HINT = ("; a marginal workload by its structure is never made dense: knorm.implicit.marginals(shape, "
                 "cliques) or knorm.data.marginal_workload(domain, k, dense=False)")


def _fits(name: str, value: Any, rows: int, cols: int, what: str, hint: str = "") -> None:
    """Refuse a ``rows × cols`` float64 matrix over ``MAX_ENTRIES`` (Python ints: no overflow);
    ``hint``: what to do instead, appended to the message."""
    size = rows * cols
    if size > MAX_ENTRIES:
        big = size >= 10**300  # past float64's range: no GiB figure to print
        entries = "more than 1e300" if big else f"{float(size):.3g}"
        gib = "more than 1e290" if big else f"{8 * float(size) / 2**30:.3g}"
        dims = f"{rows} x {cols} = " if size < 10**30 else ""
        raise ValueError(f"{name}={short_repr(value)}: {what} would be {dims}{entries} entries "
                         f"({gib} GiB), over the cap of {MAX_ENTRIES} entries (2 GiB){hint}")


def identity(n: int) -> NDArray[np.float64]:
    """The n point queries: ``F = I_n``; K is the cross-polytope ``B₁ⁿ``."""
    n = positive_int("n", n)
    _fits("n", n, n, n, "identity(n)")
    return np.eye(n)


def prefix(n: int) -> NDArray[np.float64]:
    """Cumulative sums ``x_1 + … + x_i``, i = 1..n: lower-triangular ones (n × n)."""
    n = positive_int("n", n)
    _fits("n", n, n, n, "prefix(n)")
    return np.tril(np.ones((n, n)))


def width_range(n: int, k: int) -> NDArray[np.float64]:
    """All ranges of width k, ``x_i + … + x_{i+k-1}``: (n-k+1) × n."""
    n = positive_int("n", n)
    k = positive_int("k", k)
    if k > n:
        raise ValueError(f"range width k={k} exceeds the domain size n={n}")
    _fits("n", n, n - k + 1, n, f"width_range(n, k={k})")
    F = np.zeros((n - k + 1, n))
    for i in range(n - k + 1):
        F[i, i : i + k] = 1.0
    return F


def all_range(n: int) -> NDArray[np.float64]:
    """All ranges ``[i, j]``, 1 <= i <= j <= n: n(n+1)/2 × n."""
    n = positive_int("n", n)
    _fits("n", n, n * (n + 1) // 2, n, "all_range(n)")
    return np.vstack([width_range(n, k) for k in range(1, n + 1)])


def _shape(shape: ArrayLike) -> tuple[int, ...]:
    try:
        arr = np.asarray(shape)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"shape must be a sequence of positive integers: {exc}") from None
    if arr.ndim > 1 or arr.size == 0 or arr.dtype == object and arr.ndim == 0:
        raise ValueError(f"shape must be a non-empty sequence of positive integers, got {short_repr(shape)}")
    items = list(shape) if isinstance(shape, (list, tuple)) else np.atleast_1d(arr).tolist()
    return tuple(positive_int(f"shape[{i}]", s) for i, s in enumerate(items))


def marginals(shape: Sequence[int], k: int) -> NDArray[np.float64]:
    """All k-way marginals of a product domain with attribute sizes ``shape``.

    Cells are the points of ``∏ range(shape[a])`` in C order (n = ∏ shape); one query
    per set of k attributes and value combination: the count of cells matching it. The
    engine recognises such a matrix from its entries (rows in any order, any scale) and
    computes the oracle's products from the tables' structure (docs/design.md §2.2).
    """
    shape = _shape(shape)
    k = positive_int("k", k)
    if k > len(shape):
        raise ValueError(f"k={k} exceeds the number of attributes {len(shape)}")
    n = math.prod(shape)
    rows = 0
    for attrs in itertools.combinations(range(len(shape)), k):
        rows += math.prod(shape[a] for a in attrs)
        if rows * n > MAX_ENTRIES:
            break
    _fits("shape", shape, rows, n, f"marginals(shape, k={k})" + (" (at least)" if rows * n > MAX_ENTRIES else ""),
          MARGINAL_HINT)
    return clique_marginals(shape, list(itertools.combinations(range(len(shape)), k)))


def clique_marginals(shape: Sequence[int], cliques: Sequence[Sequence[int]]) -> NDArray[np.float64]:
    """The marginal tables of the given attribute sets (cliques) over the domain ``shape``.

    For each clique in order (its attributes sorted), one query per value combination of
    its attributes (C order): the count of cells matching it; ``()`` is the total count.
    ``marginals(shape, k)`` is ``clique_marginals(shape, combinations(range(len(shape)), k))``.
    Like it, the matrix is recognised by the engine from its entries, which then computes
    the oracle's products from the tables' structure (docs/design.md §2.2).
    """
    shape = _shape(shape)
    if isinstance(cliques, (str, bytes)) or not isinstance(cliques, Sequence) or len(cliques) == 0:
        raise ValueError(f"cliques must be a non-empty sequence of attribute-index sequences, got {short_repr(cliques)}")
    out = []
    for i, c in enumerate(cliques):
        if isinstance(c, (str, bytes)) or not isinstance(c, (Sequence, np.ndarray)):
            raise ValueError(f"cliques[{i}] must be a sequence of attribute indices, got {short_repr(c)}")
        attrs = tuple(sorted(int(a) for a in c)) if all(isinstance(a, (int, np.integer)) for a in c) else None
        if attrs is None or any(a < 0 or a >= len(shape) for a in attrs) or len(set(attrs)) != len(attrs):
            raise ValueError(f"cliques[{i}] must hold distinct attribute indices in [0, {len(shape)}), got {short_repr(c)}")
        out.append(attrs)
    structure = MarginalStructure(tuple(shape), tuple(out))
    _fits("cliques", cliques, structure.rows, structure.cells, "clique_marginals(shape, cliques)", MARGINAL_HINT)
    return structure.matrix()


def _p(p: float) -> float:
    if not is_real(p) or not 0.0 < p <= 1.0:
        raise ValueError(f"p must be a number in (0, 1], got {short_repr(p)}")
    return float(p)


def random_pm1(d: int, n: int, *, rng: np.random.Generator | int | None = None) -> NDArray[np.float64]:
    """Random ``{-1, +1}`` matrix (d × n), the workload of docs/design.md §5 and §8."""
    d, n = positive_int("d", d), positive_int("n", n)
    _fits("n", n, d, n, f"random_pm1(d={d}, n)")
    return as_generator(rng).choice([-1.0, 1.0], size=(d, n))


def random_bernoulli(d: int, n: int, *, p: float = 0.5, rng: np.random.Generator | int | None = None
                     ) -> NDArray[np.float64]:
    """Random ``{0, 1}`` matrix (d × n) with P(1) = p."""
    p = _p(p)
    d, n = positive_int("d", d), positive_int("n", n)
    _fits("n", n, d, n, f"random_bernoulli(d={d}, n)")
    return (as_generator(rng).random((d, n)) < p).astype(float)


def by_name(name: str, *, d: int | None = None, n: int | None = None, k: int | None = None,
            shape: Sequence[int] | None = None, rng: np.random.Generator | int | None = None) -> NDArray[np.float64]:
    """Build a workload by name (used by the command line)."""
    size = n if n is not None else d
    # a size left None reaches its generator, which refuses it with a ValueError naming it
    makers = {
        "identity": lambda: identity(size),  # type: ignore[arg-type]
        "prefix": lambda: prefix(size),  # type: ignore[arg-type]
        "all_range": lambda: all_range(n),  # type: ignore[arg-type]
        "width_range": lambda: width_range(n, k),  # type: ignore[arg-type]
        "marginals": lambda: marginals(shape, k),  # type: ignore[arg-type]
        "pm1": lambda: random_pm1(d, n, rng=rng),  # type: ignore[arg-type]
        "bernoulli": lambda: random_bernoulli(d, n, rng=rng),  # type: ignore[arg-type]
    }
    if not isinstance(name, str) or name not in makers:
        raise ValueError(f"name: unknown workload {short_repr(name)}; choose from {sorted(makers)}")
    # the arguments this workload does not use are still checked: a wrong one is never ignored silently
    for arg, value in (("d", d), ("n", n), ("k", k)):
        positive_int(arg, value, allow_none=True)
    if shape is not None:
        _shape(shape)
    as_generator(rng)
    return makers[name]()
