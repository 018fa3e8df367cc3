"""Numba kernel: ``Fᵀv`` for a marginal workload by a product transform (docs/design.md §2.2).

F's rows are marginal tables over a product domain (sizes ``m_1 … m_k``, cells in C order).
Per attribute a basis ``H_a`` (``m_a × m_a``, column 0 constant: Hadamard ``[[1, 1], [1, -1]]``
for two values, Helmert contrasts otherwise) gives the product basis ``H = H_1 ⊗ … ⊗ H_k`` of
the cell space, in which F's row space is spanned by the ``r_Φ`` product vectors whose
non-constant factors lie inside one clique. So ``Fᵀ(W v) = H·ŝ`` with the sparse spectrum
``ŝ[pos] = A v`` (``A``: ``r_Φ × r``, made once per body by
:func:`knorm.body.spectral.spectral_operator`): ``r_Φ·r`` for ``A v``, then one pass over the
cells per three adjacent two-valued attributes (an 8-point Walsh–Hadamard butterfly held in
registers) and per other attribute (``n·m_a``): about ``n·log₂ n / 3`` for binary domains,
against ``n·r`` for the dense product.

The spectrum is sparse and the passes run from the innermost attribute outwards, so a pass
visits only its blocks (of points·stride cells, nested in the next pass's) that hold a
spectral position: the others are still zero (the first passes of 3-way marginals of 16
binary attributes touch 5% and 17% of the cells).

Layout ``S`` (a tuple; the oracle holds ``()`` in its slot when the transform is not used):
``(A, pos, passes, hptr, hval, bptr, blocks)``; ``passes[p] = (kind, stride, m)``: kind 2, 4
or 8 a Walsh–Hadamard butterfly of that many points at that stride, kind 0 the mode product
of ``H = hval[hptr[p]:hptr[p+1]]`` (``m × m``, row-major) at that stride; pass p visits the
blocks ``blocks[bptr[p]:bptr[p+1]]``.
"""

import numpy as np

from .._jit import kernel

_FM = {"reassoc", "contract"}


@kernel(fastmath=_FM)
def _wht8(x, st, blocks):
    """In place: the 8-point Walsh–Hadamard transform over points ``st`` apart, in the blocks
    (of 8·st cells) listed."""
    for blk in blocks:
        o = blk * 8 * st
        for i in range(o, o + st):
            x0, x1, x2, x3 = x[i], x[i + st], x[i + 2 * st], x[i + 3 * st]
            x4, x5, x6, x7 = x[i + 4 * st], x[i + 5 * st], x[i + 6 * st], x[i + 7 * st]
            a0, a1, a2, a3 = x0 + x1, x0 - x1, x2 + x3, x2 - x3
            a4, a5, a6, a7 = x4 + x5, x4 - x5, x6 + x7, x6 - x7
            b0, b1, b2, b3 = a0 + a2, a1 + a3, a0 - a2, a1 - a3
            b4, b5, b6, b7 = a4 + a6, a5 + a7, a4 - a6, a5 - a7
            x[i], x[i + st], x[i + 2 * st], x[i + 3 * st] = b0 + b4, b1 + b5, b2 + b6, b3 + b7
            x[i + 4 * st], x[i + 5 * st], x[i + 6 * st], x[i + 7 * st] = b0 - b4, b1 - b5, b2 - b6, b3 - b7


@kernel(fastmath=_FM)
def _wht4(x, st, blocks):
    """In place: the 4-point Walsh–Hadamard transform over points ``st`` apart, in the blocks
    (of 4·st cells) listed."""
    for blk in blocks:
        o = blk * 4 * st
        for i in range(o, o + st):
            x0, x1, x2, x3 = x[i], x[i + st], x[i + 2 * st], x[i + 3 * st]
            a0, a1, a2, a3 = x0 + x1, x0 - x1, x2 + x3, x2 - x3
            x[i], x[i + st], x[i + 2 * st], x[i + 3 * st] = a0 + a2, a1 + a3, a0 - a2, a1 - a3


@kernel(fastmath=_FM)
def _wht2(x, st, blocks):
    """In place: the 2-point Walsh–Hadamard transform over points ``st`` apart, in the blocks
    (of 2·st cells) listed."""
    for blk in blocks:
        o = blk * 2 * st
        for i in range(o, o + st):
            a, b = x[i], x[i + st]
            x[i], x[i + st] = a + b, a - b


@kernel(fastmath=_FM)
def _mode(x, m, st, h, blocks, tmp):
    """In place: ``x ← (I ⊗ H ⊗ I) x`` along an attribute of size m and stride st, in the
    blocks (of m·st cells) listed (``H``: ``m × m``, row-major in h; ``tmp``: m·st scratch)."""
    block = m * st
    for blk in blocks:
        o = blk * block
        for k in range(block):
            tmp[k] = 0.0
        for b in range(m):
            row = b * st
            for c in range(m):
                hbc = h[b * m + c]
                if hbc != 0.0:
                    src = o + c * st
                    for i in range(st):
                        tmp[row + i] += hbc * x[src + i]
        for k in range(block):
            x[o + k] = tmp[k]


@kernel(fastmath=_FM)
def _transform(L, out):
    """In place: ``out ← H·out`` by the passes of the layout ``L = S[1:]`` (see the module docstring)."""
    pos, passes, hptr, hval, bptr, blocks = L
    big = 0
    for p in range(passes.shape[0]):
        if passes[p, 0] == 0:
            big = max(big, passes[p, 1] * passes[p, 2])
    tmp = np.empty(big)
    for p in range(passes.shape[0]):
        kind, st = passes[p, 0], passes[p, 1]
        live = blocks[bptr[p]:bptr[p + 1]]
        if kind == 8:
            _wht8(out, st, live)
        elif kind == 4:
            _wht4(out, st, live)
        elif kind == 2:
            _wht2(out, st, live)
        else:
            _mode(out, passes[p, 2], st, hval[hptr[p]:hptr[p + 1]], live, tmp)


@kernel(fastmath=_FM)
def rotate_t(rot, v, out):
    """``out = Rᵀv`` for the butterfly rotation ``rot = (c, s)`` (``levels × r``; see
    :func:`knorm.body.spectral.butterfly`): ``R = R_{L−1}⋯R_0``, level l turning each pair
    ``(i, i + 2^l)`` (bit l of i clear, ``i + 2^l < r``) by ``[[c, −s], [s, c]]``; so ``Rᵀ``
    is E's turn back, then the levels from the last, each turned back. ``r·levels`` pairs of four products,
    where a dense ``r × r`` map costs ``r²``."""
    c, s = rot
    r = v.shape[0]
    for i in range(r):
        out[i] = v[i]
    if c.shape[0] == 2 and r % 4 == 1 and r > 1:  # E first (knorm.body.characters.butterfly)
        a, b = out[r - 2], out[r - 1]
        out[r - 2] = c[0, r - 1] * a + s[0, r - 1] * b
        out[r - 1] = c[0, r - 1] * b - s[0, r - 1] * a
    for lv in range(c.shape[0] - 1, -1, -1):
        h = 1 << lv
        cl, sl = c[lv], s[lv]
        for i in range(r - h):
            if (i & h) == 0:
                a, b = out[i], out[i + h]
                out[i] = cl[i] * a + sl[i] * b
                out[i + h] = cl[i] * b - sl[i] * a


@kernel(fastmath=_FM)
def lift(L, v, out, w):
    """``out[k] = g_k·(Rᵀv)_k`` when the map is the characters' (``L = (Ad, rot, g)`` with ``Ad``
    empty), else ``out = Ad·v`` (a dense ``k × r`` map); ``w``: r scratch. The first step of both
    structured products: the oracle's dual vector taken to the workload's spectrum (or tables)."""
    Ad, rot, g = L
    rs, r = Ad.shape
    if rs == 0:
        rotate_t(rot, v, w)
        for k in range(g.shape[0]):
            out[k] = g[k] * w[k]
    else:
        for k in range(rs):
            row = Ad[k]
            s = 0.0
            for i in range(r):
                s += row[i] * v[i]
            out[k] = s


@kernel(fastmath=_FM)
def spectral_dots(S, v, out):
    """``out = H·ŝ`` with ``ŝ[pos] =`` :func:`lift` of v (see the module docstring): ``Fᵀ(W v)``
    over all cells."""
    pos = S[1]
    out[:] = 0.0
    sh = np.empty(pos.shape[0] + v.shape[0])
    lift(S[0], v, sh[:pos.shape[0]], sh[pos.shape[0]:])
    for k in range(pos.shape[0]):
        out[pos[k]] = sh[k]
    _transform(S[1:], out)


@kernel(entry=True)
def spectral_rows(L, At, out):
    """``out[i] = H·ŝ_i`` with ``ŝ_i[pos] = At[i]``: the rows of ``AᵀΦ`` (layout ``L = S[1:]``)."""
    pos = L[0]
    for i in range(At.shape[0]):
        row = out[i]
        row[:] = 0.0
        for k in range(pos.shape[0]):
            row[pos[k]] = At[i, k]
        _transform(L, row)
