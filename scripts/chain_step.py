"""CPU seconds of a billiard chain step of one checkout, on k-way marginals over a domain given as a dense
matrix (recognised from its entries: the tables or the transform, whichever the cost model picks).

The first frame ``chol(FFᵀ/n)``; one chain from the centre with ``default_rng(5)``, 2 steps, then
``--steps`` timed (CPU time of this process). Prints one JSON line with the pivots per step and a hash
of the end point (the same hash from two checkouts: the same bits). Alternate checkouts in fresh
processes to compare (docs/benchmarks.md, "Census, 2-way, after the session's engine changes"):

    for i in 1 2; do for c in /tmp/knorm-base .; do
      python scripts/chain_step.py --checkout $c --shape 2 2 3 4 5 5 6 8 --k 2 --steps 3
    done; done
"""

import argparse
import hashlib
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", default=".", help="the checkout whose knorm is timed")
    p.add_argument("--shape", type=int, nargs="+", required=True)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.checkout))
    import numpy as np
    from knorm import workloads as W
    from knorm.body.hull import SymmetricHull
    from knorm.walks import chains as C

    base = SymmetricHull(W.marginals(tuple(a.shape), a.k)).frame
    r, n = base.r, base.n
    Ft = base.Ft
    frame = base.mapped(np.linalg.cholesky(Ft.T @ Ft / n + 1e-12 * np.eye(r)))
    params = C.default_params("billiard", frame)
    chain = C.Chain(frame, np.zeros(r), np.random.default_rng(5))
    chain.run("billiard", 2, 2, params)
    p0 = chain.pivots
    c = time.process_time()
    chain.run("billiard", a.steps, a.steps, params)
    cpu = time.process_time() - c
    piv = chain.pivots - p0
    print(json.dumps({"checkout": a.checkout, "r": r, "product": frame.cols.structured or "dense",
                      "step_cpu_s": cpu / a.steps, "pivots_per_step": piv / a.steps, "us_per_pivot": 1e6 * cpu / piv,
                      "bits": hashlib.sha1(np.ascontiguousarray(chain.x).tobytes()).hexdigest()[:12]}), flush=True)


if __name__ == "__main__":
    main()
