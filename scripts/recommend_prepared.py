"""knorm.recommend once a workload is prepared: the first call computes the table, later calls reuse it.

For 2-way marginals over a product domain (rows shuffled, as a user's file might hold them):
``knorm.prepare`` (the rounding), the first ``recommend(F, epsilon=1, prepared=P)`` (every row
computed, each kept ε-free in P; per-row seconds printed), ``P.save`` / ``load_prepared`` and a
second call at another ε from the loaded file (rows divided by ε, the chosen mechanism built):

    python scripts/recommend_prepared.py --shape 2 3 4 5 6 7
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import knorm  # noqa: E402
from knorm import workloads as W  # noqa: E402


def timed(f):
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - t, time.process_time() - c


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs="+", default=[2, 3, 4, 5, 6], help="attribute sizes")
    p.add_argument("--epsilon", type=float, default=0.5, help="ε of the second call (the first is at 1)")
    p.add_argument("--keep", default=None, help="also keep the prepared file here (a .knorm path)")
    a = p.parse_args()
    F = W.marginals(tuple(a.shape), 2)
    F = F[np.random.default_rng(1).permutation(F.shape[0])]
    P, w, c = timed(lambda: knorm.prepare(F))
    print(f"{tuple(a.shape)} d={F.shape[0]} n={F.shape[1]} r={P.body.dim}: prepare {w:.1f} s (cpu {c:.1f})", flush=True)
    first, w, c = timed(lambda: knorm.recommend(F, epsilon=1.0, prepared=P))
    rows = ", ".join(f"{k} {r.seconds:.1f}" for k, r in first.table.items() if r.seconds is not None)
    print(f"  first recommend {w:.1f} s (cpu {c:.1f}); best {first.best}; row seconds: {rows}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = P.save(a.keep or os.path.join(tmp, "w.knorm"))
        size = os.path.getsize(path)
        Q, w, c = timed(lambda: knorm.load_prepared(path, F))
        print(f"  file {size / 2**20:.1f} MiB; load {w:.2f} s (cpu {c:.2f})", flush=True)
        again, w, c = timed(lambda: knorm.recommend(F, epsilon=a.epsilon, prepared=Q))
    same = all(abs(again.table[k].rms * a.epsilon - r.rms) <= 1e-9 * r.rms for k, r in first.table.items()
               if r.rms is not None and k != "gaussian")
    print(f"  recommend at ε = {a.epsilon:g} from the loaded file {w:.2f} s (cpu {c:.2f}); best {again.best} "
          f"({type(again.mechanism).__name__}); rows = first/ε: {same}", flush=True)
