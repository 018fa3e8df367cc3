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
attributes of equal size is a symmetry too when it maps the cliques onto themselves; it
is not used (value permutations already leave few free parameters: r at most, often
far fewer).

The rounding (:func:`knorm.walks.rounding.round_body`) averages its covariance estimates
this way; nothing here depends on how F was built (rows in any order, a user's file).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .marginal import MarginalMatch

__all__ = ["ValueSymmetry", "value_symmetry", "MAX_ROWS", "MAX_ATTRIBUTES"]

MAX_ROWS = 2048  # the class map is d×d int64 (32 MiB at d = 2048): larger workloads go without
MAX_ATTRIBUTES = 30  # class keys (tables² · 2^attributes) stay within int64


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


def value_symmetry(match: MarginalMatch | None, basis: NDArray[np.float64]) -> ValueSymmetry | None:
    """The value-permutation group of a recognised marginal workload, or None.

    None when ``match`` is None, when a table that appears is incomplete or has cells
    repeated unequally (a permutation would then not map F's rows onto themselves), when
    no attribute has two values, or when F has more than ``MAX_ROWS`` rows or its domain
    more than ``MAX_ATTRIBUTES`` attributes.
    """
    if match is None:
        return None
    st = match.structure
    rows = match.rows
    d = rows.shape[0]
    if d > MAX_ROWS or len(st.shape) > MAX_ATTRIBUTES or len(st.cliques) > 1 << 16 or max(st.shape, default=1) < 2:
        return None
    cid, dig = _row_tables(match)
    live = rows >= 0
    mult = np.bincount(rows[live], minlength=cid.shape[0])
    for ci in range(len(st.cliques)):  # each table: all cells equally often (or not at all)
        m = mult[cid == ci]
        if np.any(m != m[0]):
            return None
    k = dig.shape[1]
    rc = np.where(live, cid[np.maximum(rows, 0)], -1)
    rd = dig[np.maximum(rows, 0)]
    pattern = np.zeros((d, d), np.int64)
    for a in range(k):  # bit a: attribute a in both tables, with equal values
        has = rd[:, a] >= 0
        pattern |= (has[:, None] & has[None, :] & (rd[:, None, a] == rd[None, :, a])).astype(np.int64) << a
    nc = len(st.cliques)
    key = (rc[:, None] * nc + rc[None, :]) * (1 << k) + pattern
    key[~live, :] = -1
    key[:, ~live] = -1
    classes = np.full((d, d), -1, np.int64)
    mask = key >= 0
    _, inv = np.unique(key[mask], return_inverse=True)
    classes[mask] = inv.reshape(-1)
    return ValueSymmetry(classes, int(inv.max()) + 1 if inv.size else 0, basis)
