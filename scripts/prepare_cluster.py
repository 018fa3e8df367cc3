"""knorm.prepare on threads, a Dask LocalCluster and a real Dask scheduler with workers: the same file, and how it scales.

Prepares 2-way marginals over ``--shape`` on ``--chains`` chains four ways, in this process:

1. threads, ``workers=1`` (every chain in the calling thread): the wall time T₁ and, timing every
   ``run_chains`` call (the chain batches, warm-ups included), the *serial share* s: the fraction
   of T₁ spent outside them (building the body, the rounding's covariance updates, the pool's
   R-hat/ESS and gauge checks, the file): the work that more chains do not spread;
2. threads, ``workers=--workers``;
3. ``dask.distributed.LocalCluster(n_workers=--workers, processes=True, threads_per_worker=1)``;
4. a real ``dask scheduler`` and ``--workers`` ``dask worker`` processes (``--nthreads 1``) started
   here, through ``knorm.distributed.DaskExecutor(address)``.

It checks that the four files hold identical arrays (a seeded prepare depends on the chain count
only), prints the wall times and s, and a *projection* (Amdahl, from the measured s; not a
measurement): ``T(p) = T₁·(s + (1 − s)/p)`` with ``p = min(cores, chains)`` (a prepare never runs
more chains at once than it has), on one machine of ``--cores`` cores and on ``--nodes`` nodes of
as many cores each; Dask's per-batch transfers are not in it (the cluster rows' ratio to threads
measures them on this machine).

    python scripts/prepare_cluster.py --shape 2 3 4 5 --chains 64 --workers 2
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import knorm
from knorm import workloads
from knorm.distributed import DaskExecutor
from knorm.walks import certify, chains, rounding, sampler


def timed_run_chains():
    """Wrap ``run_chains`` where the rounding and the sampler call it; returns the list of the calls' seconds."""
    spent = []
    real = chains.run_chains

    def run(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t)

    for module in (rounding, sampler, certify):
        module.run_chains = run
    return spent, real


def same_arrays(a, b):
    with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
        return set(x.files) == set(y.files) and all(np.array_equal(x[k], y[k]) for k in x.files)


def start_cluster(folder, workers):
    """A ``dask scheduler`` and ``workers`` ``dask worker`` processes; returns (address, processes)."""
    dask = str(Path(sys.executable).with_name("dask"))
    sched_file = str(folder / "scheduler.json")
    procs = [subprocess.Popen([dask, "scheduler", "--scheduler-file", sched_file, "--port", "0",
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for _ in range(100):
        if os.path.exists(sched_file):
            break
        time.sleep(0.1)
    for _ in range(workers):
        procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", sched_file, "--nthreads", "1",
                                       "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    import json

    for _ in range(100):
        try:
            return json.loads(Path(sched_file).read_text())["address"], procs
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    raise RuntimeError("the dask scheduler did not start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[2, 3, 4, 5], help="attribute sizes (2-way marginals)")
    ap.add_argument("--chains", type=int, default=16, help="chains of the prepare (default 16)")
    ap.add_argument("--workers", type=int, default=2, help="threads / Dask worker processes (default 2)")
    ap.add_argument("--cores", type=int, default=16, help="cores of the projected machine (default 16)")
    ap.add_argument("--nodes", type=int, default=8, help="nodes of the projected cluster (default 8)")
    args = ap.parse_args()
    from dask.distributed import Client, LocalCluster

    F = workloads.marginals(tuple(args.shape), 2)
    knorm.prepare(workloads.marginals((2, 3, 4), 2))  # kernels compiled, scipy.stats imported: before any timing
    folder = Path(tempfile.mkdtemp(prefix="knorm-cluster-"))
    files, wall = {}, {}

    def run(name, workers):
        files[name] = folder / f"{name}.knorm"
        t = time.perf_counter()
        w = knorm.prepare(F, files[name], chains=args.chains, workers=workers)
        wall[name] = time.perf_counter() - t
        return w

    spent, real = timed_run_chains()
    w = run("threads-1", 1)
    serial = 1.0 - sum(spent) / wall["threads-1"]
    for module in (rounding, sampler, certify):
        module.run_chains = real
    run(f"threads-{args.workers}", args.workers)
    with LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            Client(cl) as client:
        client.run(lambda: knorm.prepare(workloads.marginals((2, 3, 4), 2)))  # compiled on the workers too
        run(f"LocalCluster-{args.workers}", DaskExecutor(client))
    address, procs = start_cluster(folder, args.workers)
    try:
        with Client(address, timeout=30) as client:
            client.wait_for_workers(args.workers, timeout=60)
            client.run(lambda: knorm.prepare(workloads.marginals((2, 3, 4), 2)))
            run(f"scheduler+{args.workers}-workers", DaskExecutor(client))
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)
    ref = files["threads-1"]
    same = {name: same_arrays(ref, path) for name, path in files.items()}
    c = w.certificate
    print(f"knorm {knorm.__version__}: prepare of 2-way marginals over {tuple(args.shape)} (rank {w.body.dim}), "
          f"{args.chains} chains: pool {c.pool} records, {w.rounding.iterations} rounding iteration(s); "
          f"{os.cpu_count()} CPUs here")
    for name in files:
        print(f"  {name:28s} {wall[name]:7.2f} s wall  ({wall[name] / wall['threads-1']:.2f}× threads-1)  "
              f"file {'identical' if same[name] else 'DIFFERS'}")
    print(f"  serial share s = {serial:.3f} (outside the chain batches, threads-1: {wall['threads-1'] * serial:.2f} s "
          f"of {wall['threads-1']:.2f} s)")
    for label, cores in ((f"{args.cores} cores", args.cores), (f"{args.nodes} nodes × {args.cores} cores",
                                                                args.nodes * args.cores)):
        p = min(cores, args.chains)
        t = wall["threads-1"] * (serial + (1.0 - serial) / p)
        print(f"  projection (Amdahl, not measured), {label}: p = {p} chains at once, "
              f"{t:.2f} s ({wall['threads-1'] / t:.1f}× threads-1)")
    for path in files.values():
        path.unlink()
    if not all(same.values()):
        sys.exit("the files differ")


if __name__ == "__main__":
    main()
