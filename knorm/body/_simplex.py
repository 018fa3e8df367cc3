"""Numba kernels of the warm-started dual simplex ("facet walk"), MATH.md §2.

The gauge LP ``min 1ᵀw  s.t. [F, -F] w = y, w >= 0`` has fixed costs and matrix, so
a dual feasible basis stays dual feasible for every right-hand side ``y``.

Data layout (all kernels):

* ``Ft``   -- ``(n, r)`` C-contiguous, row ``j`` is column ``f_j`` of a full-row-rank F.
* ``basis`` -- ``int64[r]`` column codes: ``c < n`` is ``+f_c``, ``c >= n`` is ``-f_{c-n}``.
* ``Binv`` -- ``(r, r)`` explicit inverse of the basis matrix.
* ``lam``  -- ``λ = B⁻ᵀ 1``, the outward normal of the current facet (``λ·y = ‖y‖_K``
  on its cone).
* ``g``    -- ``Fᵀλ``; reduced costs are ``1 - g_j`` (for ``+f_j``) and ``1 + g_j``.
* ``ctr``  -- ``int64[4]``: pivots since refactorisation, total pivots,
  refactorisations, Bland (anti-cycling) activations.

Every kernel returns a status: ``OK`` or a negative failure code; the Python layer
turns failures into clear exceptions.
"""

import math

import numpy as np
from numba import njit

OK = 0
PIVOT_LIMIT = -1
NO_ENTERING = -2

REFACTOR_EVERY = 100
DUAL_TOL = 1e-9      # allowed dual infeasibility |f_jᵀλ| <= 1 + DUAL_TOL (Harris)
PIVOT_TOL = 1e-9     # relative: |alpha| must exceed PIVOT_TOL * ‖ρ‖ * max‖f‖
PRIMAL_TOL = 1e-11
# Reassociation lets LLVM vectorise the dot-product reductions; no flag that changes
# inf/NaN semantics is enabled (the ratio tests compare against np.inf).
_FM = {"reassoc", "contract"}   # relative to max |w|
STALL = 25           # degenerate pivots in a row before switching to Bland's rule


@njit(cache=True, nogil=True)
def refactor(Ft, basis, Binv, lam, g, ctr):
    """Recompute ``B⁻¹``, ``λ`` and ``g`` from the basis (cures drift of the updates)."""
    n, r = Ft.shape
    B = np.empty((r, r))
    for k in range(r):
        c = basis[k]
        if c < n:
            for i in range(r):
                B[i, k] = Ft[c, i]
        else:
            for i in range(r):
                B[i, k] = -Ft[c - n, i]
    Binv[:, :] = np.linalg.inv(B)
    for i in range(r):
        s = 0.0
        for k in range(r):
            s += Binv[k, i]
        lam[i] = s
    for j in range(n):
        s = 0.0
        for i in range(r):
            s += Ft[j, i] * lam[i]
        g[j] = s
    ctr[0] = 0
    ctr[2] += 1


@njit(cache=True, nogil=True, fastmath=_FM)
def _matvec(Binv, y, out):
    r = Binv.shape[0]
    for k in range(r):
        s = 0.0
        for i in range(r):
            s += Binv[k, i] * y[i]
        out[k] = s


@njit(cache=True, nogil=True, fastmath=_FM)
def _dot(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@njit(cache=True, nogil=True, fastmath=_FM)
def _row_alpha(Ft, rho, alpha):
    """alpha_j = f_jᵀρ for all columns; returns ‖ρ‖."""
    n, r = Ft.shape
    for j in range(n):
        s = 0.0
        for i in range(r):
            s += Ft[j, i] * rho[i]
        alpha[j] = s
    return np.sqrt(_dot(rho, rho))


@njit(cache=True, nogil=True, fastmath=_FM)
def _ratio_test(alpha, g, basis, atol, bland):
    """Dual ratio test over the 2n columns; returns the entering code or -1.

    Column ``+f_j`` has row entry ``alpha_j`` and reduced cost ``1 - g_j``; column
    ``-f_j`` has ``-alpha_j`` and ``1 + g_j``. For each j exactly one of the two has a
    negative entry (when ``|alpha_j| > atol``): the candidate has reduced cost
    ``1 + sign(alpha_j)·g_j`` and entry magnitude ``|alpha_j|``.
    Normal mode: Harris two-pass test (bound with tolerance, then the largest
    |alpha| below the bound). Bland mode: exact minimum ratio, ties to the smallest
    column code, which rules out cycling. Written without data-dependent branches
    in the first pass (the signs of alpha are random: branches mispredict).
    """
    n = alpha.shape[0]
    slack = 0.0 if bland else DUAL_TOL
    bound = np.inf
    for j in range(n):
        a = alpha[j]
        aa = abs(a)
        d = 1.0 + (g[j] if a > 0.0 else -g[j])
        t = (d + slack) / aa if aa > atol else np.inf
        bound = min(bound, t)
    if bound == np.inf:
        return -1
    if bland:
        bound = bound + 1e-12 * (1.0 + abs(bound))
    best = -1
    best_a = 0.0
    for j in range(n):
        a = alpha[j]
        aa = abs(a)
        if aa <= atol:
            continue
        d = 1.0 + (g[j] if a > 0.0 else -g[j])
        if d <= bound * aa:
            code = j + n if a > 0.0 else j
            if bland:
                if best < 0 or code < best:
                    best = code
            elif aa > best_a:
                best = code
                best_a = aa
    return best


@njit(cache=True, nogil=True)
def _pivot(Ft, basis, Binv, lam, g, ctr, p, q, alpha, col, u):
    """Replace basis row ``p`` by column code ``q``; ``alpha`` holds ``Fᵀρ``, ρ = row p of B⁻¹.

    Leaves ``u = B⁻¹a_q`` (old basis) for incremental updates; returns True if the
    inverse was refactorised (then incremental updates must be recomputed instead).
    """
    n, r = Ft.shape
    if q < n:
        for i in range(r):
            col[i] = Ft[q, i]
        aq = alpha[q]
        dq = 1.0 - g[q]
    else:
        for i in range(r):
            col[i] = -Ft[q - n, i]
        aq = -alpha[q - n]
        dq = 1.0 + g[q - n]
    theta = max(dq, 0.0) / (-aq)
    _matvec(Binv, col, u)
    up = u[p]
    # λ' = λ - θρ ; g' = g - θ alpha   (ρ is still row p of the old B⁻¹)
    for i in range(r):
        lam[i] -= theta * Binv[p, i]
    for j in range(n):
        g[j] -= theta * alpha[j]
    inv_up = 1.0 / up
    for i in range(r):
        Binv[p, i] *= inv_up
    for k in range(r):
        if k != p:
            f = u[k]
            if f != 0.0:
                for i in range(r):
                    Binv[k, i] -= f * Binv[p, i]
    basis[p] = q
    ctr[0] += 1
    ctr[1] += 1
    if ctr[0] >= REFACTOR_EVERY or abs(up - aq) > 1e-8 * (1.0 + abs(aq)):
        refactor(Ft, basis, Binv, lam, g, ctr)
        return True
    return False


@njit(cache=True, nogil=True)
def _update_primal(w, u, p):
    """``w ← E w`` for the pivot's eta matrix (``u = B⁻¹a_q`` of the old basis)."""
    wp = w[p] / u[p]
    for k in range(w.shape[0]):
        w[k] -= u[k] * wp
    w[p] = wp


@njit(cache=True, nogil=True)
def _row(Binv, p, rho):
    for i in range(Binv.shape[0]):
        rho[i] = Binv[p, i]


@njit(cache=True, nogil=True)
def _pivot_out(Ft, fmax, basis, Binv, lam, g, ctr, p, bland, rho, alpha, col, u):
    """One dual simplex pivot with leaving row ``p``: ratio test over the 2n columns, update.

    Returns -1 if no column can enter, 1 if B⁻¹ was refactorised, 0 otherwise (then
    ``u = B⁻¹a_q`` of the old basis is valid for incremental updates).
    """
    _row(Binv, p, rho)
    rn = _row_alpha(Ft, rho, alpha)
    q = _ratio_test(alpha, g, basis, PIVOT_TOL * rn * fmax, bland)
    if q < 0:
        return -1
    return 1 if _pivot(Ft, basis, Binv, lam, g, ctr, p, q, alpha, col, u) else 0


@njit(cache=True, nogil=True)
def _anti_cycling(progress, stall, bland, ctr):
    """Switch to Bland's rule after STALL pivots in a row without progress; back on progress."""
    if progress:
        return 0, False
    stall += 1
    if stall >= STALL and not bland:
        ctr[3] += 1
        bland = True
    return stall, bland


@njit(cache=True, nogil=True)
def solve(Ft, fmax, basis, Binv, lam, g, ctr, y, max_pivots):
    """Dual simplex from the current (dual feasible) basis to an optimal one for ``y``.

    On return with ``OK`` the basis is optimal: ``‖y‖_K = λ·y``.
    """
    n, r = Ft.shape
    w = np.empty(r)
    rho = np.empty(r)
    alpha = np.empty(n)
    col = np.empty(r)
    u = np.empty(r)
    stall = 0
    bland = False
    obj = _dot(lam, y)
    for it in range(max_pivots + 1):
        _matvec(Binv, y, w)
        wmax = 0.0
        for k in range(r):
            if abs(w[k]) > wmax:
                wmax = abs(w[k])
        tol = PRIMAL_TOL * wmax
        inv = 1.0 / wmax if wmax > 0.0 else 1.0  # score on w/wmax: w² alone underflows for tiny y
        p = -1
        best = 0.0
        for k in range(r):
            if w[k] < -tol:
                if bland:
                    if p < 0 or basis[k] < basis[p]:
                        p = k
                else:
                    nrm = 0.0
                    for i in range(r):
                        nrm += Binv[k, i] * Binv[k, i]
                    wk = w[k] * inv
                    score = wk * wk / nrm
                    if score > best:
                        best = score
                        p = k
        if p < 0:
            return OK
        if it == max_pivots:
            return PIVOT_LIMIT
        if _pivot_out(Ft, fmax, basis, Binv, lam, g, ctr, p, bland, rho, alpha, col, u) < 0:
            return NO_ENTERING
        new_obj = _dot(lam, y)
        stall, bland = _anti_cycling(new_obj > obj + 1e-13 * (1.0 + abs(obj)), stall, bland, ctr)
        obj = new_obj
    return PIVOT_LIMIT


@njit(cache=True, nogil=True)
def move(Ft, fmax, basis, Binv, lam, g, ctr, x, u, s_max, max_pivots, out):
    """Parametric right-hand side walk along ``x + s·u``, ``s >= 0``.

    Requires a basis optimal at ``x``. Follows the cones of K's facets until either
    ``‖x + s u‖_K = 1`` (boundary; the basis is then optimal there and ``λ`` is the
    facet normal) or ``s = s_max``. Writes the stopping ``s`` to ``out[0]`` and 1.0 to
    ``out[1]`` if the boundary was hit, else 0.0. Returns a status.
    """
    n, r = Ft.shape
    wx = np.empty(r)
    wu = np.empty(r)
    rho = np.empty(r)
    alpha = np.empty(n)
    col = np.empty(r)
    tmp = np.empty(r)
    s = 0.0
    stall = 0
    bland = False
    _matvec(Binv, x, wx)
    _matvec(Binv, u, wu)
    slope = _dot(lam, u)
    for it in range(max_pivots + 1):
        lx = _dot(lam, x)
        lu = _dot(lam, u)
        s_bd = np.inf
        if lu > 0.0:
            s_bd = (1.0 - lx) / lu
            if s_bd < s:
                s_bd = s
        umax = 0.0
        for k in range(r):
            if abs(wu[k]) > umax:
                umax = abs(wu[k])
        utol = 1e-11 * umax
        s_row = np.inf
        p = -1
        for k in range(r):
            if wu[k] < -utol:
                sk = -wx[k] / wu[k]
                if sk < s:
                    sk = s
                if p < 0 or sk < s_row - 1e-13 * (1.0 + abs(s_row)):
                    s_row = sk
                    p = k
                elif sk <= s_row + 1e-13 * (1.0 + abs(s_row)):
                    if bland:
                        if basis[k] < basis[p]:
                            p = k
                    elif wu[k] < wu[p]:
                        p = k
        s_stop = s_bd if s_bd < s_max else s_max
        if s_stop <= s_row:
            out[0] = s_stop
            out[1] = 1.0 if s_bd <= s_max else 0.0
            return OK
        if it == max_pivots:
            return PIVOT_LIMIT
        advanced = s_row > s + 1e-13 * (1.0 + abs(s))
        s = s_row
        status = _pivot_out(Ft, fmax, basis, Binv, lam, g, ctr, p, bland, rho, alpha, col, tmp)
        if status < 0:
            return NO_ENTERING
        if status == 1:
            _matvec(Binv, x, wx)
            _matvec(Binv, u, wu)
        else:
            _update_primal(wx, tmp, p)
            _update_primal(wu, tmp, p)
        new_slope = _dot(lam, u)
        stall, bland = _anti_cycling(advanced or new_slope > slope + 1e-13 * (1.0 + abs(slope)), stall, bland, ctr)
        slope = new_slope
    return PIVOT_LIMIT


@njit(cache=True, nogil=True)
def gauge_many(Ft, fmax, basis, Binv, lam, g, ctr, Y, max_pivots, out, normals):
    """Gauge of each row of ``Y`` (warm-starting each from the previous basis).

    Writes gauges to ``out`` (``inf`` where one overflows) and facet normals to
    ``normals``; returns the first failing status (and stops) or OK.
    """
    m = Y.shape[0]
    r = Ft.shape[1]
    ys = np.empty(r)
    for i in range(m):
        # ‖y‖_K is positively homogeneous: solve at y·2^-e with max|y·2^-e| in [0.5, 1)
        # (exact), scale the value back by 2^e. Tiny and huge y pivot like ordinary ones.
        ymax = 0.0
        for k in range(r):
            ymax = max(ymax, abs(Y[i, k]))
        e = math.frexp(ymax)[1] if ymax > 0.0 else 0
        for k in range(r):
            ys[k] = math.ldexp(Y[i, k], -e)
        st = solve(Ft, fmax, basis, Binv, lam, g, ctr, ys, max_pivots)
        if st != OK:
            return st
        out[i] = math.ldexp(_dot(lam, ys), e)
        for k in range(r):
            normals[i, k] = lam[k]
    return OK

