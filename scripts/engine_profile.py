"""Where a facet-walk pivot's time goes (the oracle's kernels, piece by piece).

For random ±1 F at n = 5d (default d = 40, 60, 80, 100), or 2-way marginals over a
domain (``--marginals 2 3 4 5 6 7``: the marginal operator's ``row_alpha``), on the first rounded frame
(``chol(F Fᵀ/n)``; random ±1 bodies are near-isotropic already, so the full rounding is
skipped), it times, in numba loops over realistic inputs taken from a billiard chain:

* ``row``        -- ρ = row p of B⁻¹ (O(r));
* ``row_alpha``  -- α = Fᵀρ (O(n·r), streams all of Ft);
* ``ratio_test`` -- Harris two-pass ratio test over the 2n columns (O(n));
* ``matvec``     -- u = B⁻¹a_q in ``_pivot`` (O(r²));
* ``binv_update``-- the rank-one update of B⁻¹ in ``_pivot`` (O(r²));
* ``g_update``   -- g ← g − θα and λ ← λ − θρ (O(n + r));
* ``refactor``   -- one refactorisation (O(r³) + O(n·r)), and amortised per pivot with
  the refactorisation rate measured on the chain (``ctr[2] / ctr[1]``);
* ``se_pricing`` -- the steepest-edge leaving-row choice with each row's norm summed at the
  pricing (O(r) per infeasible row, O(r²) per pivot at worst), as ``solve`` priced before its
  dual phase kept the norms with B⁻¹ (now O(r) a pivot: what keeping them saves; gauges only,
  the billiard walk's ``move`` chooses by a ratio test in O(r));

and the real thing: CPU µs per pivot of one billiard chain on one thread (and of two
chains on two threads). All times are CPU time (the machine may be shared). The
remainder (real minus the sum of the pieces) is move()'s O(r) bookkeeping plus what
isolation hides (cache misses when the pieces run together).

    python scripts/engine_profile.py                # all four sizes, a markdown table
    python scripts/engine_profile.py --d 40 100 --seconds 0.3
    python scripts/engine_profile.py --binary 16 --k 3 --walk-seconds 30   # rank 697, the transform
"""

import argparse
import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm import workloads as W  # noqa: E402
from knorm.body import _simplex as sx  # noqa: E402
from knorm.body.hull import SymmetricHull  # noqa: E402
from knorm.walks.chains import Chain, default_params, run_chains  # noqa: E402
from knorm.walks.rounding import _frame_for  # noqa: E402
from knorm.walks.sampler import _start_points  # noqa: E402


@njit(cache=False, nogil=True)
def _t_row(Binv, rho, reps):
    r = Binv.shape[0]
    s = 0.0
    for t in range(reps):
        sx._row(Binv, t % r, rho)
        s += rho[0]
    return s


@njit(cache=False, nogil=True)
def _t_row_alpha(A, RHO, alpha, reps):
    m = RHO.shape[0]
    s = 0.0
    for t in range(reps):
        s += sx._row_alpha(A, RHO[t % m], alpha)
    return s


@njit(cache=False, nogil=True)
def _t_ratio(ALPHA, g, unit, atol, reps):
    m = ALPHA.shape[0]
    cand = np.empty(ALPHA.shape[1], np.int64)
    s = 0
    for t in range(reps):
        s += sx._ratio_test(ALPHA[t % m], g, unit, unit, atol, False, cand)
    return s


@njit(cache=False, nogil=True)
def _ratio_once(alpha, g, unit, atol, cand):
    """One ratio test (the kernel has no Python wrapper of its own)."""
    return sx._ratio_test(alpha, g, unit, unit, atol, False, cand)


@njit(cache=False, nogil=True)
def _t_matvec(Binv, Ft, u, reps):
    n = Ft.shape[0]
    s = 0.0
    for t in range(reps):
        sx._matvec(Binv, Ft[(t * 7919) % n], u)
        s += u[0]
    return s


@njit(cache=False, nogil=True)
def _t_binv_update(Binv, U, reps):
    """The loop of ``_pivot`` (row p scaled, then r-1 row updates), applied and undone."""
    r = Binv.shape[0]
    m = U.shape[0]
    for t in range(reps):
        p = t % m  # row i of U has a usable pivot entry at i (m <= r)
        u = U[t % m]
        sign = 1.0 if t % 2 == 0 else -1.0
        up = u[p]
        inv_up = 1.0 / up if sign > 0 else up
        for i in range(r):
            Binv[p, i] *= inv_up
        for k in range(r):
            if k != p:
                f = sign * u[k] * 1e-3
                if f != 0.0:
                    for i in range(r):
                        Binv[k, i] -= f * Binv[p, i]
    return Binv[0, 0]


@njit(cache=False, nogil=True)
def _t_g_update(g, lam, ALPHA, RHO, reps):
    n = g.shape[0]
    r = lam.shape[0]
    m = ALPHA.shape[0]
    for t in range(reps):
        theta = 1e-3 if t % 2 == 0 else -1e-3
        a = ALPHA[(t // 2) % m]
        rho = RHO[(t // 2) % m]
        for i in range(r):
            lam[i] -= theta * rho[i]
        for j in range(n):
            g[j] -= theta * a[j]
    return g[0]


@njit(cache=False, nogil=True)
def _t_se_pricing(Binv, W, reps):
    """The leaving-row choice of ``solve`` (dual steepest edge) on the rows' w vectors."""
    r = Binv.shape[0]
    m = W.shape[0]
    cnt = 0
    for t in range(reps):
        w = W[t % m]
        wmax = 0.0
        for k in range(r):
            if abs(w[k]) > wmax:
                wmax = abs(w[k])
        tol = sx.PRIMAL_TOL * wmax
        p = -1
        best = 0.0
        for k in range(r):
            if w[k] < -tol:
                cnt += 1
                nrm = 0.0
                for i in range(r):
                    nrm += Binv[k, i] * Binv[k, i]
                score = w[k] * w[k] / nrm
                if score > best:
                    best = score
                    p = k
    return cnt / reps


def _timed(fn, *args, seconds=0.3, reps=64):
    """CPU seconds (this thread) per repetition: the best of 3 runs of about ``seconds`` each.

    CPU time, not wall time: the machine is shared, and time slices lost to other
    processes must not count (cache pollution by them still does)."""
    fn(*args, 2)  # compile
    while True:
        t = time.thread_time()
        fn(*args, reps)
        el = time.thread_time() - t
        if el > seconds / 3 or reps > 1 << 26:
            break
        reps *= 4
    best = np.inf
    for _ in range(3):
        t = time.thread_time()
        out = fn(*args, reps)
        best = min(best, (time.thread_time() - t) / reps)
    return best, out


def _walk_pivot_us(frame, x0s, seconds, workers):
    params = default_params("billiard", frame)
    cs = [Chain(frame, x, np.random.default_rng(7 + i)) for i, x in enumerate(x0s[:workers])]
    run_chains(cs, "billiard", 8, 8, params, workers=workers)
    p0 = sum(c.pivots for c in cs)
    r0 = sum(int(c.state.ctr[2]) for c in cs)
    s0 = sum(int(c.stats[2]) for c in cs)
    steps, t, c0 = 8, time.perf_counter(), time.process_time()
    while time.perf_counter() - t < seconds:
        run_chains(cs, "billiard", steps, steps, params, workers=workers)
        steps = min(steps * 2, 2048)
    cpu = time.process_time() - c0  # all threads of this process: CPU seconds spent on the chains
    piv = sum(c.pivots for c in cs) - p0
    return (1e6 * cpu / piv, (sum(int(c.state.ctr[2]) for c in cs) - r0) / piv,
            piv / (sum(int(c.stats[2]) for c in cs) - s0), cs[0])


def profile(d, seconds=0.3, walk_seconds=3.0, seed=0):
    return profile_body(SymmetricHull(W.random_pm1(d, 5 * d, rng=seed + d)), f"{d}×{5 * d}", seconds, walk_seconds,
                        seed)


def profile_body(K, label, seconds=0.3, walk_seconds=3.0, seed=0):
    base = K.frame
    r, n = base.r, base.n
    T = np.linalg.cholesky(base.Ft.T @ base.Ft / n + 1e-12 * np.eye(r))
    frame = _frame_for(base, T)
    x0s = _start_points(frame, 2, np.random.default_rng(seed))
    us1, refac, pps, chain = _walk_pivot_us(frame, x0s, walk_seconds, 1)
    us2, _, _, _ = _walk_pivot_us(frame, x0s, walk_seconds, 2)
    basis, Binv, lam, g, ctr = (a.copy() for a in chain.state.args())
    # the oracle's own data and coordinates (the chain's state lives there, not in the frame's)
    A, fmax = frame.A, frame.fmax
    Ft = np.ascontiguousarray(frame.cols.matrix().T)
    unit = np.empty(0)  # empty cost arrays: the true unit costs
    m = min(r, 64)
    RHO = np.ascontiguousarray(Binv[:m])
    ALPHA = RHO @ Ft.T
    atol = sx.PIVOT_TOL * np.linalg.norm(RHO[0]) * fmax
    # u = B⁻¹a_q for the entering columns of real ratio tests
    U = np.empty((m, r))
    for i in range(m):
        q = _ratio_once(ALPHA[i], g, unit, atol, np.empty(n, np.int64))
        col = Ft[q] if q < n else -Ft[q - n]
        U[i] = Binv @ col
        if abs(U[i, i % r]) < 1e-3:
            U[i, i % r] = 1.0
    Y = np.random.default_rng(seed + 1).standard_normal((m, r))
    Wv = Y @ Binv.T  # w = B⁻¹y of far points (a gauge query from the walk's basis)
    rho = np.empty(r)
    alpha = np.empty(n)
    u = np.empty(r)
    res = {"d×n": label, "r": r, "structured": base.cols.structured or "dense", "Ft KiB": Ft.nbytes / 1024, "B⁻¹ KiB": Binv.nbytes / 1024}
    res["row"] = _timed(_t_row, Binv, rho, seconds=seconds)[0]
    res["row_alpha"] = _timed(_t_row_alpha, A, RHO, alpha, seconds=seconds)[0]
    res["ratio_test"] = _timed(_t_ratio, ALPHA, g, unit, atol, seconds=seconds)[0]
    res["matvec"] = _timed(_t_matvec, Binv, Ft, u, seconds=seconds)[0]
    res["binv_update"] = _timed(_t_binv_update, Binv.copy(), U, seconds=seconds)[0]
    res["g_update"] = _timed(_t_g_update, g.copy(), lam.copy(), ALPHA, RHO, seconds=seconds)[0]
    st = [basis.copy(), Binv.copy(), lam.copy(), g.copy(), ctr.copy()]
    sx.refactor(A, *st)
    best = np.inf
    for _ in range(max(3, int(seconds / 0.01))):
        t = time.process_time()  # all threads: LAPACK may run the inverse on several
        sx.refactor(A, *st)
        best = min(best, time.process_time() - t)
    res["refactor (one)"] = best
    res["refactor/pivot"] = refac
    res["refactor (amortised)"] = best * refac
    se, cnt = _timed(_t_se_pricing, Binv, Wv, seconds=seconds)
    res["se_pricing (solve only)"] = se
    res["se rows priced per call"] = cnt
    res["row_alpha ns per n·r"] = 1e9 * res["row_alpha"] / (n * r)
    res["matvec ns per r²"] = 1e9 * res["matvec"] / (r * r)
    res["binv_update ns per r²"] = 1e9 * res["binv_update"] / (r * r)
    res["ratio_test ns per n"] = 1e9 * res["ratio_test"] / n
    pieces = ["row", "row_alpha", "ratio_test", "matvec", "binv_update", "g_update", "refactor (amortised)"]
    res["sum of pieces"] = sum(res[k] for k in pieces)
    res["walk µs/pivot (1 thread)"] = us1
    res["walk µs/pivot (2 threads)"] = us2
    res["walk minus pieces"] = us1 * 1e-6 - res["sum of pieces"]
    res["pivots/step"] = pps
    res["n"] = n
    return res


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[40, 60, 80, 100])
    p.add_argument("--seconds", type=float, default=0.3, help="per timed piece")
    p.add_argument("--walk-seconds", type=float, default=3.0)
    p.add_argument("--marginals", type=int, nargs="+", default=None, metavar="SIZE",
                   help="profile 2-way marginals over this domain instead of ±1 F (e.g. 2 3 4 5 6 7)")
    p.add_argument("--binary", type=int, default=None, metavar="M",
                   help="profile all ≤ --k-way marginals of M binary attributes, built without the dense F "
                        "(knorm.implicit.marginals; 16 with --k 3: rank 697)")
    p.add_argument("--k", type=int, default=3)
    a = p.parse_args()
    results = []
    if a.binary:
        import itertools

        from knorm import implicit

        cliques = [c for j in range(a.k + 1) for c in itertools.combinations(range(a.binary), j)]
        K = SymmetricHull(implicit.marginals((2,) * a.binary, cliques))
        results.append(profile_body(K, f"≤{a.k}-way of {a.binary} binary", a.seconds, a.walk_seconds))
    elif a.marginals:
        shape = tuple(a.marginals)
        K = SymmetricHull(W.marginals(shape, 2))
        results.append(profile_body(K, "marginals " + "×".join(map(str, shape)), a.seconds, a.walk_seconds))
    for d in ([] if a.marginals or a.binary else a.d):
        results.append(profile(d, a.seconds, a.walk_seconds))
        print(f"done d={d}", file=sys.stderr, flush=True)
    keys = list(results[0])
    time_keys = {"row", "row_alpha", "ratio_test", "matvec", "binv_update", "g_update", "refactor (one)",
                 "refactor (amortised)", "se_pricing (solve only)", "sum of pieces", "walk minus pieces"}
    cols = [res["d×n"] for res in results]
    ratio = len(results) > 1
    print("| piece (µs) | " + " | ".join(cols) + (f" | ratio {cols[-1]} / {cols[0]} |" if ratio else " |"))
    print("|---|" + "---|" * (len(cols) + ratio))
    for k in keys[1:]:
        vals = [res[k] * (1e6 if k in time_keys else 1) for res in results]
        cells = [f"{v:.3g}" if isinstance(v, (int, float)) else str(v) for v in vals]
        if ratio:
            numeric = isinstance(vals[0], (int, float))
            cells.append(f"{vals[-1] / vals[0]:.2f}×" if numeric and vals[0] else "")
        print(f"| {k} | " + " | ".join(cells) + " |")
    if ratio:
        r0, r1 = results[0], results[-1]
        nr = (r1["r"] * r1["n"]) / (r0["r"] * r0["n"])
        r2, r3 = r1["r"] ** 2 / r0["r"] ** 2, r1["r"] ** 3 / r0["r"] ** 3
        print(f"\nn·r grows {nr:.2f}×, r² {r2:.2f}×, r³ {r3:.2f}×")
