"""How sparse the facet walk's basis would be in F's own 0/1 coordinates (counts, not timings).

The oracle keeps a dense explicit B⁻¹ (r×r) in rotated span coordinates. The candidate
alternative works in F's own coordinates: r linearly independent rows S of F, basis matrix
``B_S = F[S, basis columns]·signs`` (signed 0/1), kept as a sparse LU factorisation plus an
eta file, with hypersparse FTRAN/BTRAN. This script measures, on 2-way marginal workloads,
the numbers that decide whether that pays:

1. real pivots of the billiard walk: a chain is warmed up in the first rounded frame
   (``chol(F Fᵀ/n)``, as ``scripts/engine_profile.py``), then chords are shot from the chain's
   point in random directions (to the boundary and back part of the way, i.e. hit-and-run
   legs) by the oracle's own ``move``, one pivot per call, recording for every pivot the basis
   before it, the leaving row p and the entering code q;
2. a row selection S (``--rows``: ``qr`` = scipy.linalg.qr(Fᵀ, pivoting=True); ``sparse`` =
   greedy, rows with fewest non-zeros first (rows of the largest tables), a row kept if it is
   independent of those kept; ``dense`` = the same greedy, densest rows first); per sampled
   basis: nnz(B_S), the fill of scipy's ``splu`` (COLAMD / MMD_AT_PLUS_A, several
   diag_pivot_thresh) as ``(nnz L + nnz U − r)/r²``, the density of the explicit B_S⁻¹;
3. per sampled pivot: nnz of u = B_S⁻¹a_q, of ρ = e_pᵀB_S⁻¹, of α = F_Sᵀρ (|α_j| > 1e-12; α is
   the same in every coordinate system: α_j = (B⁻¹f_j)_p, and it is checked against the
   oracle's own α); and the entries of L, U touched by hypersparse FTRAN (u) and BTRAN (ρ)
   (sum of the factor column/row counts over the non-zeros of the intermediate vectors);
4. a memory-traffic model per pivot (bytes; see ``traffic``) of the B⁻¹ side: dense explicit
   B⁻¹ against sparse LU + eta file at the refactorisation interval that minimises it, and
   of the n-length side (α, ratio test, g update).

Vector entries count as non-zero when |x| > 1e-12·max|x| (u, ρ, B⁻¹) or |α_j| > 1e-12.
All numbers are counts: deterministic for a given seed (timings on a shared machine are not).

    python scripts/basis_sparsity.py --marginals 2 3 4 5 6 7
    python scripts/basis_sparsity.py --marginals 2 2 3 4 5 5 6 8 --warm 2 --pivots 1500 --sample 60
"""

import argparse
import os
import sys
import time

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm import workloads as W  # noqa: E402
from knorm.body import _simplex as sx  # noqa: E402
from knorm.body.hull import SymmetricHull  # noqa: E402
from knorm.walks.chains import Chain, default_params, run_chains  # noqa: E402
from knorm.walks.rounding import _frame_for  # noqa: E402
from knorm.walks.sampler import _start_points  # noqa: E402


def _leg(frame, state, x, d, s_max, rec):
    """Walk from x (``state`` optimal there) along d up to ``s_max`` or K's boundary with the
    oracle's own ``move``, one pivot per call (``max_pivots = 1``), recording each pivot in ``rec``:
    the basis before it, the leaving row p (the one basis entry that changed), the entering code q
    and the oracle's count of ``|α_j|`` above its pivot tolerance (α = Fᵀρ, ρ = row p of the old
    B⁻¹). Returns the distance travelled, or None if a refactorisation replaced the basis (then
    the leg's position is unknown and the caller starts again from its chain)."""
    z = np.ascontiguousarray(frame.to_oracle(x))
    u = np.ascontiguousarray(frame.to_oracle(d))
    cols = frame.cols.matrix()  # (r, n), the oracle's coordinates
    out = np.zeros(2)
    travelled = 0.0
    while True:
        before, Binv = state.basis.copy(), state.Binv.copy()
        st = sx.move(frame.A, frame.fmax, *state.args(), z, u, s_max - travelled, 1, out)
        if st not in (sx.OK, sx.PIVOT_LIMIT):
            frame.check(st, "a recorded chord")
        changed = np.flatnonzero(state.basis != before)
        if len(changed) > 1:
            return None
        if len(changed) == 1:
            p = int(changed[0])
            rho = Binv[p]
            alpha = cols.T @ rho
            rec.append((before, p, int(state.basis[p]),
                        int(np.count_nonzero(np.abs(alpha) > sx.PIVOT_TOL * np.linalg.norm(rho) * frame.fmax))))
        if st == sx.OK:
            return travelled + out[0]
        s = -(Binv[p] @ z) / (Binv[p] @ u)  # where the pivot's basic coefficient reached zero
        z = z + s * u
        travelled += s


def collect_pivots(K, warm, cap, seed=0, log=print):
    """Warm a billiard chain up ``warm`` steps in the first rounded frame, then record up to
    ``cap`` pivots of hit-and-run legs from its point. Returns (BAS, P, Q, NA, info)."""
    base = K.frame
    r, n = base.r, base.n
    T = np.linalg.cholesky(base.Ft.T @ base.Ft / n + 1e-12 * np.eye(r))
    frame = _frame_for(base, T)
    rng = np.random.default_rng(seed)
    x0 = _start_points(frame, 1, rng)[0]
    chain = Chain(frame, x0, np.random.default_rng(seed + 7))
    params = default_params("billiard", frame)
    t = time.perf_counter()
    p0 = chain.pivots
    run_chains([chain], "billiard", warm, warm, params, workers=1)
    log(f"  warm-up: {warm} billiard steps, {chain.pivots - p0} pivots, {time.perf_counter() - t:.1f} s")
    state, x = chain.state.copy(), chain.x.copy()
    rec = []
    legs = 0
    t = time.perf_counter()
    while len(rec) < cap and legs < 400:
        d = rng.standard_normal(r)
        d /= np.linalg.norm(d)
        legs += 1
        # to the boundary along d (the state is optimal at x) ...
        s1 = _leg(frame, state, x, d, np.inf, rec)
        if s1 is not None:
            x = x + s1 * d
            # ... and back a uniform fraction of the chord (the state is optimal at the boundary point)
            s2 = _leg(frame, state, x, -d, (1.0 - rng.random()) * s1, rec)
        if s1 is None or s2 is None:
            state, x = chain.state.copy(), chain.x.copy()
            continue
        x = x - s2 * d
    rec = rec[:cap]
    BAS = np.array([b for b, _, _, _ in rec], np.int64).reshape(-1, r)
    P, Q, NA = (np.array([e[k] for e in rec], np.int64) for k in (1, 2, 3))
    m = len(rec)
    log(f"  recorded {m} pivots on {legs} chords (there and part way back), {time.perf_counter() - t:.1f} s")
    return BAS, P, Q, NA, {"legs": legs, "frame": frame}


# -- row selections ---------------------------------------------------------------------

def select_rows(F, span_basis, r, how):
    """r linearly independent rows of F (indices, sorted)."""
    if how == "qr":
        _, piv = sla.qr(F.T, mode="r", pivoting=True)
        S = np.sort(piv[:r])
    else:
        # rows of F are independent iff the same rows of its span basis U (F = U·C, C full row rank)
        nz = np.count_nonzero(F, axis=1)
        order = np.argsort(nz if how == "sparse" else -nz, kind="stable")
        Qb = np.zeros((r, span_basis.shape[1]))
        k = 0
        S = []
        for i in order:
            v = span_basis[i].copy()
            nv = np.linalg.norm(v)
            if nv == 0.0:
                continue
            for _ in range(2):
                v -= Qb[:k].T @ (Qb[:k] @ v)
            if np.linalg.norm(v) > 1e-8 * nv:
                Qb[k] = v / np.linalg.norm(v)
                S.append(i)
                k += 1
                if k == r:
                    break
        S = np.sort(np.array(S))
    sv = np.linalg.svd(span_basis[S], compute_uv=False)
    if len(S) != r or sv[-1] < 1e-10 * sv[0]:
        raise RuntimeError(f"row selection {how!r} is not of rank r")
    return S, sv[0] / sv[-1]


# -- per-basis measurements ---------------------------------------------------------------

def basis_matrix(FS_csc, codes, n):
    B = FS_csc[:, codes % n].tocsc()
    signs = np.where(codes < n, 1.0, -1.0)
    return (B @ sp.diags(signs)).tocsc()


def nnz_rel(v, rel=1e-12):
    m = np.max(np.abs(v)) if v.size else 0.0
    return int(np.count_nonzero(np.abs(v) > rel * m)) if m > 0 else 0


def lu_fill(B, permc, thresh):
    r = B.shape[0]
    lu = spla.splu(B, permc_spec=permc, diag_pivot_thresh=thresh)
    return lu, (lu.L.nnz + lu.U.nnz - r)


def hyper_solve_work(lu, b, transpose):
    """Entries of L and U a hypersparse triangular solve touches for ``B x = b`` (or ``Bᵀ x = b``):
    for each factor, the sum over the non-zeros j of the vector it is applied to... of the counts of
    the factor's column j (off-diagonal; row j for the transposed solve). Also returns x."""
    L = lu.L.tocsc()
    U = lu.U.tocsc()
    r = L.shape[0]
    Lc = np.diff(L.indptr) - 1  # off-diagonal entries per column (unit diagonal stored)
    Uc = np.diff(U.indptr) - 1
    Lr = np.bincount(L.indices, minlength=r) - 1
    Ur = np.bincount(U.indices, minlength=r) - 1
    Ld, Ud = L.toarray(), U.toarray()
    pr, pc = lu.perm_r, lu.perm_c
    if not transpose:
        # Pr B Pc = L U:  L y = Pr b,  U z = y,  x = Pc z
        bb = np.empty(r)
        bb[pr] = b
        y = sla.solve_triangular(Ld, bb, lower=True, unit_diagonal=True)
        z = sla.solve_triangular(Ud, y, lower=False)
        x = z[pc]
        # column-oriented: L's column j is used iff the final y_j != 0 (forward), U's iff z_j != 0
        work = int(Lc[np.abs(y) > 1e-14 * np.abs(y).max()].sum() + Uc[np.abs(z) > 1e-14 * np.abs(z).max()].sum())
        reach = (nnz_rel(y, 1e-14), nnz_rel(z, 1e-14))
    else:
        # Bᵀ = Pc Uᵀ Lᵀ Pr:  Uᵀ v = Pcᵀ b,  Lᵀ w = v,  x = Prᵀ w
        bb = np.empty(r)
        bb[pc] = b
        v = sla.solve_triangular(Ud, bb, lower=False, trans="T")
        w = sla.solve_triangular(Ld, v, lower=True, unit_diagonal=True, trans="T")
        x = w[pr]
        work = int(Ur[np.abs(v) > 1e-14 * np.abs(v).max()].sum() + Lr[np.abs(w) > 1e-14 * np.abs(w).max()].sum())
        reach = (nnz_rel(v, 1e-14), nnz_rel(w, 1e-14))
    return x, work, reach


def pct(a, q):
    return float(np.percentile(np.asarray(a, dtype=float), q)) if len(a) else float("nan")


def measure(shape, how_list, warm, cap, sample, sweep, seed=0, log=print):
    t0 = time.perf_counter()
    K = SymmetricHull(W.marginals(shape, 2))
    F = K.F
    d, n = F.shape
    r = K.dim
    log(f"{'×'.join(map(str, shape))}: d={d} n={n} r={r}, body {time.perf_counter() - t0:.1f} s")
    BAS, P, Q, NA, info = collect_pivots(K, warm, cap, seed, log)
    ok = Q >= 0
    idx = np.flatnonzero(ok)
    pick = idx[np.linspace(0, len(idx) - 1, min(sample, len(idx))).astype(int)] if len(idx) else idx
    rows_nnz = np.count_nonzero(F, axis=1)
    res = {"body": "×".join(map(str, shape)), "d": d, "n": n, "r": r, "pivots": len(P), "sampled": len(pick),
           "oracle nnz α (median)": pct(NA, 50), "oracle nnz α (p90)": pct(NA, 90), "per_rows": {}}
    for how in how_list:
        t = time.perf_counter()
        S, cond = select_rows(F, K.span_basis, r, how)
        FS = sp.csr_matrix(F[S])
        FSc = FS.tocsc()
        ent = {"cond(U_S)": cond, "nnz(F_S) per row": FS.nnz / r}
        # 2: LU options on a few bases
        opts = [("COLAMD", 1.0), ("COLAMD", 0.1), ("COLAMD", 0.01), ("MMD_AT_PLUS_A", 1.0),
                ("MMD_AT_PLUS_A", 0.1), ("MMD_AT_PLUS_A", 0.01)]
        few = pick[np.linspace(0, len(pick) - 1, min(sweep, len(pick))).astype(int)]
        fills = {o: [] for o in opts}
        for i in few:
            B = basis_matrix(FSc, BAS[i], n)
            for o in opts:
                fills[o].append(lu_fill(B, *o)[1] / r**2)
        for o in opts:
            ent[f"LU fill/r² {o[0]} t={o[1]:g}"] = float(np.median(fills[o]))
        best = min(opts, key=lambda o: np.median(fills[o]))
        ent["best LU option"] = f"{best[0]} t={best[1]:g}"
        # 2-3: per sampled pivot, with the best option
        rec = {k: [] for k in ("nnzB", "LU", "inv", "u", "rho", "alpha", "alpha_ok", "ftran", "btran",
                               "alpha_rows", "q_in_alpha", "ftran_reach", "btran_reach")}
        for i in pick:
            codes, p, q = BAS[i], P[i], Q[i]
            B = basis_matrix(FSc, codes, n)
            rec["nnzB"].append(B.nnz)
            lu, fill = lu_fill(B, *best)
            rec["LU"].append(fill)
            Binv = np.linalg.inv(B.toarray())
            rec["inv"].append(nnz_rel(Binv.ravel()) / r**2)
            aq = FSc[:, q % n].toarray().ravel() * (1.0 if q < n else -1.0)
            u, wf, reach_f = hyper_solve_work(lu, aq, False)
            ep = np.zeros(r)
            ep[p] = 1.0
            rho, wb, reach_b = hyper_solve_work(lu, ep, True)
            assert np.allclose(u, Binv @ aq, atol=1e-8) and np.allclose(rho, Binv[p], atol=1e-8)
            alpha = FS.T @ rho
            nz_rho = np.abs(rho) > 1e-12 * np.abs(rho).max()
            rec["u"].append(nnz_rel(u))
            rec["rho"].append(int(nz_rho.sum()))
            rec["alpha"].append(int(np.count_nonzero(np.abs(alpha) > 1e-12)))
            rec["alpha_ok"].append(abs(int(np.count_nonzero(np.abs(alpha) > 1e-9 * np.abs(alpha).max())) - NA[i]))
            rec["q_in_alpha"].append(abs(alpha[q % n]) > 1e-12)
            rec["alpha_rows"].append(int(rows_nnz[S][nz_rho].sum()))  # row-wise scatter work of F_Sᵀρ
            rec["ftran"].append(wf)
            rec["btran"].append(wb)
            rec["ftran_reach"].append(sum(reach_f))
            rec["btran_reach"].append(sum(reach_b))
        ent["rec"] = rec
        ent["seconds"] = time.perf_counter() - t
        res["per_rows"][how] = ent
        log(f"  rows {how}: {ent['seconds']:.1f} s; α count differs from the oracle's by "
            f"{max(rec['alpha_ok']) if rec['alpha_ok'] else 0} at most; q has α≠0 in "
            f"{sum(rec['q_in_alpha'])}/{len(pick)}")
    res["seconds"] = time.perf_counter() - t0
    return res


# -- traffic model --------------------------------------------------------------------------

DBL, SPE, IDX = 8, 12, 4  # bytes: a double, a sparse entry (value + 4-byte index), an index


def traffic(res, how):
    """Bytes per pivot (medians of the counts).

    Dense explicit B⁻¹ (today): the eta update reads and writes r² doubles and B⁻¹a_q reads r²
    more (16r² when fused in one pass, as the code does; 24r² unfused); ρ reads r.
    Sparse LU + product-form eta file, k updates since the refactorisation:
      FTRAN u = B⁻¹a_q: L and U entries touched (measured) + the eta file (each eta whose pivot
        entry of the running vector is non-zero: ≈ nnz(u)/r of them, nnz(u) entries each);
      BTRAN ρ = e_pᵀB⁻¹: the eta file backwards (every eta, nnz(u) entries) + Uᵀ, Lᵀ entries
        touched (measured; a row-wise copy of the factors is kept for it);
      the new eta column: nnz(u) entries written;
      refactorisation every K pivots: read B (nnz(B_S)) and write L, U twice over (≈ 2·SPE·(nnz B +
        nnz LU)), amortised over K; the eta terms average k over 0..K−1: K* = argmin.
    n-length side: α = F_Sᵀρ by rows (IDX per non-zero of the rows of ρ's support; 0/1 entries, no
    value) + α written over its support; ratio test reads α and g over α's support (all n if
    dense); g ← g − θα reads/writes g over α's support. Dense today (census): W (d·r doubles),
    α written (n), ratio test α+g (2n), g update α, g read + g written (3n).
    """
    r, n, d = res["r"], res["n"], res["d"]
    rec = res["per_rows"][how]["rec"]
    med = lambda k: float(np.median(rec[k]))  # noqa: E731
    dense_fused = 16 * r * r + DBL * r
    dense_unfused = 24 * r * r + DBL * r
    nu, nB, nLU = med("u"), med("nnzB"), med("LU") + r
    ftran_lu, btran_lu = med("ftran") + r, med("btran") + r  # + the diagonal of U
    refac = 2 * SPE * (nB + nLU)
    best = None
    for Kr in range(1, 2001):
        kbar = (Kr - 1) / 2
        eta_f = kbar * (nu / r) * nu * SPE + kbar * IDX  # test each eta's pivot entry
        eta_b = kbar * nu * SPE
        b = SPE * (ftran_lu + btran_lu) + eta_f + eta_b + SPE * nu + refac / Kr + 2 * DBL * r  # + u, ρ vectors
        if best is None or b < best[1]:
            best = (Kr, b, eta_f + eta_b)
        if Kr == 100:
            at100 = b
    na = med("alpha")
    sparse_nside = IDX * med("alpha_rows") + DBL * na + 2 * DBL * na + 3 * DBL * na
    dense_nside = DBL * d * r + DBL * n + 2 * DBL * n + 3 * DBL * n
    dense_nside_Fcoords = DBL * n + 2 * DBL * n + 3 * DBL * n  # no W: t = ρ scattered into S
    return {"dense B⁻¹ (fused)": dense_fused, "dense B⁻¹ (unfused)": dense_unfused, "LU+eta": best[1], "K*": best[0],
            "LU+eta at K=100": at100,
            "eta part": best[2], "refactor/pivot": refac / best[0], "FTRAN LU": SPE * ftran_lu,
            "BTRAN LU": SPE * btran_lu, "n-side today (structured)": dense_nside, "n-side F coords, α dense": dense_nside_Fcoords,
            "n-side F coords, α sparse": sparse_nside}


def report(results, how_list):
    lines = []
    cols = [res["body"] for res in results]
    lines.append("| | " + " | ".join(cols) + " |")
    lines.append("|---|" + "---|" * len(cols))

    def row(name, vals):
        lines.append(f"| {name} | " + " | ".join(vals) + " |")

    for k in ("d", "n", "r", "pivots", "sampled"):
        row(k, [str(res[k]) for res in results])
    row("oracle nnz(α) median / p90 (its pivot tol.)",
        [f"{res['oracle nnz α (median)']:.0f} / {res['oracle nnz α (p90)']:.0f}" for res in results])
    for how in how_list:
        have = [res for res in results if how in res["per_rows"]]
        if not have:
            continue
        lines.append(f"| **rows: {how}** | " + " | ".join("" for _ in results) + " |")

        def cell(res, f):
            return f(res) if how in res["per_rows"] else "–"

        def mp(key, scale=None, fmt="{:.0f}"):
            def f(res):
                v = np.asarray(res["per_rows"][how]["rec"][key], float)
                if scale == "r":
                    v = v / res["r"]
                elif scale == "r2":
                    v = v / res["r"] ** 2
                elif scale == "n":
                    v = v / res["n"]
                return (fmt + " / " + fmt).format(np.median(v), np.percentile(v, 90))
            return f

        row("cond of the selected rows (span basis)", [cell(res, lambda s: f"{s['per_rows'][how]['cond(U_S)']:.3g}")
                                                       for res in results])
        row("nnz(F_S) per row", [cell(res, lambda s: f"{s['per_rows'][how]['nnz(F_S) per row']:.0f}")
                                 for res in results])
        row("nnz(B_S) median / p90", [cell(res, mp("nnzB")) for res in results])
        row("nnz(B_S)/r² median / p90", [cell(res, mp("nnzB", "r2", "{:.4f}")) for res in results])
        opt_keys = [k for k in (have[0]["per_rows"][how]) if k.startswith("LU fill/r²")]
        for k in opt_keys:
            row(k + " (median, few bases)",
                [cell(res, lambda s, k=k: f"{s['per_rows'][how][k]:.4f}") for res in results])
        row("best LU option", [cell(res, lambda s: s["per_rows"][how]["best LU option"]) for res in results])
        row("LU fill (nnz L+U−r)/r², best option, median / p90", [cell(res, mp("LU", "r2", "{:.4f}")) for res in results])
        row("explicit B_S⁻¹ density median / p90", [cell(res, mp("inv", None, "{:.3f}")) for res in results])
        row("nnz(u = B⁻¹a_q) median / p90", [cell(res, mp("u")) for res in results])
        row("nnz(u)/r", [cell(res, mp("u", "r", "{:.3f}")) for res in results])
        row("nnz(ρ = e_pᵀB⁻¹) median / p90", [cell(res, mp("rho")) for res in results])
        row("nnz(ρ)/r", [cell(res, mp("rho", "r", "{:.3f}")) for res in results])
        row("nnz(α) (abs > 1e-12) median / p90", [cell(res, mp("alpha")) for res in results])
        row("nnz(α)/n", [cell(res, mp("alpha", "n", "{:.3f}")) for res in results])
        row("F_Sᵀρ by rows: entries read, median / p90", [cell(res, mp("alpha_rows")) for res in results])
        row("FTRAN: L,U entries touched median / p90", [cell(res, mp("ftran")) for res in results])
        row("BTRAN: Uᵀ,Lᵀ entries touched median / p90", [cell(res, mp("btran")) for res in results])
        row("FTRAN / BTRAN intermediate non-zeros (L+U) median",
            [cell(res, lambda s: f"{np.median(s['per_rows'][how]['rec']['ftran_reach']):.0f} / "
                                 f"{np.median(s['per_rows'][how]['rec']['btran_reach']):.0f}") for res in results])
        tr = [traffic(res, how) if how in res["per_rows"] else None for res in results]
        for k in ("dense B⁻¹ (fused)", "dense B⁻¹ (unfused)", "LU+eta", "K*", "LU+eta at K=100", "eta part", "refactor/pivot",
                  "FTRAN LU", "BTRAN LU", "n-side today (structured)", "n-side F coords, α dense", "n-side F coords, α sparse"):
            unit = "" if k == "K*" else " (KB/pivot)"
            row(f"model: {k}{unit}", ["–" if t is None else (f"{t[k]}" if k == "K*" else f"{t[k] / 1e3:.1f}")
                                      for t in tr])
        row("model: LU+eta / dense fused", ["–" if t is None else f"{t['LU+eta'] / t['dense B⁻¹ (fused)']:.2f}"
                                            for t in tr])
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--marginals", type=int, nargs="+", action="append", required=True, metavar="SIZE",
                    help="attribute sizes of a domain (2-way marginals); repeat the flag for several bodies")
    ap.add_argument("--rows", nargs="+", default=["sparse", "qr", "dense"], choices=["sparse", "qr", "dense"])
    ap.add_argument("--warm", type=int, default=16, help="billiard steps before recording")
    ap.add_argument("--pivots", type=int, default=3000, help="pivots to record")
    ap.add_argument("--sample", type=int, default=150, help="recorded pivots analysed (evenly spaced)")
    ap.add_argument("--sweep", type=int, default=12, help="bases on which the LU options are compared")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    log = lambda *s: print(*s, file=sys.stderr, flush=True)  # noqa: E731
    results = [measure(tuple(s), a.rows, a.warm, a.pivots, a.sample, a.sweep, a.seed, log) for s in a.marginals]
    print(report(results, a.rows))
