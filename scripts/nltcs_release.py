"""Release NLTCS's marginal tables with K-norm from a prepared file, against Laplace (issue 49).

The public table is :func:`knorm.datasets.nltcs` (21,574 records × 16 binary attributes,
65,536 cells); the workload all k-way marginals (k = 2: 120 tables, rank 137). Given the
workload's prepared file (``knorm prepare --workload marginals --shape 2 … 2 --k 2 --out
FILE``), in this one process it times and prints:

1. ``load``: F and the prepared file, the K-norm mechanism at ε (``--epsilon``, default 1);
2. ``release``: one release of the whole table's answers (W steps of one chain);
3. per-query RMSE: K-norm's ``√E‖noise‖²/√d`` (``expected_error(rms=True)``, from the certified
   pool) against Laplace's exact ``√2·Δ₁/ε`` (Δ₁ = 120 tables, one row each per cell), and the
   released draw's own error against the truth, raw and after ``nonnegative`` (the truth is
   NLTCS's public table: shown here only because it is a public benchmark);
4. ``regions``: ``release_each`` of ``--regions`` disjoint regions (the records dealt into
   regions by a public seed; declared ``disjoint=True``), its wall seconds;
5. ``--strategies``: recommend's other rows at ε (``knorm.recommend``, prepared; slow rows may
   be dropped by ``--budget``).

    python scripts/nltcs_release.py --prepared nltcs2.knorm --regions 200
"""

import argparse
import itertools
import os
import sys
import time

t_start = time.perf_counter()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

import numpy as np  # noqa: E402

import knorm  # noqa: E402
import knorm.implicit  # noqa: E402
from knorm.data import histogram  # noqa: E402
from knorm.datasets import nltcs, nltcs_domain  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prepared", required=True)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--regions", type=int, default=0)
    p.add_argument("--strategies", action="store_true")
    p.add_argument("--budget", type=float, default=120.0, help="recommend's budget_s")
    a = p.parse_args()
    X = nltcs()
    x = histogram(X, nltcs_domain()).astype(float)
    # the workload by its structure: never a d × 65,536 matrix (F.matrix() makes it for nonnegative below)
    F = knorm.implicit.marginals((2,) * 16, list(itertools.combinations(range(16), a.k)))
    w = knorm.load_prepared(a.prepared, F)
    m = knorm.KNormMechanism(F, epsilon=a.epsilon, prepared=w)
    t_load = time.perf_counter() - t_start
    t = time.perf_counter()
    ans = m.release(x)
    t_rel = time.perf_counter() - t
    print(f"load (import, data, F {F.d}×{F.n} by its structure, file, mechanism): {t_load:.1f} s; first release "
          f"{t_rel:.1f} s; {t_load + t_rel:.1f} s from the process's start")
    d = F.d
    truth = F.apply(x)
    rms = m.expected_error(rms=True)
    lap = knorm.LaplaceMechanism(F, epsilon=a.epsilon)
    lap_rms = lap.expected_error(rms=True)
    print(f"per-query RMSE at ε = {a.epsilon:g}: K-norm {rms.value / np.sqrt(d):.2f} ± {rms.stderr / np.sqrt(d):.2f} "
          f"(certified pool), Laplace {lap_rms.value / np.sqrt(d):.2f} (exact); ratio "
          f"{lap_rms.value / rms.value:.2f}")
    nn = knorm.postprocess.nonnegative(F.matrix(), ans)
    print(f"this release's per-query error: raw {np.linalg.norm(ans - truth) / np.sqrt(d):.2f}, after nonnegative "
          f"{np.linalg.norm(nn - truth) / np.sqrt(d):.2f}")
    if a.regions:
        reg = np.random.default_rng(0).integers(0, a.regions, len(X))
        R = np.stack([histogram(X[reg == g], nltcs_domain()) for g in range(a.regions)]).astype(float)
        t = time.perf_counter()
        out = m.release_each(R, disjoint=True)
        print(f"{a.regions} regions (release_each, disjoint by declaration): {time.perf_counter() - t:.1f} s, "
              f"answers {out.shape}; claim: {m.privacy}")
    if a.strategies:
        t = time.perf_counter()
        rec = knorm.recommend(F, epsilon=a.epsilon, prepared=w, budget_s=a.budget)
        print(f"recommend ({time.perf_counter() - t:.1f} s):")
        print(rec)


if __name__ == "__main__":
    main()
