"""CPU seconds of a billiard chain step of one checkout, on k-way marginals over a domain given as a dense
matrix (recognised from its entries: the tables or the transform, whichever the cost model picks).

The first frame ``chol(FFᵀ/n)``; one chain from the centre with ``default_rng(5)``, 2 steps, then
``--steps`` timed (CPU time of this process). Prints one JSON line with the pivots per step and a hash
of the end point (the same hash from two checkouts: the same bits). Alternate checkouts in fresh
processes to compare (docs/benchmarks.md, "Census, 2-way, after the session's engine changes"):

    for i in 1 2; do for c in /tmp/knorm-base .; do
      python scripts/chain_step.py --checkout $c --shape 2 2 3 4 5 5 6 8 --k 2 --steps 3
    done; done

``--operator dense|tables|transform`` forces the pivot's product (a comparison of paths, as
``scripts/prepare_projection.py --operator``).
"""

import argparse
import hashlib
import json
import os
import sys
import time


def first_frame(frame):
    """The frame ``chol(FFᵀ/n)`` of a body's frame (the rounding's first map)."""
    import numpy as np

    r, n = frame.r, frame.n
    Ft = frame.Ft
    return frame.mapped(np.linalg.cholesky(Ft.T @ Ft / n + 1e-12 * np.eye(r)))


def time_steps(frame, steps):
    """One chain from the centre (``default_rng(5)``), 2 steps, then ``steps`` timed: CPU s and pivots
    per step, µs per pivot, and a hash of the end point."""
    import numpy as np
    from knorm.walks import chains as C

    params = C.default_params("billiard", frame)
    chain = C.Chain(frame, np.zeros(frame.r), np.random.default_rng(5))
    chain.run("billiard", 2, 2, params)
    p0 = chain.pivots
    c = time.process_time()
    chain.run("billiard", steps, steps, params)
    cpu = time.process_time() - c
    piv = chain.pivots - p0
    return {"step_cpu_s": cpu / steps, "step_pivots": piv / steps, "step_us_per_pivot": 1e6 * cpu / piv,
            "step_bits": hashlib.sha1(np.ascontiguousarray(chain.x).tobytes()).hexdigest()[:12]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", default=".", help="the checkout whose knorm is timed")
    p.add_argument("--shape", type=int, nargs="+", required=True)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--operator", choices=["auto", "dense", "tables", "transform"], default="auto",
                   help="the pivot's product: the body's choice (default), or forced (as prepare_projection.py)")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.checkout))
    import numpy as np
    from knorm import workloads as W
    from knorm.body import hull
    from knorm.body.hull import SymmetricHull

    if a.operator != "auto":  # the body's cost model, overridden
        hull.STRUCTURED_ABOVE = np.inf if a.operator == "dense" else 0.0
        hull.plan_ops = lambda st, r: 0.0 if a.operator == "tables" else np.inf
        hull.spectral_cost = lambda st, r: 0.0 if a.operator == "transform" else np.inf

    frame = first_frame(SymmetricHull(W.marginals(tuple(a.shape), a.k)).frame)
    print(json.dumps({"checkout": a.checkout, "r": frame.r, "product": frame.cols.structured or "dense",
                      **time_steps(frame, a.steps)}), flush=True)

if __name__ == "__main__":
    main()
