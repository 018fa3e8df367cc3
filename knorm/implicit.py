"""Implicit workloads: a workload W (d × n) known by its Gram matrix WᵀW and query count, or as a
Kronecker product / union of Kronecker products of small matrices, without building W.

The strategy mechanisms' errors need only WᵀW: for a strategy A (Δ₁ = its largest column ℓ₁ norm,
full column rank), ``E‖W A⁺ z‖₂² = 2(Δ₁/ε)²·‖W A⁺‖_F² = 2(Δ₁/ε)²·tr(WᵀW (AᵀA)⁻¹)``. For a union of
Kronecker products ``W = [⊗_i W_1i; …; ⊗_i W_ki]`` over a product domain ``shape = (n_1, …, n_m)``
(cells in C order) and a Kronecker strategy ``A = ⊗_i A_i``::

    ‖W A⁺‖_F² = Σ_j Π_i tr(W_jiᵀW_ji (A_iᵀA_i)⁻¹),    Δ₁(A) = Π_i Δ₁(A_i),

so only the per-attribute Gram matrices ``G_ji = W_jiᵀW_ji`` (n_i × n_i) are ever held.

:class:`ImplicitWorkload` holds the terms; each term is a tuple of :class:`Factor` (one per
attribute: its unit-scale Gram, row count, power-of-two scale and, when known, an operator applying
it along one axis of the cell array). Builders: :func:`from_matrix`, :func:`from_gram`,
:func:`identity`, :func:`total`, :func:`prefix`, :func:`all_range`, :func:`width_range` (closed-form
Grams and operators, nothing of size d held), :func:`kron`, :func:`union`, :func:`ranges` (all
axis-aligned boxes of a product domain: the Kronecker product of the 1-D all-range workloads) and
:func:`marginals`. Methods: :meth:`~ImplicitWorkload.gram` (n × n, memory-checked),
:meth:`~ImplicitWorkload.frobenius_squared`, :meth:`~ImplicitWorkload.kron_trace` (the error factor
of a Kronecker strategy from the per-attribute ``(A_iᵀA_i)⁻¹``), :meth:`~ImplicitWorkload.apply`
(``W x`` for the answers, when every factor has an operator) and :meth:`~ImplicitWorkload.matrix`.

The strategy mechanisms (``IdentityMechanism``, ``HierarchicalMechanism``, ``PIdentityMechanism``,
``KroneckerStrategyMechanism``, ``KroneckerPIdentityMechanism``, ``KroneckerHierarchicalMechanism``)
accept one as ``F`` (the Kronecker ones use its attributes; the others its flattened cells): their exact
errors come from the Gram matrices; ``release(x)`` returns the d answers ``W x̂`` computed by
:meth:`~ImplicitWorkload.apply` (refused before anything is drawn when W has no operator or the
answers do not fit in memory), and ``release_estimate(x)`` returns the consistent estimate
``x̂ = A⁺(Ax + z)`` itself (n values; every answer is ``W x̂``). Mechanisms that need W's entries
(K-norm, NIM, Laplace, Gaussian) refuse an implicit workload with a one-line ValueError naming F.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validate import as_real_array, check_flag, check_memory, check_str, positive_int, short_repr
from .body.hull import _exponent, validate_matrix

__all__ = ["ImplicitWorkload", "Factor", "from_matrix", "from_gram", "identity", "total", "prefix", "all_range",
           "width_range", "kron", "union", "ranges", "marginals", "as_workload", "from_marginal_match"]

Apply = Callable[[NDArray[np.float64], int], NDArray[np.float64]]


def _matmul_along(M: NDArray[np.float64], X: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
    """M (r × n) multiplied along axis ``axis`` of X (whose size there is n)."""
    return np.moveaxis(np.tensordot(M, X, axes=(1, axis)), 0, axis)


def _kron_all(mats: Sequence[NDArray[np.float64]]) -> NDArray[np.float64]:
    """``M_1 ⊗ M_2 ⊗ …`` (dense)."""
    out = mats[0]
    for M in mats[1:]:
        out = np.asarray(np.kron(out, M), dtype=np.float64)
    return out


def _along(fun: Callable[[NDArray[np.float64]], NDArray[np.float64]]) -> Apply:
    """An operator on axis ``axis`` of an array from one acting on its last axis."""
    def apply(X: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
        return np.moveaxis(fun(np.moveaxis(X, axis, -1)), -1, axis)
    return apply


@dataclass(frozen=True, eq=False)
class Factor:
    """One attribute's matrix ``W_i = 2^exponent·U`` (``rows`` × ``n``), known by ``gram = UᵀU``
    (unit scale: no square of W's scale is formed) and, when known, ``apply(X, axis)``, which
    multiplies W_i (true scale) along ``axis`` of X; ``name`` describes it."""

    gram: NDArray[np.float64]
    rows: int
    exponent: int
    name: str
    apply: Apply | None = None

    @property
    def n(self) -> int:
        return int(self.gram.shape[0])


def _check_n(n: int, name: str = "n", copies: int = 4) -> int:
    n = positive_int(name, n)
    check_memory(name, n, 8 * copies * n * n)  # the n × n Gram and its working copies
    return n


def _cells(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(min(i, j), max(i, j))`` over the n × n cell pairs."""
    i = np.arange(n)
    return np.minimum.outer(i, i), np.maximum.outer(i, i)


class ImplicitWorkload:
    """A union of Kronecker products of factors over the product domain ``shape`` (cells in C order):
    the rows of term 1 (``⊗_i W_1i``, C order), then term 2, …; ``d`` queries over ``n = Π shape``
    cells. Build it with the module's functions; ``exponent``: W's power-of-two scale (every error
    quantity of the unit-scale workload is multiplied by ``4^exponent``)."""

    def __init__(self, terms: Sequence[Sequence[Factor]]) -> None:
        try:  # a sequence of sequences of factors (no term, or an empty one, is refused below)
            self.terms: tuple[tuple[Factor, ...], ...] = tuple(tuple(t) for t in terms)
        except TypeError:
            raise TypeError(f"terms must be a sequence of terms (sequences of Factor), got "
                            f"{short_repr(terms)}") from None
        if not self.terms or any(not t for t in self.terms):
            raise ValueError("terms: an implicit workload needs at least one term of at least one factor")
        for t in self.terms:
            for f in t:
                if not isinstance(f, Factor) or not isinstance(f.gram, np.ndarray) or f.gram.ndim != 2 or \
                        f.gram.shape[0] != f.gram.shape[1] or f.gram.size == 0 or not np.all(np.isfinite(f.gram)):
                    raise ValueError(f"terms must hold Factor objects with finite square Gram matrices, got "
                                     f"{short_repr(f)}")
                positive_int("rows", f.rows)
        self.shape: tuple[int, ...] = tuple(f.n for f in self.terms[0])
        if any(tuple(f.n for f in t) != self.shape for t in self.terms):
            raise ValueError(f"the terms of a union must share one domain shape, got "
                             f"{[tuple(f.n for f in t) for t in self.terms]}")
        self.n = math.prod(self.shape)
        self.term_rows = tuple(math.prod(f.rows for f in t) for t in self.terms)
        self.d = sum(self.term_rows)
        exps = [sum(f.exponent for f in t) for t in self.terms]
        self.exponent = max(exps)
        self._weights = tuple(math.ldexp(1.0, 2 * (e - self.exponent)) for e in exps)  # 4^(e_j − e) <= 1

    def __repr__(self) -> str:
        names = " ∪ ".join(" ⊗ ".join(f.name for f in t) for t in self.terms[:4])
        more = f" ∪ … ({len(self.terms)} terms)" if len(self.terms) > 4 else ""
        return f"ImplicitWorkload({names}{more}; d={self.d}, n={self.n})"

    def __array__(self, *args: Any, **kwargs: Any) -> NDArray[np.float64]:
        raise ValueError(f"F is an implicit workload ({self.d} queries over {self.n} cells) and this needs the "
                         "explicit matrix: pass F.matrix() if it fits, or use a strategy mechanism (identity, "
                         "hierarchical, p-identity, Kronecker)")

    @property
    def can_apply(self) -> bool:
        """Whether every factor has an operator (needed for the answers ``W x``)."""
        return all(f.apply is not None for t in self.terms for f in t)

    def unit_terms(self) -> list[tuple[float, list[NDArray[np.float64]]]]:
        """``[(w_j, [G_j1, …, G_jm])]``: the unit-scale Gram of W is ``Σ_j w_j ⊗_i G_ji``."""
        return [(w, [f.gram for f in t]) for w, t in zip(self._weights, self.terms)]

    def kron_trace(self, inverses: Sequence[NDArray[np.float64]]) -> float:
        """``Σ_j w_j Π_i ⟨G_ji, X_i⟩`` at unit scale: with ``X_i = (A_iᵀA_i)⁻¹`` this is ``‖W A⁺‖_F²·4^-e``
        for ``A = ⊗_i A_i`` (times ``4^exponent`` in W's units)."""
        if len(inverses) != len(self.shape):
            raise ValueError(f"inverses must hold one matrix per attribute ({len(self.shape)}), got {len(inverses)}")
        return float(sum(w * math.prod(float(np.vdot(G, X)) for G, X in zip(Gs, inverses))
                         for w, Gs in self.unit_terms()))

    def frobenius_squared(self, *, unit: bool = False) -> float:
        """``‖W‖_F² = Σ_j Π_i tr(G_ji)`` (``unit=True``: of the unit-scale workload, no ``4^exponent``)."""
        unit = check_flag("unit", unit)
        value = sum(w * math.prod(float(np.trace(G)) for G in Gs) for w, Gs in self.unit_terms())
        return value if unit else math.ldexp(value, 2 * self.exponent)

    def gram(self, *, unit: bool = False) -> NDArray[np.float64]:
        """``WᵀW = Σ_j ⊗_i W_jiᵀW_ji`` (n × n; memory checked before allocating)."""
        unit = check_flag("unit", unit)
        check_memory("F", None, 8 * 3 * self.n * self.n)
        out = np.zeros((self.n, self.n))
        for w, Gs in self.unit_terms():
            out += w * _kron_all(Gs)
        return out if unit else np.ldexp(out, 2 * self.exponent)

    def apply(self, x: ArrayLike) -> NDArray[np.float64]:
        """``W x`` for x of shape (n,) or (m, n): (d,) or (m, d), terms in order (memory checked)."""
        if not self.can_apply:
            raise ValueError("F is known by its Gram matrix only: its answers W x cannot be computed "
                             "(use release_estimate for x̂; every answer is w·x̂)")
        arr = as_real_array("x", x).astype(np.float64)
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.n:
            raise ValueError(f"x must have shape ({self.n},) or (m, {self.n}), got {arr.shape}")
        X = arr.reshape((-1,) + self.shape)
        m = X.shape[0]
        check_memory("x", None, 8 * 3 * m * (self.d + self.n))
        out = []
        for t in self.terms:
            Y = X
            for axis, f in enumerate(t):
                assert f.apply is not None
                Y = f.apply(Y, axis + 1)
            out.append(Y.reshape(m, -1))
        with np.errstate(over="ignore", invalid="ignore"):
            res = np.concatenate(out, axis=1)
        if not np.all(np.isfinite(res)):
            raise ValueError("x is too large: W x overflows float64")
        return res[0] if arr.ndim == 1 else res

    def marginal_match(self) -> Any:
        """F's marginal structure (a :class:`knorm.body.marginal.MarginalMatch`) found from the factors'
        entries (each made by its operator: an n_i × n_i product), else None: every factor ``c·I``
        (the attribute kept) or ``c·1ᵀ`` (summed out) with one product of the c over all terms, or
        one factor holding the whole workload whose entries are recognised as marginals. Then
        K-norm, Laplace and Gaussian take this workload without making it dense."""
        from .body.marginal import MarginalMatch, MarginalStructure, recognise

        if not self.can_apply:
            return None
        if len(self.terms) == 1 and len(self.terms[0]) == 1:
            f = self.terms[0][0]
            fits = f.n * max(f.n, f.rows) <= 1 << 26  # I_n and W itself: a matrix a user holds anyway
            return recognise(f.apply(np.eye(f.n), 0)) if fits else None  # type: ignore[misc]
        cliques, scales = [], set()
        for t in self.terms:
            c, scale = [], 1.0
            for a, f in enumerate(t):
                W = f.apply(np.eye(f.n), 0)  # type: ignore[misc]
                top = W.flat[0]
                if f.rows == f.n and np.array_equal(W, top * np.eye(f.n)) and top != 0:
                    c.append(a)
                elif f.rows == 1 and W.shape == (1, f.n) and np.all(W == top) and top != 0:
                    pass
                else:
                    return None
                scale *= float(top)
            cliques.append(tuple(c))
            scales.add(scale)
        if len(scales) != 1:
            return None
        st = MarginalStructure(self.shape, tuple(cliques))
        return MarginalMatch(st, scales.pop(), np.arange(st.rows, dtype=np.int64))

    def matrix(self) -> NDArray[np.float64]:
        """The explicit d × n matrix (memory checked; for small workloads and tests). A marginal
        workload's is made from its structure a few rows at a time; any other's is ``W·I_n``."""
        match = self.marginal_match()
        if match is not None:
            from .body.marginal_ops import dense_marginal

            return dense_marginal(match)
        check_memory("F", None, 8 * (2 * self.d * self.n + self.n * self.n))  # the answers of I_n, and I_n
        return self.apply(np.eye(self.n)).T.copy()


def _factor(gram: NDArray[np.float64], rows: int, name: str, apply: Apply | None, exponent: int = 0) -> Factor:
    return Factor(gram, rows, exponent, name, apply)


def _single(f: Factor) -> ImplicitWorkload:
    return ImplicitWorkload([[f]])


def from_matrix(W: ArrayLike) -> ImplicitWorkload:
    """An explicit d × n matrix as a one-attribute workload (Gram ``WᵀW`` at unit scale, operator ``W·``)."""
    W = validate_matrix(W, "W")
    e = int(_exponent(W)) - 1
    U = np.ldexp(W, -e)
    check_memory("W", None, 8 * 2 * W.shape[1] ** 2)

    def apply(X: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
        return _matmul_along(W, X, axis)
    return _single(_factor(U.T @ U, W.shape[0], f"matrix{W.shape}", apply, e))


def from_gram(gram: ArrayLike, *, queries: int) -> ImplicitWorkload:
    """A one-attribute workload known only by ``WᵀW`` (n × n) and its number of queries: errors need
    nothing more; answers ``W x`` cannot be computed. Checked: finite, square, symmetric (to 10⁻¹²
    of its largest entry), non-negative diagonal, not 0; positive semi-definiteness (O(n³) to
    check) is the caller's."""
    G = as_real_array("gram", gram).astype(np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.size == 0 or not np.all(np.isfinite(G)):
        raise ValueError(f"gram must be a finite non-empty square matrix WᵀW, got shape {G.shape}")
    e = int(_exponent(G))
    U = np.ldexp(G, -2 * (e // 2 + 1))  # entries below 1: the unit-scale Gram of W·2^-(e//2 + 1)
    scale = float(np.abs(U).max())
    if not np.allclose(U, U.T, rtol=0.0, atol=1e-12 * scale) or np.any(np.diag(U) < 0) or scale == 0.0:
        raise ValueError("gram must be a non-zero symmetric positive semi-definite matrix WᵀW")
    queries = positive_int("queries", queries)
    return _single(_factor((U + U.T) / 2, queries, f"gram{G.shape}", None, e // 2 + 1))


def identity(n: int) -> ImplicitWorkload:
    """The n point queries ``I_n`` (Gram I)."""
    n = _check_n(n)
    return _single(_factor(np.eye(n), n, f"identity({n})", lambda X, axis: X))


def total(n: int) -> ImplicitWorkload:
    """The single query ``1ᵀx`` (Gram 11ᵀ)."""
    n = _check_n(n)
    return _single(_factor(np.ones((n, n)), 1, f"total({n})", lambda X, axis: X.sum(axis=axis, keepdims=True)))


def prefix(n: int) -> ImplicitWorkload:
    """Cumulative sums ``x_0 + … + x_i`` (rows as ``workloads.prefix``): Gram ``G_ij = n − max(i, j)``."""
    n = _check_n(n)
    _, hi = _cells(n)
    return _single(_factor((n - hi).astype(np.float64), n, f"prefix({n})", lambda X, axis: np.cumsum(X, axis=axis)))


def _sums(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cumulative sums along the last axis with a leading 0: ``S[k] = x_0 + … + x_{k-1}``."""
    S = np.zeros(X.shape[:-1] + (X.shape[-1] + 1,))
    np.cumsum(X, axis=-1, out=S[..., 1:])
    return S


def _range_op(n: int, widths: range) -> Apply:
    lo = np.concatenate([np.arange(n - k + 1) for k in widths])
    hi = np.concatenate([np.arange(k, n + 1) for k in widths])

    def fun(X: NDArray[np.float64]) -> NDArray[np.float64]:
        S = _sums(X)
        return S[..., hi] - S[..., lo]
    return _along(fun)


def all_range(n: int) -> ImplicitWorkload:
    """All ranges ``[i, j]``, n(n+1)/2 queries (rows as ``workloads.all_range``: by width, then start):
    Gram ``G_ij = (min(i, j) + 1)(n − max(i, j))`` (the ranges holding both cells)."""
    n = _check_n(n)
    lo, hi = _cells(n)
    return _single(_factor(((lo + 1) * (n - hi)).astype(np.float64), n * (n + 1) // 2, f"all_range({n})",
                           _range_op(n, range(1, n + 1))))


def width_range(n: int, k: int) -> ImplicitWorkload:
    """All ranges of width k (rows as ``workloads.width_range``): ``G_ij`` = the starts s in
    ``[max(0, max(i,j) − k + 1), min(min(i,j), n − k)]``."""
    n = _check_n(n)
    k = positive_int("k", k)
    if k > n:
        raise ValueError(f"range width k={k} exceeds the domain size n={n}")
    lo, hi = _cells(n)
    G = np.maximum(0, np.minimum(lo, n - k) - np.maximum(0, hi - k + 1) + 1).astype(np.float64)
    return _single(_factor(G, n - k + 1, f"width_range({n}, {k})", _range_op(n, range(k, k + 1))))


def as_workload(W: ArrayLike | ImplicitWorkload, name: str = "F") -> ImplicitWorkload:
    """``W`` itself if implicit, else :func:`from_matrix` of it."""
    check_str("name", name)
    if isinstance(W, ImplicitWorkload):
        return W
    try:
        return from_matrix(W)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def kron(*workloads: ArrayLike | ImplicitWorkload) -> ImplicitWorkload:
    """The Kronecker product ``W_1 ⊗ W_2 ⊗ …`` (each an implicit workload or an explicit matrix) over
    the concatenated domain: with unions, the union of the products of their terms (term-major
    order; the same queries as ``np.kron`` of the stacked matrices, possibly in another order)."""
    if not workloads:
        raise ValueError("kron needs at least one workload")
    parts = [as_workload(w, f"workloads[{i}]") for i, w in enumerate(workloads)]
    terms: list[tuple[Factor, ...]] = [()]
    for p in parts:
        terms = [t + u for t in terms for u in p.terms]
    return ImplicitWorkload(terms)


def union(*workloads: ArrayLike | ImplicitWorkload) -> ImplicitWorkload:
    """The rows of every workload stacked (one domain shape): ``WᵀW = Σ W_kᵀW_k``."""
    if not workloads:
        raise ValueError("union needs at least one workload")
    parts = [as_workload(w, f"workloads[{i}]") for i, w in enumerate(workloads)]
    return ImplicitWorkload([t for p in parts for t in p.terms])


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (Sequence, np.ndarray)) or len(shape) == 0:
        raise ValueError(f"shape must be a non-empty sequence of positive integers, got {short_repr(shape)}")
    return tuple(positive_int(f"shape[{i}]", s) for i, s in enumerate(shape))


def ranges(shape: Sequence[int]) -> ImplicitWorkload:
    """All axis-aligned boxes of the domain ``shape`` (e.g. ``(32, 32)``: the 278,784 2-D ranges):
    ``⊗_i all_range(n_i)``, Gram ``⊗_i G_i``."""
    return kron(*[all_range(s) for s in _shape(shape)])


def marginals(shape: Sequence[int], cliques: Sequence[Sequence[int]]) -> ImplicitWorkload:
    """The marginal tables of the given attribute sets (rows as ``workloads.clique_marginals``):
    per clique, ``⊗_a (I if a in the clique else 1ᵀ)``."""
    shape = _shape(shape)
    if isinstance(cliques, (str, bytes)) or not isinstance(cliques, Sequence) or len(cliques) == 0:
        raise ValueError(f"cliques must be a non-empty sequence of attribute-index sequences, got "
                         f"{short_repr(cliques)}")
    terms = []
    for i, c in enumerate(cliques):
        attrs = set(int(a) for a in c) if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                              for a in c) else None
        if attrs is None or any(a < 0 or a >= len(shape) for a in attrs) or len(attrs) != len(c):
            raise ValueError(f"cliques[{i}] must hold distinct attribute indices in [0, {len(shape)}), got "
                             f"{short_repr(c)}")
        terms.append([(identity(s) if a in attrs else total(s)).terms[0][0] for a, s in enumerate(shape)])
    return ImplicitWorkload(terms)


def from_marginal_match(match: Any) -> ImplicitWorkload:
    """The implicit workload of a marginal workload known by its structure (a
    :class:`knorm.body.marginal.MarginalMatch`) whose rows are its tables' rows in order, each once,
    at a power-of-two scale: one term per table (``⊗_a (2^e·I if a is in the table else 1ᵀ)``).
    A ValueError naming F otherwise (rows reordered, repeated or missing, or another scale)."""
    from .body.marginal import MarginalMatch

    if not isinstance(match, MarginalMatch):
        raise TypeError(f"match must be a knorm.body.marginal.MarginalMatch (a marginal workload by its structure), "
                        f"got {type(match).__name__}")
    st = match.structure
    m, e = math.frexp(abs(float(match.scale)))
    if not np.array_equal(match.rows, np.arange(st.rows)) or m != 0.5 or match.scale < 0:
        raise ValueError("F: a marginal workload becomes an implicit one only with its tables' rows in order, each "
                         "once, at a positive power-of-two scale")
    w = marginals(st.shape, [list(c) for c in st.cliques])
    if e == 1:
        return w
    terms = [list(t) for t in w.terms]
    for t in terms:  # the scale 2^(e−1) on the first factor
        t[0] = Factor(t[0].gram, t[0].rows, t[0].exponent + e - 1, t[0].name, _scaled_apply(t[0], e - 1))
    return ImplicitWorkload(terms)


def _scaled_apply(f: Factor, k: int) -> Apply:
    """``f``'s operator times ``2^k`` (exact)."""
    inner = f.apply
    assert inner is not None

    def apply(X: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
        return np.ldexp(inner(X, axis), k)
    return apply
