"""Time to a first certified K-norm release on 2-way marginals over a product domain.

For each checkout given (this one by default), in a fresh process each, alternating:
the body of ``knorm.workloads.marginals(shape, 2)`` with its rows shuffled (as a user's
file might hold them), its rounding, and the first release of a fresh
``KNormMechanism(F, epsilon=1, rng=0)`` (warm-up and one certified run that banks 1000
draws). Prints one line per run: rounding seconds (wall, CPU), iterations and eigenvalue
spread, the first run's steps, thinning, pivots per step and min ESS, and the total.
Compare checkouts in one invocation (the machine may be shared: ratios, same run):

    python scripts/first_release.py --shape 2 3 4 5 6 --checkout . /tmp/knorm-before
"""

import argparse
import os
import subprocess
import sys

CHILD = r"""
import os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from knorm import workloads as W
from knorm.body import SymmetricHull
from knorm.mechanisms import KNormMechanism
from knorm.walks.sampler import rounding_of
shape = tuple(int(s) for s in sys.argv[2].split(","))
F = W.marginals(shape, 2)
F = F[np.random.default_rng(1).permutation(F.shape[0])]
t0, c0 = time.perf_counter(), time.process_time()
K = SymmetricHull(F)
rnd = rounding_of(K)
tr, cr = time.perf_counter() - t0, time.process_time() - c0
mech = KNormMechanism(F, epsilon=1.0, rng=0, body=K)
t, c = time.perf_counter(), time.process_time()
mech.release(np.zeros(F.shape[1]))
tf, cf = time.perf_counter() - t, time.process_time() - c
i = mech.last_info
print(f"{sys.argv[1]} {shape} r={K.dim}: rounding {tr:.1f} s (cpu {cr:.1f}), {rnd.iterations} it, spread "
      f"{rnd.eigen_spread:.2f} | first run {tf:.1f} s (cpu {cf:.1f}), {i.steps} steps, thin {i.thin}, "
      f"{i.pivots / i.steps:.0f} pivots/step, min ESS {i.min_ess:.0f}, certified {i.converged} | "
      f"first release {tr + tf:.1f} s (cpu {cr + cf:.1f}); load {os.getloadavg()[0]:.1f}", flush=True)
"""

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs="+", default=[2, 3, 4, 5, 6], help="attribute sizes")
    p.add_argument("--checkout", nargs="+", default=[os.path.dirname(os.path.dirname(os.path.abspath(__file__)))],
                   help="knorm checkouts to compare (each imported from its own directory)")
    p.add_argument("--repeat", type=int, default=1, help="rounds over the checkouts")
    a = p.parse_args()
    if any(k < 1 for k in a.shape) or len(a.shape) < 2:
        p.error("--shape: at least two attribute sizes, each >= 1")
    for _ in range(a.repeat):
        for root in a.checkout:
            subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(root), ",".join(map(str, a.shape))], check=True)
