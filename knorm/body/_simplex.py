"""Numba kernels of the warm-started dual simplex ("facet walk"), docs/design.md §2.4–§2.6.

The gauge LP ``min 1ᵀw  s.t. [F, -F] w = y, w >= 0`` has fixed costs and matrix, so
a dual feasible basis stays dual feasible for every right-hand side ``y``.

Data layout (all kernels):

* ``A``      -- the n columns ``f_j`` of a full-row-rank r×n matrix F, dense, compressed or
  by a marginal workload's structure (``knorm.body._columns``); a pivot costs O(nnz(F) + r²).
* ``basis`` -- ``int64[r]`` column codes: ``c < n`` is ``+f_c``, ``c >= n`` is ``-f_{c-n}``.
* ``Binv`` -- ``(r, r)`` explicit inverse of the basis matrix.
* ``lam``  -- ``λ = B⁻ᵀ 1``, the outward normal of the current facet (``λ·y = ‖y‖_K``
  on its cone).
* ``g``    -- ``Fᵀλ``; reduced costs are ``1 - g_j`` (for ``+f_j``) and ``1 + g_j``.
* ``ctr``  -- ``int64[4]``: pivots since refactorisation, total pivots,
  refactorisations, Bland (anti-cycling) activations.

* ``cp``, ``cm`` -- (internal kernels) costs of the columns ``+f_j`` and ``-f_j``; empty
  arrays mean the true unit costs. Only :func:`solve` runs pivots on perturbed costs
  (and restores the unit ones before it returns), so every state seen outside a kernel
  has ``λ = B⁻ᵀ 1`` exactly as above.

Every kernel returns a status: ``OK`` or a negative failure code; the Python layer
turns failures into clear exceptions.
"""

import math

import numpy as np

from .._jit import kernel
from ._columns import _all_dots, _column, _dot, _ncols
from ._crash import _next_rand, crash

OK = 0
PIVOT_LIMIT = -1
NO_ENTERING = -2
SINGULAR = -3        # singular basis that a fresh crash basis could not repair
REPAIRED = 1         # refactor: basis replaced by a fresh (dual feasible) crash basis

REFACTOR_EVERY = 200  # r³ Gauss–Jordan every max(200, REFACTOR_ROWS·r) pivots (100 cost 17% of a pivot at r = 100)
REFACTOR_ROWS = 4     # at r = 332 one refactorisation is ~35 pivots' time; B⁻¹'s drift after 1,700 eta updates 4e-13
DUAL_TOL = 1e-9      # allowed dual infeasibility |f_jᵀλ| <= 1 + DUAL_TOL (Harris)
PIVOT_TOL = 1e-9     # relative: |alpha| must exceed PIVOT_TOL * ‖ρ‖ * max‖f‖
PRIMAL_TOL = 1e-11
# Reassociation lets LLVM vectorise the dot-product reductions; no flag that changes
# inf/NaN semantics is enabled (the ratio tests compare against np.inf).
_FM = {"reassoc", "contract"}   # relative to max |w|
SINGULAR_TOL = 1e-11  # Gauss–Jordan pivot below this times the column norm: dependent column
PERTURB = 5e-7       # cost perturbation of the dual phase: δ_j in [PERTURB, 2·PERTURB)
STALL = 25           # degenerate pivots in a row before switching to Bland's rule
REPAIR_TRIES = 12    # crash bases tried (the λ direction, then pseudo-random ones) to repair a singular basis


@kernel(fastmath=_FM)
def _invert(B, Binv):
    """``Binv ← B⁻¹`` by in-place Gauss–Jordan elimination with partial (row) pivoting.

    Numba-native on purpose: ``np.linalg.inv`` goes to multithreaded OpenBLAS for r > 64,
    which costs milliseconds per call on a loaded machine. r³ flops on contiguous rows.
    B is left unchanged. Returns -1 on success, else the first column ``k`` of B that is
    (numerically) dependent on columns ``0..k-1``: no row left has a pivot above
    ``SINGULAR_TOL`` times the column's norm.
    """
    r = B.shape[0]
    A = Binv
    rowk = np.empty(r)
    swaps = np.empty(r, np.int64)
    for i in range(r):
        for j in range(r):
            A[i, j] = B[i, j]
    for k in range(r):
        nk = 0.0
        for i in range(r):
            nk += B[i, k] * B[i, k]
        nk = math.sqrt(nk)
        p = k
        best = abs(A[k, k])
        for i in range(k + 1, r):
            a = abs(A[i, k])
            if a > best:
                best = a
                p = i
        if not best > SINGULAR_TOL * nk:
            return k
        swaps[k] = p
        if p != k:
            for j in range(r):
                t = A[k, j]
                A[k, j] = A[p, j]
                A[p, j] = t
        inv = 1.0 / A[k, k]
        A[k, k] = 1.0
        for j in range(r):
            A[k, j] *= inv
            rowk[j] = A[k, j]
        for i in range(r):
            if i != k:
                f = A[i, k]
                if f != 0.0:
                    A[i, k] = 0.0
                    for j in range(r):
                        A[i, j] -= f * rowk[j]
    # row swaps of B are column swaps of its inverse, undone in reverse order
    for k in range(r - 1, -1, -1):
        p = swaps[k]
        if p != k:
            for i in range(r):
                t = A[i, k]
                A[i, k] = A[i, p]
                A[i, p] = t
    return -1


@kernel()
def _basis_matrix(A, basis, B):
    n, r = _ncols(A), basis.shape[0]
    for k in range(r):
        c = basis[k]
        _column(A, c % n, 1.0 if c < n else -1.0, B[:, k])


@kernel()
def _set_duals(A, basis, Binv, lam, g, cp, cm):
    """``λ = B⁻ᵀ c_B`` and ``g = Fᵀλ`` for the costs ``cp`` (of +f_j) and ``cm`` (of -f_j)."""
    n, r = _ncols(A), basis.shape[0]
    for i in range(r):
        s = 0.0
        for k in range(r):
            c = basis[k]
            if cp.shape[0] == 0:
                s += Binv[k, i]
            else:
                s += Binv[k, i] * (cp[c] if c < n else cm[c - n])
        lam[i] = s
    _all_dots(A, lam, g)


@kernel(inline=True)
def _refactor_once(A, basis, Binv, lam, g, cp, cm):
    n, r = _ncols(A), basis.shape[0]
    B = np.empty((r, r))
    _basis_matrix(A, basis, B)
    k = _invert(B, Binv)
    if k >= 0:
        return k
    _set_duals(A, basis, Binv, lam, g, cp, cm)
    return -1


def refactor(A, basis, Binv, lam, g, ctr):
    """:func:`refactor_c` with the gauge LP's unit costs (from Python: no kernel of its own,
    which would compile refactor_c's whole call tree once more)."""
    return refactor_c(A, basis, Binv, lam, g, ctr, _UNIT, _UNIT)


_UNIT = np.empty(0)  # empty cost arrays: the true unit costs


@kernel(entry=True)
def refactor_c(A, basis, Binv, lam, g, ctr, cp, cm):
    """Recompute ``B⁻¹``, ``λ`` and ``g`` from the basis (cures drift of the updates).

    A (numerically) singular basis is repaired: replaced by a fresh crash basis from the
    current λ direction (dual feasible, nonsingular). Returns ``OK`` (basis unchanged),
    ``REPAIRED`` (basis replaced: it is dual feasible but no longer optimal for any
    particular point) or ``SINGULAR`` (repair failed).
    """
    ctr[0] = 0
    ctr[2] += 1
    if _refactor_once(A, basis, Binv, lam, g, cp, cm) < 0:
        return OK
    r = basis.shape[0]
    d = lam.copy()
    if not math.sqrt(_dot(d, d)) > 0.0 or not np.all(np.isfinite(d)):
        for i in range(r):
            d[i] = 1.0
    for attempt in range(REPAIR_TRIES):
        if crash(A, d, basis, ctr[1] + attempt, cp, cm) and _refactor_once(A, basis, Binv, lam, g, cp, cm) < 0:
            return REPAIRED
        rs = np.empty(1, np.uint64)
        rs[0] = np.uint64(ctr[1] + 7 * attempt + 3)
        for i in range(r):
            d[i] = _next_rand(rs)
    return SINGULAR


@kernel(fastmath=_FM)
def _matvec(Binv, y, out):
    r = Binv.shape[0]
    for k in range(r):
        s = 0.0
        for i in range(r):
            s += Binv[k, i] * y[i]
        out[k] = s


@kernel(inline=True)
def _row_alpha(A, rho, alpha):
    """alpha_j = f_jᵀρ for all columns; returns ‖ρ‖. (No fastmath of its own: its one
    operation is the square root, which the flags leave as it is; so it can be inlined.)"""
    _all_dots(A, rho, alpha)
    return np.sqrt(_dot(rho, rho))


SCAN_CHUNK = 256  # columns the ratio scan tests at once, without branches, before scanning them one by one


@kernel(fastmath=_FM)
def _chunk_hits(alpha, g, cp, cm, atol, keep):
    """How many columns of a chunk pass ``|alpha| > atol`` and ``d <= keep·|alpha|`` (vectorised:
    chunks are slices, so the loop index is known to be in range)."""
    cnt = 0
    if cp.shape[0] == 0:
        for k in range(alpha.shape[0]):
            a = alpha[k]
            aa = abs(a)
            d = 1.0 + math.copysign(1.0, a) * g[k]
            cnt += (aa > atol) & (d <= keep * aa)
    else:
        for k in range(alpha.shape[0]):
            a = alpha[k]
            aa = abs(a)
            d = cm[k] + g[k] if a > 0.0 else cp[k] - g[k]
            cnt += (aa > atol) & (d <= keep * aa)
    return cnt


@kernel(fastmath=_FM)
def _ratio_test(alpha, g, cp, cm, atol, bland, cand):
    """Dual ratio test over the 2n columns; returns the entering code or -1.

    Column ``+f_j`` has row entry ``alpha_j`` and reduced cost ``1 - g_j``; column
    ``-f_j`` has ``-alpha_j`` and ``1 + g_j``. For each j exactly one of the two has a
    negative entry (when ``|alpha_j| > atol``): the candidate has reduced cost
    ``d_j = 1 + sign(alpha_j)·g_j`` and entry magnitude ``|alpha_j|``.
    Normal mode: Harris two-pass test (bound ``min (d_j + DUAL_TOL)/|alpha_j|``, then
    the largest |alpha| with ``d_j <= bound·|alpha_j|``). Bland mode: exact minimum
    ratio, ties (within 1e-12) to the smallest column code, which rules out cycling.
    One pass over the columns, without divisions: the bound is updated only when a
    column beats it (``d + slack < bound·|alpha|``), and the columns that pass the
    running bound -- a superset of the final candidates -- are kept in ``cand`` (int64[n])
    for the second pass, which reads only those. The pass goes ``SCAN_CHUNK`` columns at
    a time: a chunk is first tested against the running bound without branches
    (:func:`_chunk_hits`, vectorised: ``d <= keep·|alpha|``, which every column that could
    lower the bound or be a candidate passes, since ``d + slack < bound·|alpha|`` implies
    it), and scanned one by one only if a column passes (a few dozen chunks of 225 at
    n = 57,600). Same result, column for column, as scanning every column.
    """
    n = alpha.shape[0]
    unit = cp.shape[0] == 0
    slack = 0.0 if bland else DUAL_TOL
    bound = np.inf
    keep = np.inf  # the running bound with Bland's tie window
    m = 0
    for j0 in range(0, n, SCAN_CHUNK):
        stop = min(j0 + SCAN_CHUNK, n)
        if keep < np.inf:
            ck = (cp, cm) if unit else (cp[j0:stop], cm[j0:stop])
            if _chunk_hits(alpha[j0:stop], g[j0:stop], ck[0], ck[1], atol, keep) == 0:
                continue
        for j in range(j0, stop):
            a = alpha[j]
            aa = abs(a)
            if aa <= atol:
                continue
            if unit:
                d = 1.0 + (g[j] if a > 0.0 else -g[j])
            else:
                d = cm[j] + g[j] if a > 0.0 else cp[j] - g[j]
            if d + slack < bound * aa:
                bound = (d + slack) / aa
                keep = bound + 1e-12 * (1.0 + abs(bound)) if bland else bound
            if d <= keep * aa:
                cand[m] = j
                m += 1
    if bound == np.inf:
        return -1
    best = -1
    best_a = 0.0
    for k in range(m):
        j = cand[k]
        a = alpha[j]
        aa = abs(a)
        if unit:
            d = 1.0 + (g[j] if a > 0.0 else -g[j])
        else:
            d = cm[j] + g[j] if a > 0.0 else cp[j] - g[j]
        if d <= keep * aa:
            code = j + n if a > 0.0 else j
            if bland:
                if best < 0 or code < best:
                    best = code
            elif aa > best_a:
                best = code
                best_a = aa
    return best


@kernel(inline=True)
def _pivot(A, basis, Binv, lam, g, ctr, p, q, alpha, col, u, cp, cm, clamp, nrm):
    """Replace basis row ``p`` by column code ``q``; ``alpha`` holds ``Fᵀρ``, ρ = row p of B⁻¹.

    ``nrm`` (empty: none) the squared norms of B⁻¹'s rows, kept with it (by the update, not
    after a refactorisation). Leaves ``u = B⁻¹a_q`` (old basis) for incremental updates; returns 0, or 1 if the
    inverse was refactorised (then incremental updates must be recomputed instead), 2 if
    a singular basis was replaced by a crash basis (then it must be re-solved), or
    ``SINGULAR``.
    """
    n, r = _ncols(A), basis.shape[0]
    _column(A, q % n, 1.0 if q < n else -1.0, col)
    if q < n:
        aq = alpha[q]
        dq = (1.0 if cp.shape[0] == 0 else cp[q]) - g[q]
    else:
        aq = -alpha[q - n]
        dq = (1.0 if cp.shape[0] == 0 else cm[q - n]) + g[q - n]
    # dual simplex: θ >= 0 (Harris may pick dq slightly < 0); primal cleanup: dq < 0
    theta = (max(dq, 0.0) if clamp else dq) / (-aq)
    up = _dot(Binv[p], col)
    # λ' = λ - θρ ; g' = g - θ alpha   (ρ is still row p of the old B⁻¹); nothing to do
    # for a degenerate pivot (θ = 0: about half of them on 0/1 workloads)
    if theta != 0.0:
        for i in range(r):
            lam[i] -= theta * Binv[p, i]
        for j in range(n):
            g[j] -= theta * alpha[j]
    _eta_update(Binv, col, u, p, up, np.empty(r), nrm)
    basis[p] = q
    ctr[0] += 1
    ctr[1] += 1
    if ctr[0] >= max(REFACTOR_EVERY, REFACTOR_ROWS * r) or abs(up - aq) > 1e-8 * (1.0 + abs(aq)):
        st = refactor_c(A, basis, Binv, lam, g, ctr, cp, cm)
        if st == OK:
            return 1
        return 2 if st == REPAIRED else SINGULAR
    return 0


@kernel(fastmath=_FM)
def _eta_update(Binv, col, u, p, up, rowp, nrm):
    """``u = B⁻¹a_q`` (``col = a_q``, ``up = u[p]`` given) and ``B⁻¹ ← E B⁻¹`` for the eta
    matrix of pivot row p, in one pass over B⁻¹: each row k's ``u_k`` is its dot with
    ``a_q`` before the row is updated, ``B⁻¹_k ← B⁻¹_k − u_k·(B⁻¹_p / u_p)``, while it is in cache.
    ``nrm`` (empty: none): the rows' squared norms, each summed as its row is written (the
    dual steepest-edge weights of :func:`_leaving_row`, for a row's r more flops while it is
    in registers instead of a second pass over B⁻¹ at each pricing).

    Row p (scaled) is copied to ``rowp`` first: the row updates then provably do not
    alias and vectorise (3× faster than updating from row p in place). Rows go two at a
    time: ``a_q`` and ``rowp`` are loaded once for both, each row's operations and their order
    unchanged (the same bits)."""
    r = Binv.shape[0]
    inv_up = 1.0 / up
    for i in range(r):
        Binv[p, i] *= inv_up
        rowp[i] = Binv[p, i]
    u[p] = up
    norms = nrm.shape[0] > 0
    k = 0
    while k < r:
        if k == p:
            k += 1
            continue
        k2 = k + 1 if k + 1 != p else k + 2
        if k2 >= r:  # the last row alone
            row = Binv[k]
            f = _dot(row, col)
            u[k] = f
            if f != 0.0:
                s = 0.0
                for i in range(r):
                    x = row[i] - f * rowp[i]
                    row[i] = x
                    s += x * x
                if norms:
                    nrm[k] = s
            break
        a = Binv[k]
        b = Binv[k2]
        fa = 0.0
        fb = 0.0
        for i in range(r):
            c = col[i]
            fa += a[i] * c
            fb += b[i] * c
        u[k] = fa
        u[k2] = fb
        # a row with u_k = 0 is left exactly as it is (x − 0·q would turn its −0.0 into +0.0 where
        # q < 0, and into NaN where row p is not finite): a select, not a branch, keeps the loop whole
        ka = fa != 0.0
        kb = fb != 0.0
        sa = 0.0
        sb = 0.0
        for i in range(r):
            q = rowp[i]
            x = a[i] - fa * q if ka else a[i]
            y = b[i] - fb * q if kb else b[i]
            a[i] = x
            b[i] = y
            sa += x * x
            sb += y * y
        if norms:
            if ka:
                nrm[k] = sa
            if kb:
                nrm[k2] = sb
        k = k2 + 1
    if norms:
        nrm[p] = _dot(rowp, rowp)


@kernel(fastmath=_FM)
def _row_norms(Binv, nrm):
    """``nrm_k = ‖B⁻¹_k‖²`` for every row (the weights :func:`_eta_update` then keeps)."""
    for k in range(Binv.shape[0]):
        nrm[k] = _dot(Binv[k], Binv[k])


@kernel()
def _update_primal(w, u, p):
    """``w ← E w`` for the pivot's eta matrix (``u = B⁻¹a_q`` of the old basis)."""
    wp = w[p] / u[p]
    for k in range(w.shape[0]):
        w[k] -= u[k] * wp
    w[p] = wp


@kernel()
def _row(Binv, p, rho):
    for i in range(Binv.shape[0]):
        rho[i] = Binv[p, i]


@kernel(inline=True)
def _pivot_out(A, fmax, basis, Binv, lam, g, ctr, p, bland, rho, alpha, col, u, cp, cm, cand, nrm):
    """One dual simplex pivot with leaving row ``p``: ratio test over the 2n columns, update
    (``nrm``: B⁻¹'s squared row norms kept, or empty, see :func:`_pivot`).

    Returns ``NO_ENTERING`` if no column can enter, ``SINGULAR``, 2 if the basis was
    repaired (replaced), 1 if B⁻¹ was refactorised, 0 otherwise (then ``u = B⁻¹a_q`` of
    the old basis is valid for incremental updates).
    """
    _row(Binv, p, rho)
    rn = _row_alpha(A, rho, alpha)
    q = _ratio_test(alpha, g, cp, cm, PIVOT_TOL * rn * fmax, bland, cand)
    if q < 0:
        return NO_ENTERING
    return _pivot(A, basis, Binv, lam, g, ctr, p, q, alpha, col, u, cp, cm, True, nrm)


@kernel()
def _anti_cycling(progress, stall, bland, ctr):
    """Switch to Bland's rule after STALL pivots in a row without progress; back on progress."""
    if progress:
        return 0, False
    stall += 1
    if stall >= STALL and not bland:
        ctr[3] += 1
        bland = True
    return stall, bland


@kernel()
def _leaving_row(Binv, basis, w, bland, nrm):
    """Dual pricing: the row with the largest dual steepest-edge score ``w_k²/‖ρ_k‖²``
    among ``w_k < -PRIMAL_TOL·max|w|`` (Bland: the smallest basis code); -1 if none.
    ``nrm``: the ``‖ρ_k‖²`` kept by the updates (:func:`_eta_update`), or empty: summed here."""
    r = w.shape[0]
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
                if nrm.shape[0] > 0:
                    nk = nrm[k]
                else:
                    nk = 0.0
                    for i in range(r):
                        nk += Binv[k, i] * Binv[k, i]
                wk = w[k] * inv
                score = wk * wk / nk
                if score > best:
                    best = score
                    p = k
    return p


@kernel()
def _mix(j):
    """splitmix64 of ``j`` -> a double in [0, 1): the deterministic per-column perturbation."""
    z = np.uint64(j) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@kernel(inline=True)
def _perturbed_costs(A, basis, Binv, lam, g, cp, cm):
    """Costs ``1 + δ`` (δ = PERTURB·(1 + U[0,1)), fixed per column and sign), duals for
    them, and cost shifts for the nonbasic columns the perturbation made dual infeasible
    (their reduced cost is set to their own δ): the basis stays dual feasible."""
    n = _ncols(A)
    for j in range(n):
        cp[j] = 1.0 + PERTURB * (1.0 + _mix(2 * j))
        cm[j] = 1.0 + PERTURB * (1.0 + _mix(2 * j + 1))
    _set_duals(A, basis, Binv, lam, g, cp, cm)
    _shift_costs(basis, g, cp, cm)


@kernel()
def _shift_costs(basis, g, cp, cm):
    """Shift the cost of every nonbasic column with a negative reduced cost so that its
    reduced cost becomes its own small δ (keeps the perturbed phase dual feasible after
    the perturbation itself and after refactorisations that reveal drift)."""
    n = g.shape[0]
    isb = np.zeros(2 * n, np.bool_)
    for k in range(basis.shape[0]):
        isb[basis[k]] = True
    for j in range(n):
        if not isb[j] and cp[j] - g[j] < 0.0:
            cp[j] = g[j] + PERTURB * (1.0 + _mix(2 * j))
        if not isb[j + n] and cm[j] + g[j] < 0.0:
            cm[j] = -g[j] + PERTURB * (1.0 + _mix(2 * j + 1))


@kernel(inline=True)
def _primal_cleanup(A, fmax, basis, Binv, lam, g, ctr, y, budget, ones):
    """Primal simplex with the true (unit) costs from a primal feasible basis.

    Removes the dual infeasibilities (``|f_jᵀλ| > 1 + DUAL_TOL``) left by the cost
    perturbation; they are tiny, so few pivots. Dantzig pricing, Harris ratio test;
    Bland's rule after STALL pivots without progress.
    """
    n, r = _ncols(A), basis.shape[0]
    w = np.empty(r)
    u = np.empty(r)
    u2 = np.empty(r)
    col = np.empty(r)
    rho = np.empty(r)
    alpha = np.empty(n)
    stall = 0
    bland = False
    obj = _dot(lam, y)
    for it in range(budget + 1):
        q = -1
        dmin = -DUAL_TOL
        for j in range(n):
            d1 = 1.0 - g[j]
            d2 = 1.0 + g[j]
            if bland:
                if d1 < -DUAL_TOL and (q < 0 or j < q):
                    q = j
                if d2 < -DUAL_TOL and (q < 0 or j + n < q):
                    q = j + n
            else:
                if d1 < dmin:
                    dmin = d1
                    q = j
                if d2 < dmin:
                    dmin = d2
                    q = j + n
        if q < 0:
            return OK
        if it == budget:
            return PIVOT_LIMIT
        _column(A, q % n, 1.0 if q < n else -1.0, col)
        _matvec(Binv, col, u)
        _matvec(Binv, y, w)
        umax = 0.0
        wmax = 0.0
        for k in range(r):
            umax = max(umax, abs(u[k]))
            wmax = max(wmax, abs(w[k]))
        utol = 1e-9 * umax
        ptol = PRIMAL_TOL * wmax
        bound = np.inf
        for k in range(r):
            if u[k] > utol:
                bound = min(bound, (max(w[k], 0.0) + ptol) / u[k])
        if bound == np.inf:
            return NO_ENTERING
        p = -1
        for k in range(r):
            if u[k] > utol and max(w[k], 0.0) <= bound * u[k]:
                if p < 0:
                    p = k
                elif bland:
                    if basis[k] < basis[p]:
                        p = k
                elif u[k] > u[p]:
                    p = k
        _row(Binv, p, rho)
        _row_alpha(A, rho, alpha)
        st = _pivot(A, basis, Binv, lam, g, ctr, p, q, alpha, col, u2, ones, ones, False, ones)
        if st < 0:
            return st
        if st == 2:   # basis replaced: back to the dual simplex (unit costs)
            return REPAIRED
        new_obj = _dot(lam, y)
        stall, bland = _anti_cycling(new_obj < obj - 1e-13 * (1.0 + abs(obj)), stall, bland, ctr)
        obj = new_obj
    return PIVOT_LIMIT


@kernel(inline=True)
def _dual_phase(A, fmax, basis, Binv, lam, g, ctr, y, budget, cp, cm):
    """Dual simplex pivots (costs cp, cm) until ``B⁻¹y >= 0``; returns (status, pivots).

    ``w = B⁻¹y`` and the pricing's row norms are kept by each pivot's eta update (O(r) and
    fused into the update's pass over B⁻¹), recomputed only after a refactorisation."""
    n, r = _ncols(A), basis.shape[0]
    w = np.empty(r)
    nrm = np.empty(r)
    rho = np.empty(r)
    alpha = np.empty(n)
    cand = np.empty(n, np.int64)
    col = np.empty(r)
    u = np.empty(r)
    stall = 0
    bland = False
    obj = _dot(lam, y)
    _matvec(Binv, y, w)
    _row_norms(Binv, nrm)
    for it in range(budget + 1):
        p = _leaving_row(Binv, basis, w, bland, nrm)
        if p < 0:
            return OK, it
        if it == budget:
            return PIVOT_LIMIT, it
        st = _pivot_out(A, fmax, basis, Binv, lam, g, ctr, p, bland, rho, alpha, col, u, cp, cm, cand, nrm)
        if st < 0:
            return st, it
        if st >= 1:   # refactorised: fresh duals may show drift, absorb it in the shifts
            _shift_costs(basis, g, cp, cm)
            _matvec(Binv, y, w)
            _row_norms(Binv, nrm)
        else:
            _update_primal(w, u, p)
        new_obj = _dot(lam, y)
        stall, bland = _anti_cycling(new_obj > obj + 1e-13 * (1.0 + abs(obj)), stall, bland, ctr)
        obj = new_obj
    return PIVOT_LIMIT, budget


@kernel()
def solve(A, fmax, basis, Binv, lam, g, ctr, y, max_pivots):
    """Dual simplex from the current (dual feasible) basis to an optimal one for ``y``.

    Degenerate bodies (many ties: 0/1 workloads) are handled as production dual simplex
    codes do: the pivots run on slightly perturbed costs ``1 + δ_j`` (fixed per column,
    with cost shifting where the perturbation would break dual feasibility), which makes
    every dual step strictly positive (no stalling, no cycling); then the true costs are
    restored and a few primal simplex pivots remove the dual infeasibilities this leaves.
    On return with ``OK`` the basis is optimal for the true LP: ``‖y‖_K = λ·y``.
    """
    n, r = _ncols(A), basis.shape[0]
    w = np.empty(r)
    ones = np.empty(0)   # empty cost arrays: the true unit costs
    _matvec(Binv, y, w)
    if _leaving_row(Binv, basis, w, False, ones) < 0:
        return OK
    cp = np.empty(n)
    cm = np.empty(n)
    used = 0
    for rnd in range(4):
        _perturbed_costs(A, basis, Binv, lam, g, cp, cm)
        st, piv = _dual_phase(A, fmax, basis, Binv, lam, g, ctr, y, max_pivots - used, cp, cm)
        used += piv
        if st != OK:
            _set_duals(A, basis, Binv, lam, g, ones, ones)   # back to the true costs
            return st
        # back to the true costs, from a fresh B⁻¹ (the cleanup's dual test must see
        # λ and Fᵀλ to full accuracy, not after up to REFACTOR_EVERY eta updates)
        if piv > 0:
            rf = refactor_c(A, basis, Binv, lam, g, ctr, ones, ones)
            if rf == SINGULAR:
                return SINGULAR
            if rf == REPAIRED:
                continue
        else:
            _set_duals(A, basis, Binv, lam, g, ones, ones)
        c0 = ctr[1]
        st = _primal_cleanup(A, fmax, basis, Binv, lam, g, ctr, y, max_pivots - used, ones)
        used += ctr[1] - c0
        if st == REPAIRED:
            continue
        if st != OK:
            return st
        # the primal pivots kept B⁻¹y >= 0 up to tolerance; confirm (else another round)
        _matvec(Binv, y, w)
        if _leaving_row(Binv, basis, w, False, ones) < 0:
            return OK
    return PIVOT_LIMIT


@kernel(inline=True)
def _solve_scaled(A, fmax, basis, Binv, lam, g, ctr, y, ys, max_pivots):
    """:func:`solve` at ``ys = y·2^-e`` with ``max|ys|`` in [0.5, 1) (exact; the basis
    optimal there is optimal at y: ‖·‖_K is positively homogeneous); returns (status, e)."""
    ymax = 0.0
    for k in range(y.shape[0]):
        ymax = max(ymax, abs(y[k]))
    e = math.frexp(ymax)[1] if ymax > 0.0 else 0
    for k in range(y.shape[0]):
        ys[k] = math.ldexp(y[k], -e)
    return solve(A, fmax, basis, Binv, lam, g, ctr, ys, max_pivots), e


@kernel(entry=True)
def move(A, fmax, basis, Binv, lam, g, ctr, x, u, s_max, max_pivots, out):
    """Parametric right-hand side walk along ``x + s·u``, ``s >= 0``.

    Requires a basis optimal at ``x``. Follows the cones of K's facets until either
    ``‖x + s u‖_K = 1`` (boundary; the basis is then optimal there and ``λ`` is the
    facet normal) or ``s = s_max``. Writes the stopping ``s`` to ``out[0]`` and 1.0 to
    ``out[1]`` if the boundary was hit, else 0.0. Returns a status.
    """
    n, r = _ncols(A), basis.shape[0]
    wx = np.empty(r)
    wu = np.empty(r)
    rho = np.empty(r)
    alpha = np.empty(n)
    cand = np.empty(n, np.int64)
    col = np.empty(r)
    tmp = np.empty(r)
    ones = np.empty(0)   # empty cost arrays: the true unit costs
    s = 0.0
    stall = 0
    bland = False
    origin = True
    for k in range(r):
        if x[k] != 0.0:
            origin = False
    if origin:
        # From the origin every basis is optimal (B⁻¹x = 0) and the ray s·u lies in the
        # cone of u's facet: solve at u itself (perturbed costs: no stalling on the
        # wholly degenerate start, where Bland's rule crawls on 0/1 bodies).
        st = _solve_scaled(A, fmax, basis, Binv, lam, g, ctr, u, tmp, max_pivots)[0]
        if st != OK:
            return st
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
        status = _pivot_out(A, fmax, basis, Binv, lam, g, ctr, p, bland, rho, alpha, col, tmp, ones, ones, cand, ones)
        if status < 0:
            return status
        if status == 2:
            # the basis was replaced: make it optimal again at the current point x + s·u
            for k in range(r):
                tmp[k] = x[k] + s * u[k]
            st = solve(A, fmax, basis, Binv, lam, g, ctr, tmp, max_pivots)
            if st != OK:
                return st
        if status >= 1:
            _matvec(Binv, x, wx)
            _matvec(Binv, u, wu)
        else:
            _update_primal(wx, tmp, p)
            _update_primal(wu, tmp, p)
        new_slope = _dot(lam, u)
        stall, bland = _anti_cycling(advanced or new_slope > slope + 1e-13 * (1.0 + abs(slope)), stall, bland, ctr)
        slope = new_slope
    return PIVOT_LIMIT


@kernel(entry=True)
def gauge_many(A, fmax, basis, Binv, lam, g, ctr, Y, max_pivots, out, normals):
    """Gauge of each row of ``Y`` (warm-starting each from the previous basis).

    Writes gauges to ``out`` (``inf`` where one overflows) and facet normals to
    ``normals``; returns the first failing status (and stops) or OK.
    """
    m = Y.shape[0]
    r = basis.shape[0]
    ys = np.empty(r)
    for i in range(m):
        # scale the value back by 2^e (exact); tiny and huge y pivot like ordinary ones
        st, e = _solve_scaled(A, fmax, basis, Binv, lam, g, ctr, Y[i], ys, max_pivots)
        if st != OK:
            return st
        out[i] = math.ldexp(_dot(lam, ys), e)
        for k in range(r):
            normals[i, k] = lam[k]
    return OK

