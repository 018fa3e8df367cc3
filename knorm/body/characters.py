"""The oracle's coordinates for a marginal workload: its characters, turned by a fixed rotation
(docs/design.md §2.2).

A full-rank marginal workload (rank ``r = r_Φ``) has ``F·2^-e = L·Φ`` with Φ's rows the
spectrum's product vectors (:mod:`knorm.body.spectral`), so a column's coefficients ``h_j``
(Φ's column j) are coordinates of the span. The oracle takes

    ``z = R·diag(g)·h``,  ``g_k = 2^-round(log₂(‖φ_k‖/√n))``,

R a butterfly rotation (:func:`butterfly`: ``ROTATION_LEVELS`` levels of r/2 plane rotations
at fixed angles). Then a pivot's dual vector v reaches the spectrum as ``ŝ = g ∘ Rᵀv`` in
about ``3r`` operations a level, where the span's orthonormal coordinates need a dense ``r × r``
map (the transform) or ``rows × r`` (the tables). The columns ``diag(g)·Φ`` have orthogonal
rows of norms within √2 of √n (entries of order one, as the span's coordinates scaled
per row): the basis matrices are as well conditioned as in the span's
whitened coordinates. The rotation is what keeps the ratio tests' ties broken: in Φ's own
±1/integer coordinates B⁻¹ is often exact and mathematically tied columns tie exactly, which
makes the parametric ray walk cycle (design §2.2); R's irrational entries leave only rounding
ties, as the orthonormal span coordinates do. The angles are fixed (public, the same in every
process): the coordinates, hence every seeded walk, are reproducible bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from .marginal import MarginalMatch, MarginalStructure, owner_of
from .marginal_ops import column_counts
from .spectral import _strides, attribute_basis, spectral_weights, spectrum, spectrum_norms, transform_rows

__all__ = ["butterfly", "rotate", "character_coordinates", "column_norm_max"]

ROTATION_SEED = 20261202  # the butterfly's angles: public constants, not noise
ROTATION_LEVELS = 2  # enough to make every basis entry irrational (the ties' cure); each level costs ~r


def butterfly(r: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(c, s)`` (levels × r) of the rotation ``R = E·R_{L−1}⋯R_0``: level l turns each pair
    ``(i, i + 2^l)`` with bit l of i clear and ``i + 2^l < r`` by ``[[c_i, −s_i], [s_i, c_i]]``
    (angles uniform in [0, 2π) from ``ROTATION_SEED``). The two levels leave index r − 1 alone when
    ``r ≡ 1 (mod 4)``: E then turns the pair ``(r − 2, r − 1)`` by the angle in level 0's slot r − 1
    (unused there), so every coordinate is mixed; E is the identity otherwise. Other entries unused."""
    levels = max(1, min(ROTATION_LEVELS, math.ceil(math.log2(max(r, 2)))))
    theta = np.random.default_rng(ROTATION_SEED).uniform(0.0, 2.0 * np.pi, (levels, r))
    return np.ascontiguousarray(np.cos(theta)), np.ascontiguousarray(np.sin(theta))


def _pairs(r: int, lv: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    i = np.arange(r)
    h = 1 << lv
    i = i[((i & h) == 0) & (i + h < r)]
    return i, i + h


def rotate(rot: tuple[NDArray[np.float64], NDArray[np.float64]], X: NDArray[np.float64]) -> NDArray[np.float64]:
    """``R·X`` for a ``(r, k)`` array X, in place, 4,096 columns at a time (the forward rotation; the
    kernels apply ``Rᵀ``, :func:`knorm.body._spectral.rotate_t`)."""
    c, s = rot
    r = X.shape[0]
    pairs = [_pairs(r, lv) for lv in range(c.shape[0])]
    ci_, si_ = [c[lv, i][:, None] for lv, (i, _) in enumerate(pairs)], [s[lv, i][:, None] for lv, (i, _) in enumerate(pairs)]
    if _extra(r, c.shape[0]):
        pairs.append((np.array([r - 2]), np.array([r - 1])))
        ci_.append(c[0, r - 1:r][:, None])
        si_.append(s[0, r - 1:r][:, None])
    for j0 in range(0, X.shape[1], 4096):
        Xc = X[:, j0:j0 + 4096]
        for (i, j), ci, si in zip(pairs, ci_, si_):
            a, b = Xc[i], Xc[j]
            Xc[i] = ci * a - si * b
            Xc[j] = si * a + ci * b
    return X


def _extra(r: int, levels: int) -> bool:
    """Whether the rotation ends with E (:func:`butterfly`): index r − 1 unpaired by two levels."""
    return levels == 2 and r % 4 == 1 and r > 1


def column_norm_max(match: MarginalMatch, e: int) -> float:
    """``max_j ‖f_j‖₂·2^-e`` for the marginal workload of ``match``, from its structure: column j's
    entries are ``scale`` in the rows that contain cell j, so ``‖f_j‖² = scale²·count_j``
    (:func:`~knorm.body.marginal_ops.column_counts`, no F)."""
    return float(np.sqrt(column_counts(match).max())) * abs(float(np.ldexp(match.scale, -e)))


def _tables(structure: MarginalStructure, pos: NDArray[np.int64], r: int) -> tuple:
    """The tables' part of ``into`` (:func:`knorm.body.marginal.marginal_operator`): each spectral
    index k goes to the smallest table C holding its support (:func:`~knorm.body.marginal.owner_of`), where it is the vector
    ``ψ_k(x_C) = Π_{a∈C} H_a[x_a, k_a]`` over C's table (C order), so ``t_C = Ψ_C·ŝ_C``: ``perm``
    lists the indices clique by clique, ``tab`` row ``(offset in t, table size p, first of perm,
    count c, offset in psi)`` per clique, psi its ψ_k one after another (Ψ_C column by column):
    ``Σ_C p·c`` operations in all (:func:`~knorm.body.marginal.spread_ops`), in runs of p contiguous ones."""
    shape, cliques = structure.shape, structure.cliques
    st = _strides(shape)
    digits = np.array([(pos // st[a]) % shape[a] for a in range(len(shape))]).reshape(len(shape), len(pos))
    offs = np.cumsum([0] + [math.prod(shape[a] for a in c) for c in cliques])
    bases = [attribute_basis(m) for m in shape]
    owner = np.array([owner_of(structure, set(np.flatnonzero(digits[:, k]).tolist())) for k in range(len(pos))],
                     np.int64).reshape(len(pos))
    perm = np.argsort(owner, kind="stable").astype(np.int64)
    tab, mats = [], []
    first = at = 0
    for ci, c in enumerate(cliques):  # every table, those without characters of their own too (t_C = 0)
        ks = np.flatnonzero(owner == ci)
        for k in ks:
            psi = np.ones(1)
            for a in c:
                psi = np.multiply.outer(psi, bases[a][:, digits[a, k]]).reshape(-1)
            mats.append(psi)
        size = math.prod(shape[a] for a in c)
        tab.append((int(offs[ci]), size, first, len(ks), at))
        first += len(ks)
        at += size * len(ks)
    return (perm, np.array(tab, np.int64).reshape(len(tab), 5), np.concatenate(mats) if mats else np.zeros(0),
            np.array([structure.rows, 2 * r], np.int64))


def character_coordinates(match: MarginalMatch, e: int, U: NDArray[np.float64], tables: bool = True) -> tuple | None:
    """The oracle's character coordinates for the marginal workload ``F = match``, or None where F's
    rank ``r`` (U's columns, the span's orthonormal basis) is below ``r_Φ`` (a partial table):
    ``(Mc, Fz, lift, into)`` with ``z = Mc·Uᵀ(y·2^-e)`` for y in the span, ``Fz = R·diag(g)·Φ`` the
    columns (r × n), ``lift`` the spectral operator's first step and ``into`` the tables' (None unless
    ``tables``; the layouts of :func:`~knorm.body.spectral.spectral_operator` and
    :func:`~knorm.body.marginal.marginal_operator`)."""
    st = match.structure
    pos = spectrum(st)
    r = U.shape[1]
    if len(pos) != r:
        return None
    g = np.ldexp(1.0, -np.round(0.5 * np.log2(spectrum_norms(st) / st.cells)).astype(np.int64))
    rot = butterfly(r)
    # h_j = (UᵀL)⁻¹·(Uᵀf_j): the span's coordinates of a column to its characters'
    # UᵀL = (Gᵀ·scale·PᵀU·2^-e)ᵀ: the spectral weights of U's columns (no rows × rows identity)
    Mc = rotate(rot, g[:, None] * np.linalg.inv(spectral_weights(st, match.weights(np.ldexp(U, -e))).T))
    Fz = rotate(rot, g[:, None] * transform_rows(st, np.eye(r)))
    f0 = np.zeros((0, r))
    lift = (f0, rot, g)
    return Mc, Fz, lift, (lift,) + _tables(st, pos, r) if tables else None
