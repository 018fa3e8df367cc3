"""Regions per second: one workload released for many regions, a batch against a loop (issue 44).

For each workload (2-way marginals over ``--shape``, rows shuffled with ``default_rng(1)``), the
prepared file is made once into ``--dir`` (``knorm.prepare``; reused: preparing is
deterministic), then fresh processes alternate, ``--repeats`` times each:

- ``batch``: load the file, ``KNormMechanism(F, epsilon=1, prepared=W).release_each(X)``: one
  answer for each of ``--regions`` regions, the claim of one answer (parallel composition);
- ``loop``: the same mechanism, then ``m.reset(); m.release(x)`` for each region in turn (what
  a user without ``release_each`` writes; without ``reset()`` the claim would count every
  region's answer on the same data).

X holds Poisson(5) counts per cell (the regions' histograms; seed 0). Each line gives the wall
seconds of the releases alone (import and load are printed apart), regions per second, and the
batch's ratio to the loop in the same run. Both draw their noise from the bank of the
prepared workload's stationary chains; the batch asks for all its draws at once, the loop one
release (and refill) at a time.

    python scripts/regions_throughput.py --shape 2 3 3 4 4 4 --shape 2 2 3 4 4 5 5 --regions 200
"""

import argparse
import hashlib
import os
import statistics
import subprocess
import sys

RUN = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import numpy as np
import knorm
F = np.load(sys.argv[2])
w = knorm.load_prepared(sys.argv[3], F)
R, how = int(sys.argv[4]), sys.argv[5]
X = np.random.default_rng(0).poisson(5.0, (R, F.shape[1]))
m = knorm.KNormMechanism(F, epsilon=1.0, prepared=w)
t1 = time.perf_counter()
if how == "batch":
    a = m.release_each(X, disjoint=True)  # simulated regions: disjoint by declaration
else:
    a = np.empty((R, F.shape[0]))
    for i, x in enumerate(X):
        m.reset()
        a[i] = m.release(x)
t2 = time.perf_counter()
rms = float(np.sqrt(np.mean((a - X @ F.T) ** 2)))
print(f"RESULT {t2 - t1:.3f} {t1 - t0:.3f} {m.privacy.epsilon:g} {rms:.3f}", flush=True)
"""

PREPARE = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import knorm
t0 = time.perf_counter()
F = np.load(sys.argv[2])
w = knorm.prepare(F, sys.argv[3])
print(f"  prepared in {time.perf_counter() - t0:.1f} s: rank {w.body.dim}", flush=True)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs="+", action="append", required=True,
                   help="attribute sizes of a 2-way marginal workload (repeatable)")
    p.add_argument("--regions", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default="prepared-bench", help="folder for the matrices and prepared files (reused)")
    a = p.parse_args()
    if a.regions < 1 or a.repeats < 1:
        p.error("--regions and --repeats: counts >= 1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    import numpy as np
    from knorm import workloads as W

    os.makedirs(a.dir, exist_ok=True)
    for shape in a.shape:
        F = W.marginals(tuple(shape), 2)
        F = F[np.random.default_rng(1).permutation(F.shape[0])]
        key = hashlib.sha256(F.tobytes()).hexdigest()[:12]
        fpath, wpath = os.path.join(a.dir, f"F-{key}.npy"), os.path.join(a.dir, f"W-{key}.knorm")
        np.save(fpath, F)
        print(f"2-way marginals over {tuple(shape)}: F {F.shape}, {a.regions} regions", flush=True)
        if not os.path.exists(wpath):
            subprocess.run([sys.executable, "-c", PREPARE, root, fpath, wpath], check=True)
        times: dict[str, list[float]] = {"batch": [], "loop": []}
        for r in range(a.repeats):
            for how in (("batch", "loop") if r % 2 == 0 else ("loop", "batch")):
                out = subprocess.run([sys.executable, "-c", RUN, root, fpath, wpath, str(a.regions), how],
                                     check=True, capture_output=True, text=True).stdout
                sec, load, eps, rms = out.split("RESULT ")[1].split()
                times[how].append(float(sec))
                print(f"  {how:<5} {float(sec):7.2f} s ({a.regions / float(sec):7.1f} regions/s; import and load "
                      f"{float(load):.1f} s; claim ε = {eps}; RMSE per answer {rms})", flush=True)
        b, lp = statistics.median(times["batch"]), statistics.median(times["loop"])
        print(f"  median: batch {b:.2f} s ({a.regions / b:.1f} regions/s), loop {lp:.2f} s "
              f"({a.regions / lp:.1f} regions/s): batch/loop wall {b / lp:.2f}x", flush=True)


if __name__ == "__main__":
    main()
