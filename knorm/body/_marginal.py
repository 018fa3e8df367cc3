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
``(Wᵀ, mem_off, mem_group, mem_outptr, mem_outoff, mem_inmap, g_vptr, g_nout, codes, oo_idx, B)``.
"""

import numpy as np

from .._jit import kernel

_FM = {"reassoc", "contract"}


@kernel(fastmath=_FM)
def marginal_dots(M, v, out):
    """``out = Fᵀ(W v)`` for the marginal operator ``M`` (see the module docstring)."""
    Wt, mem_off, mem_group, mem_outptr, mem_outoff, mem_inmap, g_vptr, g_nout, codes, oo_idx, B = M
    r, d = Wt.shape
    t = np.zeros(d)
    for i in range(r):
        vi = v[i]
        row = Wt[i]
        for k in range(d):
            t[k] += vi * row[k]
    V = np.zeros(g_vptr[g_vptr.shape[0] - 1])
    for m in range(mem_off.shape[0]):
        g = mem_group[m]
        base = g_vptr[g]
        inmap = mem_inmap[m]
        for c in range(g_nout[g]):
            tt = t[mem_off[m] + mem_outoff[mem_outptr[m] + c]:]
            seg = V[base + c * B: base + (c + 1) * B]
            for i in range(B):
                seg[i] += tt[inmap[i]]
    ngroups = g_nout.shape[0]
    nblocks = codes.shape[1]
    noo = oo_idx.shape[0]
    for o in range(nblocks):
        s = 0.0
        for c in range(noo):
            s += t[oo_idx[c, o]]
        seg = out[o * B: (o + 1) * B]
        for i in range(B):
            seg[i] = s
        # the groups' inner vectors four at a time: one pass over the block per four
        g = 0
        while g + 4 <= ngroups:
            a = V[g_vptr[g] + codes[g, o] * B:]
            b = V[g_vptr[g + 1] + codes[g + 1, o] * B:]
            c_ = V[g_vptr[g + 2] + codes[g + 2, o] * B:]
            e = V[g_vptr[g + 3] + codes[g + 3, o] * B:]
            for i in range(B):
                seg[i] = seg[i] + a[i] + b[i] + c_[i] + e[i]
            g += 4
        while g < ngroups:
            a = V[g_vptr[g] + codes[g, o] * B:]
            for i in range(B):
                seg[i] += a[i]
            g += 1
