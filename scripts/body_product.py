"""µs of one pivot product ``α = Fzᵀρ`` as a body lays it out (its oracle's coordinates and its
structured product: the tables or the transform, forced), checkouts side by side in fresh processes.

For k-way marginals over ``--shape`` (a dense matrix, recognised from its entries), each checkout in
its own process builds the body with the product forced, then times the kernel on 64 random dual
vectors in a numba loop (CPU time, best of three runs of about 2·10⁷ cell operations):

    python scripts/body_product.py --checkout /tmp/knorm-prev . --shape 2 3 3 4 4 4 --k 2
"""

import argparse
import os
import subprocess
import sys

RUN = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from numba import njit
from knorm import workloads as W
from knorm.body import hull
from knorm.body import _columns as cl
shape, k, kind = tuple(int(x) for x in sys.argv[2].split(',')), int(sys.argv[3]), sys.argv[4]
hull.STRUCTURED_ABOVE = 0.0
hull.plan_ops = (lambda s, r: 0.0) if kind == "tables" else (lambda s, r: np.inf)
hull.spectral_cost = (lambda s, r: 0.0) if kind == "transform" else (lambda s, r: np.inf)
F = W.marginals(shape, k)
K = hull.SymmetricHull(F)
assert K.frame.cols.structured == kind

@njit
def loop(A, V, out, reps):
    s = 0.0
    for q in range(reps):
        cl._all_dots(A, V[q % V.shape[0]], out)
        s += out[0]
    return s

V = np.random.default_rng(0).standard_normal((64, K.dim))
out = np.empty(F.shape[1])
loop(K.frame.A, V, out, 10)
reps = max(1000, int(2e7 / F.shape[1]))
best = np.inf
for _ in range(3):
    t0 = time.process_time()
    loop(K.frame.A, V, out, reps)
    best = min(best, (time.process_time() - t0) / reps * 1e6)
coords = "characters" if K._zscale.ndim == 2 else "span"
print(f"RESULT {K.dim} {coords} {best:.2f}", flush=True)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", nargs="+", default=["."])
    p.add_argument("--shape", type=int, nargs="+", required=True)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--operator", nargs="+", choices=["tables", "transform"], default=["tables", "transform"])
    a = p.parse_args()
    shape = ",".join(map(str, a.shape))
    print("| checkout | product | r | coordinates | µs |\n|---|---|---:|---|---:|")
    for kind in a.operator:
        for c in a.checkout:
            c = os.path.abspath(c)
            out = subprocess.run([sys.executable, "-c", RUN, c, shape, str(a.k), kind], capture_output=True, text=True)
            line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")]
            if not line:
                sys.exit(f"{c}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'no result'}")
            _, r, coords, us = line[0].split()
            print(f"| {c} | {kind} | {r} | {coords} | {us} |", flush=True)


if __name__ == "__main__":
    main()
