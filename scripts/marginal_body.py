"""The body of a marginal workload known by its structure against the same workload as a dense matrix.

Every ≤k-way marginal of ``m`` binary attributes (k = 3, m = 16: 4,993 × 65,536, rank 697, NLTCS's
shape). Each measurement runs in a fresh process (peak RSS is per process), alternating structure
and dense ``--pairs`` times, so the ratios come from one run on one machine. The dense matrix is
made before the clock starts (its 2.4 GiB are in the dense peak; the structured one never makes it);
the fingerprint of F (the SHA-256 that names the body) is inside both timings.

    python scripts/marginal_body.py                   # m = 16, k = 3, 2 pairs
    python scripts/marginal_body.py --attributes 12   # rank 299
"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import itertools, json, resource, sys, time
import knorm.implicit as I
from knorm.body.hull import SymmetricHull
from knorm.body.marginal_ops import as_marginal, dense_marginal
m, k, given = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
w = I.marginals((2,) * m, [c for j in range(k + 1) for c in itertools.combinations(range(m), j)])
F = w if given == "structure" else dense_marginal(as_marginal(w))
cpu, wall = time.process_time(), time.perf_counter()
body = SymmetricHull(F)
print(json.dumps({"given": given, "rank": body.dim, "d": body.ambient_dim, "n": body.n_columns,
                  "cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "pivot_product": body.frame.cols.structured, "dense_F_made": body._F is not None}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attributes", type=int, default=16)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    rows = []
    for _ in range(args.pairs):
        for given in ("structure", "dense"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.attributes), str(args.k), given],
                                 check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"{r['given']:>9}: rank {r['rank']} ({r['d']} × {r['n']}): {r['cpu_s']:.1f} CPU s, "
                  f"{r['wall_s']:.1f} s wall, peak {r['peak_gib']:.2f} GiB, product {r['pivot_product']}, "
                  f"dense F made: {r['dense_F_made']}", flush=True)
    for key in ("cpu_s", "peak_gib"):
        s = sorted(r[key] for r in rows if r["given"] == "structure")
        d = sorted(r[key] for r in rows if r["given"] == "dense")
        print(f"{key}: structure median {s[len(s) // 2]:.2f}, dense {d[len(d) // 2]:.2f} "
              f"({d[len(d) // 2] / s[len(s) // 2]:.1f}×)")


if __name__ == "__main__":
    main()
