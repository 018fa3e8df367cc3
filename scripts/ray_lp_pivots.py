"""Pivots of one chord: knorm's parametric walk against a simplex on the ray-shooting LP (issue 36).

A billiard leg (and a hit-and-run chord) goes from x inside K along u to the boundary. knorm's
``move`` walks there with a parametric right-hand side (design §2.6): one pivot per facet cone the
segment crosses. The other way is to solve for the exit point directly, the LP

    max s  :  F w⁺ − F w⁻ − s·u = x,  Σ w⁺ + Σ w⁻ ≤ 1,  w ≥ 0,

with HiGHS's simplex (``highspy``, an optional import): warm-started from the gauge's optimal basis at
x (its r columns basic, and the norm row's slack), primal and dual, and cold. Both find the same s
(printed). For 2-way marginals over a domain (rows shuffled), in the first rounded frame
``chol(FFᵀ/n)``, from the states of one billiard chain; counts, not timings.

    python scripts/ray_lp_pivots.py --marginals 2 3 4 5 6 7 --legs 6
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm import workloads as W  # noqa: E402
from knorm.body.hull import SymmetricHull  # noqa: E402
from knorm.walks.chains import Chain, default_params, run_chains  # noqa: E402
from knorm.walks.sampler import _start_points  # noqa: E402


def ray_lp(A, x, u, basis=None, primal=True):
    """HiGHS's simplex on the ray LP; ``(s, iterations)``. ``basis``: knorm's column codes
    (c < n: +f_c, else −f_{c−n}), the warm start; None: HiGHS's own start."""
    import highspy
    import scipy.sparse as sp

    r, n = A.shape
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("presolve", "off")
    h.setOptionValue("solver", "simplex")
    h.setOptionValue("simplex_strategy", 4 if primal else 1)
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    nc = 2 * n + 1
    lp.num_col_, lp.num_row_ = nc, r + 1
    lp.col_cost_ = np.r_[np.zeros(2 * n), -1.0]  # minimise −s
    lp.col_lower_, lp.col_upper_ = np.zeros(nc), np.full(nc, inf)
    lp.row_lower_, lp.row_upper_ = np.r_[x, -inf], np.r_[x, 1.0]
    M = sp.csc_matrix(np.block([[A, -A, -u[:, None]], [np.ones((1, 2 * n)), np.zeros((1, 1))]]))
    mat = lp.a_matrix_
    mat.format_ = highspy.MatrixFormat.kColwise
    mat.start_, mat.index_, mat.value_, mat.num_col_, mat.num_row_ = M.indptr, M.indices, M.data, nc, r + 1
    h.passModel(lp)
    if basis is not None:
        b = highspy.HighsBasis()
        cols = [highspy.HighsBasisStatus.kLower] * nc
        for c in basis:
            cols[int(c)] = highspy.HighsBasisStatus.kBasic
        b.col_status = cols
        b.row_status = [highspy.HighsBasisStatus.kLower] * r + [highspy.HighsBasisStatus.kBasic]
        b.valid = True
        h.setBasis(b)
    h.run()
    info = h.getInfo()
    return -info.objective_function_value, info.simplex_iteration_count


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--marginals", type=int, nargs="+", default=[2, 3, 4, 5, 6], help="attribute sizes")
    p.add_argument("--legs", type=int, default=8, help="chords measured (one billiard step apart)")
    a = p.parse_args(argv)
    F = W.marginals(tuple(a.marginals), 2)
    F = F[np.random.default_rng(1).permutation(F.shape[0])]
    base = SymmetricHull(F).frame
    frame = base.mapped(np.linalg.cholesky(base.Ft.T @ base.Ft / base.n + 1e-12 * np.eye(base.r)))
    A = np.asarray(frame.cols.matrix())  # the oracle's columns, in its own coordinates
    A = np.ascontiguousarray(A if A.shape[0] == frame.r else A.T)  # (r × n)
    rng = np.random.default_rng(2)
    params = default_params("billiard", frame, 1)
    chain = Chain(frame, _start_points(frame, 1, rng)[0], rng)
    run_chains([chain], "billiard", 6, 6, params, workers=1)  # off the start point
    rows = []
    for leg in range(a.legs):
        run_chains([chain], "billiard", 1, 1, params, workers=1)
        x, u = frame.to_oracle(chain.x), rng.standard_normal(frame.r)
        st = frame.crash_basis()
        frame.solve(x, st, True)
        basis, p0 = st.basis.copy(), int(st.ctr[1])
        s, _ = frame.move(x, u, np.inf, st, oracle=True)
        got = (int(st.ctr[1]) - p0, *(ray_lp(A, x, u, b, primal) for b, primal in
                                      ((basis, True), (basis, False), (None, True))))
        rows.append((got[0], got[1][1], got[2][1], got[3][1]))
        print(f"chord {leg}: s = {s:.9g} (HiGHS {got[1][0]:.9g}, {got[2][0]:.9g}, {got[3][0]:.9g}); pivots: "
              f"parametric {rows[-1][0]}, primal warm {rows[-1][1]}, dual warm {rows[-1][2]}, primal cold {rows[-1][3]}",
              flush=True)
    med = np.median(np.array(rows), axis=0)
    print(f"2-way marginals over {tuple(a.marginals)}: r = {frame.r}, n = {frame.n}; median pivots per chord: "
          f"parametric {med[0]:g}, HiGHS primal warm {med[1]:g}, dual warm {med[2]:g}, primal cold {med[3]:g}")


if __name__ == "__main__":
    main()
