"""A marginal workload's product basis: the layout of ``knorm.body._spectral`` (design §2.2).

Each attribute of size m gets a basis ``H`` of ``R^m`` with orthogonal columns, column 0
constant (:func:`attribute_basis`). The indicator of ``{x : x_C = c}`` is
``⊗_{i∈C} (Σ_a H_i[c_i, a]/‖h_a‖² · h_a) ⊗_{i∉C} h_0``, so the rows of a marginal workload
lie in the span of the product vectors ``h_{a_1} ⊗ … ⊗ h_{a_k}`` whose non-constant
factors (``a_i ≠ 0``) lie inside one clique: ``r_Φ`` of them, the *spectrum*
(:func:`spectrum`). :func:`spectral_operator` turns the oracle's weights ``W`` (rows of the
marginal tables × r) into ``A`` with ``Fᵀ(W v) = H·ŝ``, ``ŝ[pos] = A v``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .._blas import thin_svd
from ._spectral import spectral_rows
from .marginal import MarginalMatch, MarginalStructure, lift_ops

__all__ = ["attribute_basis", "spectrum", "spectrum_norms", "spectral_weights", "spectral_operator", "spectral_cost",
           "transform_rows", "span_of", "span_rows"]


def attribute_basis(m: int) -> NDArray[np.float64]:
    """``H`` (m × m), orthogonal columns of small integers, column 0 all ones: Hadamard's
    ``[[1, 1], [1, -1]]`` for m = 2, Helmert's contrasts (column j: j ones, then −j) above."""
    H = np.zeros((m, m))
    H[:, 0] = 1.0
    for j in range(1, m):
        H[:j, j] = 1.0
        H[j, j] = -float(j)
    return H


def _strides(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[a + 1:]) for a in range(len(shape))]


def _clique_positions(shape: tuple[int, ...], c: tuple[int, ...]) -> NDArray[np.int64]:
    """Flat C-order positions (in the cell space's index) of the spectral indices of clique c,
    in the C order of c's table (a_i over c's attributes, 0 elsewhere)."""
    st = _strides(shape)
    pos = np.zeros(1, np.int64)
    for a in c:
        pos = (pos.reshape(-1, 1) + np.arange(shape[a], dtype=np.int64) * st[a]).reshape(-1)
    return pos


def spectrum(structure: MarginalStructure) -> NDArray[np.int64]:
    """The flat positions of the spectrum, increasing: every product index supported inside
    a clique (``r_Φ`` = the rank of the full marginal workload)."""
    parts = [_clique_positions(structure.shape, c) for c in structure.cliques]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _live_blocks(pos: NDArray[np.int64], size: int) -> NDArray[np.int64]:
    """The blocks of ``size`` cells (aligned) that hold a spectral position: the only ones not
    zero before a pass over blocks of that size (earlier passes' blocks nest inside them)."""
    return np.unique(pos // size)


def _passes(shape: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """The transform's passes ``(kind, stride, m)``, innermost attribute first: runs of adjacent
    two-valued attributes in butterflies of 8 points (then 4, 2; kind = points), every other
    attribute (m > 2) a mode product (kind 0); one-valued attributes need none."""
    st = _strides(shape)
    out: list[tuple[int, int, int]] = []
    a = len(shape) - 1
    while a >= 0:
        if shape[a] == 2:
            g = 1
            while g < 3 and a - g >= 0 and shape[a - g] == 2:
                g += 1
            out.append((1 << g, st[a], 2))
            a -= g
        else:
            if shape[a] > 2:
                out.append((0, st[a], shape[a]))
            a -= 1
    return out


# Operations per cell visited by a pass, fitted to the kernels' times against the tables'
# operator (:func:`knorm.body.marginal.plan_ops`'s units) on twelve marginal workloads (2- and
# 3-way, binary and categorical, 256 to 65,536 cells): a butterfly pass streams its cells
# through memory (about three of the tables' contiguous adds a cell), a mode product of m
# values costs about 3·m (``scripts/engine_profile.py --operators`` measures both).
PASS_COST = 3.0


def spectral_cost(structure: MarginalStructure, r: int) -> float:
    """Operations of one product: ŝ from v (:func:`~knorm.body.marginal.lift_ops`), clearing the cells (n) and the passes
    over their live blocks (``PASS_COST`` a cell per butterfly pass, ``PASS_COST·m`` per cell
    of a mode product)."""
    pos = spectrum(structure)
    cells = sum(len(_live_blocks(pos, (k or m) * st)) * (k or m) * st * (PASS_COST if k else PASS_COST * m)
                for k, st, m in _passes(structure.shape))
    return lift_ops(structure, r, False) + structure.cells + cells


def spectral_weights(structure: MarginalStructure, W: NDArray[np.float64]) -> NDArray[np.float64]:
    """``A`` (``r_Φ × k``) with ``Mᵀ W = Φᵀ A`` for the structure's matrix M (rows of its tables ×
    cells) and ``W`` (rows × k): Φ's rows are the spectrum's product vectors (:func:`spectrum`'s order).

    Per clique C the block ``W_C`` (C's table × k) is taken into C's spectrum by the inverse
    bases ``H_i⁻¹ = diag(1/‖h_a‖²)·H_iᵀ`` along its attributes; ``A`` sums the cliques'
    blocks at their spectral positions."""
    shape, cliques = structure.shape, structure.cliques
    W = np.asarray(W, dtype=np.float64)
    k = W.shape[1]
    bases = [attribute_basis(m) for m in shape]
    inverse = [H.T / np.einsum("ij,ij->j", H, H)[:, None] for H in bases]
    pos = spectrum(structure)
    A = np.zeros((len(pos), k))
    off = 0
    for c in cliques:
        sizes = [shape[a] for a in c]
        T = W[off:off + math.prod(sizes)].reshape(*sizes, k)
        off += math.prod(sizes)
        for axis, a in enumerate(c):
            T = np.moveaxis(np.tensordot(inverse[a], T, axes=([1], [axis])), 0, axis)
        at = np.searchsorted(pos, _clique_positions(shape, c))
        np.add.at(A, at, T.reshape(len(at), k))
    return A


def spectrum_norms(structure: MarginalStructure) -> NDArray[np.float64]:
    """``‖φ_a‖²`` of the spectrum's product vectors (Φ's rows are orthogonal: ``ΦΦᵀ`` is this diagonal)."""
    shape = structure.shape
    pos = spectrum(structure)
    out = np.ones(len(pos))
    for a, st in enumerate(_strides(shape)):
        H = attribute_basis(shape[a])
        out *= np.einsum("ij,ij->j", H, H)[(pos // st) % shape[a]]
    return out


def _layout(structure: MarginalStructure) -> tuple:
    """``S[1:]`` of the kernels' layout: the spectrum's positions, the passes, their bases and
    their live blocks (see ``knorm.body._spectral``)."""
    pos = spectrum(structure)
    passes = _passes(structure.shape)
    mats = [attribute_basis(m).reshape(-1) if k == 0 else np.zeros(0) for k, _, m in passes]
    hptr = np.zeros(len(passes) + 1, np.int64)
    np.cumsum([len(h) for h in mats], out=hptr[1:])
    live = [_live_blocks(pos, (k or m) * st) for k, st, m in passes]
    bptr = np.zeros(len(passes) + 1, np.int64)
    np.cumsum([len(b) for b in live], out=bptr[1:])
    i64 = np.int64
    return (pos.astype(i64), np.array(passes, i64).reshape(len(passes), 3), hptr,
            np.concatenate(mats) if mats else np.zeros(0), bptr,
            np.concatenate(live).astype(i64) if live else np.zeros(0, i64))


def spectral_operator(structure: MarginalStructure, W: NDArray[np.float64] | None,
                      lift: tuple | None = None) -> tuple:
    """The kernel layout ``S`` of ``knorm.body._spectral`` for ``Fᵀ(W v)`` (W: rows of the
    marginal tables × r, :meth:`~knorm.body.marginal.MarginalMatch.weights`; ``ŝ[pos] = A v``
    with ``A`` of :func:`spectral_weights`), or, W None, for ``ŝ`` made from v by ``lift`` (the
    characters' coordinates, :func:`knorm.body.characters.character_coordinates`); then :func:`_layout`."""
    if (W is None) == (lift is None):
        raise ValueError("spectral_operator: give W or lift, not both")
    if lift is None:
        assert W is not None
        A = np.ascontiguousarray(spectral_weights(structure, W))
        f0 = np.zeros((0, A.shape[1]))
        lift = (A, (f0, f0), np.zeros(0))
    return (lift,) + _layout(structure)


def transform_rows(structure: MarginalStructure, A: NDArray[np.float64]) -> NDArray[np.float64]:
    """``AᵀΦ`` (``k × cells``) for ``A`` (``r_Φ × k``): row i is the transform of A's column i,
    ``n·(passes)`` operations each instead of ``r_Φ·n``."""
    A = np.asarray(A, dtype=np.float64)
    out = np.empty((A.shape[1], structure.cells))
    spectral_rows(_layout(structure), np.ascontiguousarray(A.T), out)
    return out


def span_of(match: MarginalMatch, e: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(U, S)`` of the thin SVD of ``F·2^-e`` for the marginal workload ``F = scale·M[rows]``,
    without F: ``F = L·Φ`` with ``L = scale·G[rows]`` (d × r_Φ, ``Mᵀ = ΦᵀGᵀ`` by
    :func:`spectral_weights`) and Φ's rows orthogonal (norms² N), so F's left singular
    vectors and values are those of ``L·diag(√N)``: an SVD of d × r_Φ instead of a QR of
    F's n × d transpose."""
    st = match.structure
    G = spectral_weights(st, np.eye(st.rows)).T  # rows of M × r_Φ
    live = match.rows >= 0
    L = np.zeros((len(match.rows), G.shape[1]))
    L[live] = G[match.rows[live]] * np.ldexp(match.scale, -e)
    U, S, _ = thin_svd(L * np.sqrt(spectrum_norms(st))[None, :])
    return U, S


def span_rows(match: MarginalMatch, U: NDArray[np.float64], e: int) -> NDArray[np.float64]:
    """``Uᵀ·F·2^-e`` (k × cells) for the marginal workload F of ``match``: the transforms of
    ``Lᵀ U 2^-e`` (:func:`transform_rows`), without F."""
    return transform_rows(match.structure, spectral_weights(match.structure, match.weights(np.ldexp(U, -e))))
