"""Numba kernel: ``Fᵀv`` for a marginal workload F without touching F (docs/design.md §2.2).

F's rows are marginal tables: for each clique C of attributes (in row order), one row per
value combination of C, the indicator of the cells (C-order product domain) that match it.
The oracle's columns are ``Wᵀf_j`` (its coordinates are ``z = Wᵀy``), so the pivot's
product is ``Fᵀ(W v)``: ``t = W v`` (d·r), then ``(Fᵀt)_x = Σ_C t[row_C(x_C)]``, a sum of
broadcast tables, computed by blocks of cells that share their first (outer) attributes:
each block is a sum of a few precomputed inner vectors (one per group of cliques with the
same outer attributes) plus a scalar (cliques of outer attributes only). The operator
(:func:`knorm.body.marginal.marginal_operator`) chooses the split; cost ≈ d·r + n·(groups)
instead of n·r.

Operator layout ``M`` (a tuple, empty arrays when F is not a marginal workload):
``(into, mem_off, mem_group, mem_outptr, mem_outoff, mem_inmap, g_vptr, g_nout, codes, oo_idx, B)``;
``into = (lift, perm, tab, psi, sizes)``: how t is made from v (:func:`marginal_tables`;
``sizes = (len(t), scratch)``).
"""

import numpy as np

from .._jit import kernel
from ._spectral import lift

_FM = {"reassoc", "contract"}


@kernel(fastmath=_FM)
def marginal_tables(M, v, t, V, sh):
    """``t = W v`` (the query-space vector) and the groups' inner vectors ``V`` (gathers
    from t): what every block of :func:`marginal_block` reads. ``sh``: scratch.

    In the characters' coordinates (``M[0]``'s dense map empty) t comes from the spectrum: the
    lifted ``ŝ`` (:func:`~knorm.body._spectral.lift`) spread over its tables, ``t_C = Ψ_C·ŝ_C``
    (Ψ_C: the characters of one clique's table that hold their support there, on its cells; every
    table is one, all its rows are written); else ``t = W v`` by the dense map (``d·r``)."""
    L, perm, tab, psi = M[0][0], M[0][1], M[0][2], M[0][3]
    mem_off, mem_group, mem_outptr, mem_outoff, mem_inmap, g_vptr, g_nout = M[1], M[2], M[3], M[4], M[5], M[6], M[7]
    B = M[10]
    r = v.shape[0]
    if L[0].shape[0] == 0:
        lift(L, v, sh[:r], sh[r:2 * r])
        for c in range(tab.shape[0]):
            off, p, k0, nc, at = tab[c, 0], tab[c, 1], tab[c, 2], tab[c, 3], tab[c, 4]
            tt = t[off:off + p]
            if nc == 0:
                tt[:] = 0.0
                continue
            w = sh[perm[k0]]
            col = psi[at:at + p]
            for i in range(p):
                tt[i] = w * col[i]
            for k in range(1, nc):
                w = sh[perm[k0 + k]]
                col = psi[at + k * p:at + (k + 1) * p]
                for i in range(p):
                    tt[i] += w * col[i]
    else:
        lift(L, v, t, sh[:r])
    V[:] = 0.0
    for m in range(mem_off.shape[0]):
        g = mem_group[m]
        base = g_vptr[g]
        inmap = mem_inmap[m]
        for c in range(g_nout[g]):
            tt = t[mem_off[m] + mem_outoff[mem_outptr[m] + c]:]
            seg = V[base + c * B: base + (c + 1) * B]
            for i in range(B):
                seg[i] += tt[inmap[i]]


@kernel(fastmath=_FM)
def marginal_block(M, t, V, o, seg):
    """``seg`` = block o of ``Fᵀ(W v)`` (cells ``o·B … (o+1)·B − 1``) from :func:`marginal_tables`'
    ``t`` and ``V``: the outer-only cliques' scalar plus one inner vector per group, added
    four (then two, then one) groups per pass over the block."""
    g_vptr, codes, oo_idx, B = M[6], M[8], M[9], M[10]
    ngroups = g_vptr.shape[0] - 1
    s = 0.0
    for c in range(oo_idx.shape[0]):
        s += t[oo_idx[c, o]]
    g = 0
    if ngroups >= 4:  # the first pass writes the block
        a = V[g_vptr[0] + codes[0, o] * B:]
        b = V[g_vptr[1] + codes[1, o] * B:]
        c_ = V[g_vptr[2] + codes[2, o] * B:]
        e = V[g_vptr[3] + codes[3, o] * B:]
        for i in range(B):
            seg[i] = s + a[i] + b[i] + c_[i] + e[i]
        g = 4
    else:
        for i in range(B):
            seg[i] = s
    while g + 4 <= ngroups:
        a = V[g_vptr[g] + codes[g, o] * B:]
        b = V[g_vptr[g + 1] + codes[g + 1, o] * B:]
        c_ = V[g_vptr[g + 2] + codes[g + 2, o] * B:]
        e = V[g_vptr[g + 3] + codes[g + 3, o] * B:]
        for i in range(B):
            seg[i] = seg[i] + a[i] + b[i] + c_[i] + e[i]
        g += 4
    if g + 2 <= ngroups:
        a = V[g_vptr[g] + codes[g, o] * B:]
        b = V[g_vptr[g + 1] + codes[g + 1, o] * B:]
        for i in range(B):
            seg[i] = seg[i] + a[i] + b[i]
        g += 2
    if g < ngroups:
        a = V[g_vptr[g] + codes[g, o] * B:]
        for i in range(B):
            seg[i] += a[i]


@kernel()
def marginal_scratch(M):
    """The ``(t, V, sh)`` buffers of :func:`marginal_tables` for the operator M (one allocation)."""
    sizes = M[0][4]
    nt, nv = sizes[0], M[6][M[6].shape[0] - 1]
    buf = np.empty(nt + nv + sizes[1])
    return buf[:nt], buf[nt:nt + nv], buf[nt + nv:]


@kernel()
def marginal_dots(M, v, out):
    """``out = Fᵀ(W v)`` for the marginal operator ``M`` (see the module docstring)."""
    t, V, sh = marginal_scratch(M)
    marginal_tables(M, v, t, V, sh)
    B = M[10]
    for o in range(M[8].shape[1]):
        marginal_block(M, t, V, o, out[o * B: (o + 1) * B])
