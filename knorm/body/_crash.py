"""Numba kernel: a crash basis of the gauge LP, dual feasible and nonsingular (docs/design.md §2.4).

From λ = 0 the crash walks inside the polar ``{λ : f_jᵀλ <= cp_j, -f_jᵀλ <= cm_j}`` (``{|Fᵀλ| <= 1}``
for unit costs) to a vertex: r steps, each along a direction projected off the normals already
tight, to the first column it meets. A step's choice tests every column (``f_jᵀv`` and
``f_jᵀλ``): column by column, or, where F is known by its structure
(:func:`~knorm.body._columns.structured`), by two whole products ``Fᵀv``, ``Fᵀλ`` that screen
the columns, the few that could be chosen then tested again column by column
(:func:`_pick_screened`): the same choice, to the bit, at the products' cost (rank 697: a
crash in about a second instead of a minute).
"""

import math

import numpy as np

from .._jit import kernel
from ._columns import _all_dots, _col_dot, _col_norm2, _column, _dot, _ncols, structured

CRASH_TOL = 1e-12    # crash: columns with |f_j·v| <= CRASH_TOL·‖f_j‖ never block the walk along v
# The screen's margins: a column whose screened |f_jᵀv| is at most SCREEN_NEAR·‖f_j‖, or whose
# screened step is within SCREEN_WINDOW·(1 + min) of the least, is tested again by its own dot
# products. The products' rounding differs from the column dots' by about 1e-16·√r·‖f_j‖ (a few
# 1e-15 at rank 697): far inside both margins, so every column the exact test could choose, or
# could judge otherwise at CRASH_TOL, is among those tested again.
SCREEN_NEAR = 1e-6
SCREEN_WINDOW = 1e-6


@kernel()
def _next_rand(state):
    """xorshift64*: deterministic pseudo-random doubles in [-1, 1) for the crash walk."""
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    v = (x * np.uint64(2685821657736338717)) >> np.uint64(11)
    return float(v) * (2.0 / 9007199254740992.0) - 1.0


@kernel()
def _project_off(Q, m, v):
    """``v`` projected off Q's first m (orthonormal) columns, the tight normals: twice (Gram–Schmidt)."""
    r = v.shape[0]
    for rep in range(2):
        for k in range(m):
            s = 0.0
            for i in range(r):
                s += Q[i, k] * v[i]
            for i in range(r):
                v[i] -= s * Q[i, k]


@kernel()
def _step(j, fv, fl, cp, cm):
    """How far λ may move along v before column j (``fv = f_jᵀv``, ``fl = f_jᵀλ``) becomes tight (>= 0)."""
    if cp.shape[0] == 0:
        st = (1.0 - fl) / fv if fv > 0.0 else (1.0 + fl) / -fv
    else:
        st = (cp[j] - fl) / fv if fv > 0.0 else (cm[j] + fl) / -fv
    return 0.0 if st < 0.0 else st


@kernel()
def _consider(j, fv, fl, fnj, cp, cm, best, smin, bfv):
    """The crash's choice after column j, in column order: the least step, ties (within 1e-12)
    to the largest ``|f_jᵀv|``; columns with ``|f_jᵀv| <= CRASH_TOL·‖f_j‖`` never block."""
    if not abs(fv) > CRASH_TOL * fnj:
        return best, smin, bfv
    st = _step(j, fv, fl, cp, cm)
    if st < smin - 1e-12 * (1.0 + smin):
        return j, st, fv
    if st <= smin + 1e-12 * (1.0 + smin) and abs(fv) > abs(bfv):
        return j, min(smin, st), fv
    return best, smin, bfv


@kernel()
def _pick_screened(A, v, lam, fn, fvs, fls, cp, cm):
    """:func:`_consider` over the columns that the products ``fvs = Fᵀv``, ``fls = Fᵀλ`` do not rule
    out, each with its own dot products, in column order: the choice of every column tested
    column by column (a column ruled out has a step more than SCREEN_WINDOW above the least,
    so it never ends chosen, and a column chosen before it is replaced by the first one within
    the window, as it would be when tested alone)."""
    n = fvs.shape[0]
    lo = np.inf
    for j in range(n):
        if abs(fvs[j]) > SCREEN_NEAR * fn[j]:
            lo = min(lo, _step(j, fvs[j], fls[j], cp, cm))
    cut = lo + SCREEN_WINDOW * (1.0 + lo)
    best, smin, bfv = -1, np.inf, 0.0
    for j in range(n):
        if abs(fvs[j]) <= SCREEN_NEAR * fn[j] or _step(j, fvs[j], fls[j], cp, cm) <= cut:
            best, smin, bfv = _consider(j, _col_dot(A, j, v), _col_dot(A, j, lam), fn[j], cp, cm, best, smin, bfv)
    return best, smin, bfv


@kernel(entry=True)
def crash(A, direction, basis, seed, cp, cm):
    """A dual feasible, nonsingular basis: walk inside ``{λ : f_jᵀλ <= cp_j, -f_jᵀλ <= cm_j}``
    (the polar ``{|Fᵀλ| <= 1}`` for unit costs).

    From λ = 0 move along ``direction`` (projected off the normals already tight) until a
    new constraint ``|f_iᵀλ| = 1`` becomes tight; r steps give a vertex whose tight columns
    (with their signs) form the basis. Used to repair a singular basis (direction: the
    old λ). Returns False if F has no r independent columns at the crash tolerance.
    """
    n, r = _ncols(A), basis.shape[0]
    screened = structured(A)
    fvs = np.empty(n if screened else 0)
    fls = np.empty(n if screened else 0)
    Q = np.zeros((r, r))
    lam = np.zeros(r)
    v0 = direction.copy()
    v = np.empty(r)
    rs = np.empty(1, np.uint64)
    rs[0] = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)
    fn = np.empty(n)
    for j in range(n):
        fn[j] = math.sqrt(_col_norm2(A, j))
    for m in range(r):
        for attempt in range(4):
            for i in range(r):
                v[i] = v0[i]
            _project_off(Q, m, v)
            vn = math.sqrt(_dot(v, v))
            v0n = math.sqrt(_dot(v0, v0))
            if vn > 1e-8 * v0n and vn > 0.0:
                break
            for i in range(r):
                v0[i] = _next_rand(rs)
        if not vn > 0.0:
            return False
        for i in range(r):
            v[i] /= vn
        if screened:
            _all_dots(A, v, fvs)
            _all_dots(A, lam, fls)
            best, smin, bfv = _pick_screened(A, v, lam, fn, fvs, fls, cp, cm)
        else:
            best, smin, bfv = -1, np.inf, 0.0
            for j in range(n):
                best, smin, bfv = _consider(j, _col_dot(A, j, v), _col_dot(A, j, lam), fn[j], cp, cm, best, smin, bfv)
        if best < 0:
            return False
        for i in range(r):
            lam[i] += smin * v[i]
        basis[m] = best if bfv > 0.0 else best + n
        _column(A, best, 1.0, v)
        _project_off(Q, m, v)
        qn = math.sqrt(_dot(v, v))
        if not qn > 0.0:
            return False
        for i in range(r):
            Q[i, m] = v[i] / qn
        if m + 1 < r:   # next direction: the original one (projected next round) or random
            for i in range(r):
                v0[i] = direction[i]
    return True


