"""Time to a first certified K-norm release on 2-way marginals over a product domain.

For each checkout given (this one by default), in a fresh process each, alternating:
the body of ``knorm.workloads.marginals(shape, 2)`` with its rows shuffled (as a user's
file might hold them; ``--order`` seeds the shuffle), its rounding, and the first release of a fresh
``KNormMechanism(F, epsilon=1, rng=0)`` (warm-up and one certified run that banks 1000
draws). Prints one line per run: rounding seconds (wall, CPU), iterations and eigenvalue
spread, the first run's steps, thinning, pivots per step and min ESS, and the total.
Compare checkouts in one invocation (the machine may be shared: ratios, same run):

    python scripts/first_release.py --shape 2 3 4 5 6 --checkout . /tmp/knorm-before

Scaling over cores (lever 4 of the engine issue): ``--workers 1 2 4`` runs each count in
turn, as threads of this process (the default back end) or, with ``--dask``, as that many
single-threaded worker processes of a Dask ``LocalCluster`` (``knorm.distributed.DaskExecutor``);
seeded draws are the same for every count, so only the time moves:

    python scripts/first_release.py --shape 2 3 4 5 6 --workers 1 2 4 --dask
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
workers, dask = int(sys.argv[3]), sys.argv[4] == "dask"
if dask:
    from dask.distributed import Client, LocalCluster
    from knorm.distributed import DaskExecutor
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    pool = DaskExecutor(Client(cluster))
else:
    pool = workers
F = W.marginals(shape, 2)
order = int(sys.argv[5])
if order:
    F = F[np.random.default_rng(order).permutation(F.shape[0])]
t0, c0 = time.perf_counter(), time.process_time()
K = SymmetricHull(F)
rnd = rounding_of(K, pool)
tr, cr = time.perf_counter() - t0, time.process_time() - c0
mech = KNormMechanism(F, epsilon=1.0, rng=0, body=K, sampler_options={"workers": pool})
t, c = time.perf_counter(), time.process_time()
ans = mech.release(np.zeros(F.shape[1]))
tf, cf = time.perf_counter() - t, time.process_time() - c
i = mech.last_info
print(f"{sys.argv[1]} {shape} r={K.dim} {'dask processes' if dask else 'threads'} {workers}: rounding {tr:.1f} s (cpu {cr:.1f}), {rnd.iterations} it, spread "
      f"{rnd.eigen_spread:.2f} | first run {tf:.1f} s (cpu {cf:.1f}), {i.steps} steps, thin {i.thin}, "
      f"{i.pivots / i.steps:.0f} pivots/step, min ESS {i.min_ess:.0f}, certified {i.converged} | "
      f"first release {tr + tf:.1f} s (cpu {cr + cf:.1f}, this process only); load {os.getloadavg()[0]:.1f}; "
      f"answers[:2] {np.round(np.asarray(ans).ravel()[:2], 6)}", flush=True)
if dask:
    pool.shutdown(); cluster.close()
"""

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs="+", default=[2, 3, 4, 5, 6], help="attribute sizes")
    p.add_argument("--checkout", nargs="+", default=[os.path.dirname(os.path.dirname(os.path.abspath(__file__)))],
                   help="knorm checkouts to compare (each imported from its own directory)")
    p.add_argument("--repeat", type=int, default=1, help="rounds over the checkouts")
    p.add_argument("--workers", type=int, nargs="+", default=[2], help="worker counts to run in turn (default 2)")
    p.add_argument("--order", type=int, default=1,
                   help="seed of the rows' shuffle (default 1; 0: the rows as knorm.workloads.marginals builds them)")
    p.add_argument("--dask", action="store_true", help="workers are processes of a Dask LocalCluster, not threads")
    a = p.parse_args()
    if any(k < 1 for k in a.shape) or len(a.shape) < 2:
        p.error("--shape: at least two attribute sizes, each >= 1")
    if any(w < 1 for w in a.workers):
        p.error("--workers: each count >= 1")
    for _ in range(a.repeat):
        for root in a.checkout:
            for w in a.workers:
                subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(root), ",".join(map(str, a.shape)),
                                str(w), "dask" if a.dask else "threads", str(a.order)], check=True)
