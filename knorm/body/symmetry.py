"""Symmetries of K found from F's entries: permuting the values of a marginal workload's attributes.

Let F be a marginal workload (:func:`knorm.body.marginal.recognise`: rows are indicators of
cylinder sets ``{x : x_C = v}`` of a product domain, in any order) in which every table
that appears is complete, each of its cells the same number of times. Permuting the
values of one attribute a (``π ∈ S_{k_a}``) permutes the cells, the columns of F (Q), and
the rows of every table containing a (P), with ``P F = F Q``; so ``P K = K``, P is
orthogonal and preserves volume, and the covariance of Uniform(K) commutes with P:
``Σ = P Σ Pᵀ`` for every element of the group G = S_{k_1} × … × S_{k_m}.

The group average (Reynolds operator) ``R(S) = (1/|G|) Σ_g P_g S P_gᵀ`` is the orthogonal
projection onto the matrices that commute with G; applied to a sample covariance it keeps
its expectation (Σ itself) and removes the part that is pure noise. For rows i, j (tables
C_i, C_j, cells v_i, v_j) the orbit of the index pair (i, j) under G is fixed by
``(C_i, C_j)`` and, for each attribute a in both, whether ``v_i[a] = v_j[a]``: ``R(S)_ij``
is the mean of S over that class (each attribute's group acts on its own values only, and
``S_k`` is transitive on pairs of equal and on pairs of distinct values). Swapping
attributes of equal size is a symmetry too when it maps the tables onto themselves
(2-way marginals of binary attributes: all of S_m), and the group includes every
permutation of each class of such interchangeable attributes; then the class of (i, j)
is fixed by the counts, per class, of attributes in C_i only, in C_j only, and in both
with equal or with different values.

The rounding (:func:`knorm.walks.rounding.round_body`) averages its covariance estimates
this way; nothing here depends on how F was built (rows in any order, a user's file).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .marginal import MarginalMatch, MarginalStructure

__all__ = ["ValueSymmetry", "value_symmetry", "row_tables", "MAX_ROWS", "MAX_ATTRIBUTES"]

MAX_ROWS = 8192  # the class map is d×d int64 (512 MiB at d = 8192; its making ≈ 5 such arrays at once): larger
# workloads go without. At 4,480 rows (all 3-way marginals of 16 binary attributes, rank 697) it takes 9 s and
# leaves 10 classes, and the rounding then records 2·r points per iteration instead of 10·r
MAX_ATTRIBUTES = 30  # attributes a domain may have for its symmetries to be used


class ValueSymmetry:
    """The group average ``R`` of :mod:`knorm.body.symmetry` for one body.

    ``classes[i, j]``: the orbit class of the ambient index pair (i, j) (``-1`` where row i
    or j of F is zero); ``n_classes``; ``basis`` (d, r): the body's orthonormal span basis,
    in which :meth:`average_span` works.
    """

    def __init__(self, classes: NDArray[np.int64], n_classes: int, basis: NDArray[np.float64]) -> None:
        self.classes, self.n_classes = classes, int(n_classes)
        self.basis = np.asarray(basis, dtype=np.float64)
        live = classes >= 0
        self._live = live
        self._flat = classes[live]
        self._count = np.bincount(self._flat, minlength=self.n_classes).astype(np.float64)

    def average(self, S: NDArray[np.float64]) -> NDArray[np.float64]:
        """``R(S)`` for a symmetric (d, d) matrix in ambient coordinates: each entry replaced
        by the mean over its class (zero rows stay zero)."""
        S = np.asarray(S, dtype=np.float64)
        means = np.bincount(self._flat, weights=S[self._live], minlength=self.n_classes) / self._count
        out = np.zeros_like(S)
        out[self._live] = means[self._flat]
        return out

    def average_span(self, C: NDArray[np.float64]) -> NDArray[np.float64]:
        """``R`` in span coordinates: ``Uᵀ R(U C Uᵀ) U`` (U = ``basis``; the span is G-invariant)."""
        U = self.basis
        out = U.T @ self.average(U @ np.asarray(C, dtype=np.float64) @ U.T) @ U
        return (out + out.T) / 2.0


def _row_tables(match: MarginalMatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per row of the structure's matrix M: its clique's index and its cell's digits (−1: free)."""
    st = match.structure
    k = len(st.shape)
    cid, dig = [], []
    for ci, c in enumerate(st.cliques):
        sizes = [st.shape[a] for a in c]
        m = int(np.prod(sizes)) if c else 1
        dg = np.full((m, k), -1, np.int64)
        if c:
            dg[:, list(c)] = np.stack(np.unravel_index(np.arange(m), sizes), axis=1)
        cid.append(np.full(m, ci, np.int64))
        dig.append(dg)
    return np.concatenate(cid), np.concatenate(dig)


def row_tables(match: MarginalMatch | None) -> NDArray[np.int64] | None:
    """Per row of F, the index of its table (the structure's clique C: the rows ``{x : x_C = v}``
    for every v; ``−1``: a zero row), or None if F is not a recognised marginal workload.
    A table's block energy ``Σ_{i ∈ C} z_i²`` is invariant under the value permutations."""
    if match is None:
        return None
    cid = _row_tables(match)[0]
    return np.where(match.rows >= 0, cid[np.maximum(match.rows, 0)], -1).astype(np.int64)


def _swappable(structure: MarginalStructure, mult: dict[tuple[int, ...], int]) -> list[list[int]]:
    """Attributes grouped into classes whose every permutation maps the tables (with their
    multiplicities) onto themselves: same size, and invariant under each adjacent
    transposition of the class (which generate its symmetric group). Singletons otherwise."""
    shape = structure.shape
    by_size: dict[int, list[int]] = {}
    for a, k in enumerate(shape):
        by_size.setdefault(k, []).append(a)
    labels: list[list[int]] = []
    for attrs in by_size.values():
        ok = len(attrs) > 1
        for a, b in zip(attrs, attrs[1:]):
            swap = {a: b, b: a}
            moved = {tuple(sorted(swap.get(x, x) for x in c)): m for c, m in mult.items()}
            if moved != mult:
                ok = False
                break
        labels += [attrs] if ok else [[a] for a in attrs]
    return labels


def _compress(key: NDArray[np.int64], feature: NDArray[np.int64], radix: int) -> NDArray[np.int64]:
    """Class ids of the pairs (key, feature), numbered 0, 1, … (keys stay below d²)."""
    _, inv = np.unique(key * radix + feature, return_inverse=True)
    return inv.reshape(key.shape).astype(np.int64)


def value_symmetry(match: MarginalMatch | None, basis: NDArray[np.float64]) -> ValueSymmetry | None:
    """The symmetry group of a recognised marginal workload (value permutations, and swaps
    of interchangeable attributes), or None.

    None when ``match`` is None, when a table that appears is incomplete or has cells
    repeated unequally (a permutation would then not map F's rows onto themselves), when
    no attribute has two values, or when F has more than ``MAX_ROWS`` rows or its domain
    more than ``MAX_ATTRIBUTES`` attributes.

    Orbit classes of row pairs (i, j): attributes are grouped into classes of
    interchangeable ones (:func:`_swappable`); for each class, the numbers of its
    attributes in C_i only, in C_j only, in both with equal values and in both with
    different values fix the orbit (the class's permutations relabel attributes with the
    same counts onto each other, the value permutations then match the values).
    """
    if match is None:
        return None
    st = match.structure
    rows = match.rows
    d = rows.shape[0]
    if d > MAX_ROWS or len(st.shape) > MAX_ATTRIBUTES or max(st.shape, default=1) < 2:
        return None
    cid, dig = _row_tables(match)
    live = rows >= 0
    count = np.bincount(rows[live], minlength=cid.shape[0])
    mult: dict[tuple[int, ...], int] = {}
    for ci, c in enumerate(st.cliques):  # each table: all cells equally often (or not at all)
        m = count[cid == ci]
        if np.any(m != m[0]):
            return None
        if m[0]:
            mult[c] = int(m[0])
    rd = dig[np.maximum(rows, 0)]
    key = np.zeros((d, d), np.int64)
    for attrs in _swappable(st, mult):
        feature = np.zeros((d, d), np.int64)
        radix = len(attrs) + 1
        for a in attrs:
            hi = rd[:, a] >= 0
            both = hi[:, None] & hi[None, :]
            eq = both & (rd[:, None, a] == rd[None, :, a])
            code = (hi[:, None] & ~hi[None, :]) * 1 + (~hi[:, None] & hi[None, :]) * radix + eq * radix**2
            feature += code + (both & ~eq) * radix**3
        key = _compress(key, feature, radix**4)
    key[~live, :] = -1
    key[:, ~live] = -1
    mask = key >= 0
    classes = np.full((d, d), -1, np.int64)
    _, inv = np.unique(key[mask], return_inverse=True)
    classes[mask] = inv.reshape(-1)
    return ValueSymmetry(classes, int(inv.max()) + 1 if inv.size else 0, basis)
