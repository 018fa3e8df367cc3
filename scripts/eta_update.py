"""Time the simplex's B⁻¹ eta update (``knorm.body._simplex._eta_update``) of one or more checkouts.

For each rank r, a random r × r B⁻¹, a column and pivot row 3; the best of 5 runs of as many
updates as make about 2·10⁷ entries (the same kernel, called from a small numba loop: it is an
inner kernel with no Python wrapper). Each checkout runs in a fresh process, alternated
``--repeats`` times, so the ratios come from one run (the machine may be shared):

    python scripts/eta_update.py --checkout /tmp/knorm-base . --ranks 95 299 697 --repeats 2
"""

import argparse
import json
import os
import subprocess
import sys

RUN = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from numba import njit
from knorm.body._simplex import _eta_update

@njit
def loop(B, col, u, rowp, nrm, reps):
    for _ in range(reps):
        _eta_update(B, col, u, 3, 1.0, rowp, nrm)

out = {}
for r in json.loads(sys.argv[2]):
    rng = np.random.default_rng(0)
    B, col = rng.standard_normal((r, r)), rng.standard_normal(r)
    u, rowp, nrm = np.empty(r), np.empty(r), np.zeros(r)
    reps = max(20, int(2e7 / r**2))
    loop(B.copy(), col, u, rowp, nrm, 1)
    best = np.inf
    for _ in range(5):
        Bs = B.copy()
        t = time.perf_counter()
        loop(Bs, col, u, rowp, nrm, reps)
        best = min(best, (time.perf_counter() - t) / reps)
    out[r] = best * 1e6
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", nargs="+", default=["."])
    p.add_argument("--ranks", type=int, nargs="+", default=[95, 299, 697])
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    if a.repeats < 1 or any(r < 4 for r in a.ranks):
        p.error("--repeats >= 1 and --ranks >= 4")
    times: dict[str, list[dict[str, float]]] = {c: [] for c in a.checkout}
    for _ in range(a.repeats):
        for c in a.checkout:
            env = {**os.environ, "NUMBA_CACHE_DIR": os.path.join("/tmp", "eta-update-" + os.path.basename(os.path.abspath(c)))}
            proc = subprocess.run([sys.executable, "-c", RUN, os.path.abspath(c), json.dumps(a.ranks)],
                                  capture_output=True, text=True, env=env)
            line = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")]
            if proc.returncode != 0 or not line:
                sys.exit(f"{c}: failed:\n{proc.stderr[-2000:]}")
            times[c].append(json.loads(line[-1][7:]))
    base = a.checkout[0]
    print("| r | " + " | ".join(f"{c} µs" for c in a.checkout) + " | " +
          " | ".join(f"{c} / {base}" for c in a.checkout[1:]) + " |")
    for r in a.ranks:
        cells = [", ".join(f"{t[str(r)]:.2f}" for t in times[c]) for c in a.checkout]
        ratios = [", ".join(f"{t[str(r)] / b[str(r)]:.3f}" for t, b in zip(times[c], times[base]))
                  for c in a.checkout[1:]]
        print(f"| {r} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
