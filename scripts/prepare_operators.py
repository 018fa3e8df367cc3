"""Whole certified prepares of one marginal workload with the pivot's product forced, side by side.

For k-way marginals over ``--shape`` (``--binary M``: M binary attributes), rows shuffled by
``default_rng(--order)`` as ``scripts/prepare_projection.py`` does, each ``--operator`` (``dense``:
F's entries; ``transform``: the product transform; ``tables``: the marginal tables; ``auto``: the
body's own choice) runs ``knorm.prepare(F, FILE)`` in a fresh process, one after the other, and
reports its wall and CPU seconds, peak memory, the stages' wall seconds (``PreparedWorkload.stages``)
and the certificate (τ, W, max R-hat, min ESS, KS p). The prepares are seeded by knorm (public
seeds), so the operators walk the same chains up to rounding in the product. A ``--projection``
JSON (``prepare_projection.py --json`` of the same workload and operator) is read back with the
measured τ and rounding iterations put in, to check the projection against the measurement.

    python scripts/prepare_operators.py --binary 12 --k 3 --operator transform dense --dir /tmp/p299
"""

import argparse
import json
import os
import subprocess
import sys

RUN = r"""
import itertools, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import knorm
from knorm.body import hull
from knorm.body.marginal import MarginalStructure
shape, k, order, op, out = json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
if op != "auto":  # the body's cost model, overridden (as prepare_projection.py --operator)
    hull.STRUCTURED_ABOVE = np.inf if op == "dense" else 0.0
    hull.plan_ops = lambda st, r: 0.0 if op == "tables" else np.inf
    hull.spectral_cost = lambda st, r: 0.0 if op == "transform" else np.inf
F = MarginalStructure(tuple(shape), tuple(itertools.combinations(range(len(shape)), k))).matrix()
F = F[np.random.default_rng(order).permutation(F.shape[0])]
t0, c0 = time.perf_counter(), time.process_time()
w = knorm.prepare(F, out, recommend=False, resume=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
c = w.certificate
res = {"operator": op, "product": w.body.frame.cols.structured or "dense", "rank": w.body.dim,
       "wall_s": wall, "cpu_s": cpu, "peak_GiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
       "iterations": w.rounding.iterations, "tau": c.tau, "W": c.warmup, "max_rhat": c.max_rhat,
       "min_ess": c.min_ess, "pool": c.pool, "ks_p": c.gauge_ks_p,
       "stages": {s["stage"]: [s["wall_s"], s["chain_steps"]] for s in w.stages["stages"]},
       "projected_s": w.stages.get("projected_s")}
print("RESULT " + json.dumps(res), flush=True)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--shape", type=int, nargs="+")
    g.add_argument("--binary", type=int)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--order", type=int, default=1, help="seed of the row shuffle")
    p.add_argument("--operator", nargs="+", default=["transform", "dense"],
                   choices=["auto", "dense", "tables", "transform"])
    p.add_argument("--dir", required=True, help="folder for the prepared files")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    shape = [2] * a.binary if a.binary else a.shape
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(a.dir, exist_ok=True)
    results = []
    for op in a.operator:
        out = os.path.join(a.dir, f"{op}.knorm")
        proc = subprocess.run([sys.executable, "-c", RUN, root, json.dumps(shape), str(a.k), str(a.order), op, out],
                              capture_output=True, text=True)
        line = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            sys.exit(f"{op}: the prepare failed:\n{proc.stderr[-3000:]}")
        res = json.loads(line[-1][7:])
        results.append(res)
        print(f"{op:9s} ({res['product']}): rank {res['rank']}, {res['wall_s']:.0f} s wall, {res['cpu_s']:.0f} CPU s, "
              f"{res['peak_GiB']:.2f} GiB; {res['iterations']} rounding iterations; τ {res['tau']:.2f}, "
              f"W {res['W']}, R-hat {res['max_rhat']:.4f}, ESS {res['min_ess']:.0f}/{res['pool']}, "
              f"KS p {res['ks_p']:.3f}", flush=True)
        print("          stages (wall s, chain steps): " + "; ".join(f"{k} {v[0]:.1f}, {v[1]}" for k, v in
                                                                 res["stages"].items()), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
