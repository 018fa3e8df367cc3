"""A release from a prepared workload: prepare once, then a fresh process loads the file and releases.

For each workload and each checkout given (this one by default), in fresh processes:

1. ``prepare``: ``knorm.prepare(F, FILE)`` (skipped when FILE exists in ``--dir``: prepare is
   deterministic, its files are reused across invocations), timed;
2. ``first release``: a fresh process imports knorm, loads F and FILE (``load_prepared``) and
   releases ``KNormMechanism(F, epsilon=1, prepared=W).release(x)``: wall seconds from before
   the import to the answer, with the load and the release on their own;
3. ``1000 more``: the same mechanism's next 1000 releases of one answer each (wall).

Rows of F are shuffled (``--order`` seeds it) as a user's file might hold them. Checkouts are
compared in one invocation (the machine may be shared: ratios, same run); a checkout from
before certification (``git worktree add /tmp/knorm-before 631b589``) releases from its own
prepared file through its per-run certified pool:

    python scripts/release_prepared.py --shape 2 3 4 5 6 7 --checkout . /tmp/knorm-before
    python scripts/release_prepared.py --shape 2 2 2 2 2 2 2 2 2 2 --pm1 100 500 --more 1000

``--shape`` (repeatable through ``--binary K``: K binary attributes) gives 2-way marginals over
that domain; ``--pm1 D N`` a random ±1 matrix (seed 0).
"""

import argparse
import hashlib
import os
import subprocess
import sys

PREPARE = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
t0 = time.perf_counter()
import knorm
F = np.load(sys.argv[2])
w = knorm.prepare(F, sys.argv[3])
c = getattr(w, "certificate", None)  # None before certification (a checkout from before it)
print(f"  prepare {time.perf_counter() - t0:.1f} s wall, cpu {time.process_time():.1f} s; rank {w.body.dim}"
      + (f"; {c.summary()}" if c is not None else ""), flush=True)
"""

RELEASE = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import numpy as np
import knorm
t1 = time.perf_counter()
F = np.load(sys.argv[2])
w = knorm.load_prepared(sys.argv[3], F)
t2 = time.perf_counter()
m = knorm.KNormMechanism(F, epsilon=1.0, prepared=w)
x = np.zeros(F.shape[1])
a = m.release(x)
t3 = time.perf_counter()
info = m.last_info
more = int(sys.argv[4])
for _ in range(more):
    m.release(x)
t4 = time.perf_counter()
print(f"  first release {t3 - t0:.1f} s wall (import {t1 - t0:.1f}, load {t2 - t1:.1f}, release {t3 - t2:.1f}; "
      f"{info.steps} steps, {info.chains} chain(s), thin {info.thin}, {info.pivots / max(1, info.steps):.0f} "
      f"pivots/step) | {more} more releases {t4 - t3:.1f} s | cpu {time.process_time():.1f} s", flush=True)
"""


WARM = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import knorm
from knorm import workloads as W
F = W.random_pm1(6, 20, rng=0)
knorm.KNormMechanism(F, epsilon=1.0, prepared=knorm.prepare(F)).release(np.zeros(20))
"""


def workload(args):
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from knorm import workloads as W

    out = []
    for shape in args.shape or []:
        F = W.marginals(tuple(shape), 2)
        out.append((f"2-way marginals over {tuple(shape)}", F))
    for d, n in args.pm1 or []:
        out.append((f"random ±1 {d}×{n}", W.random_pm1(d, n, rng=0)))
    shuffled = []
    for label, F in out:
        if args.order:
            F = F[np.random.default_rng(args.order).permutation(F.shape[0])]
        shuffled.append((label, F))
    return shuffled


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs="+", action="append", help="attribute sizes of a 2-way marginal workload")
    p.add_argument("--binary", type=int, action="append", default=[], help="2-way marginals of K binary attributes")
    p.add_argument("--pm1", type=int, nargs=2, action="append", metavar=("D", "N"), help="a random ±1 D×N matrix")
    p.add_argument("--checkout", nargs="+", default=[os.path.dirname(os.path.dirname(os.path.abspath(__file__)))],
                   help="knorm checkouts to compare (each imported from its own directory)")
    p.add_argument("--dir", default="prepared-bench", help="folder for the matrices and prepared files")
    p.add_argument("--more", type=int, default=1000, help="releases after the first (default 1000)")
    p.add_argument("--order", type=int, default=1, help="seed of the rows' shuffle (0: as built)")
    a = p.parse_args()
    a.shape = (a.shape or []) + [[2] * k for k in a.binary]
    if not a.shape and not a.pm1:
        p.error("give a workload: --shape, --binary or --pm1")
    if a.more < 0:
        p.error("--more: a count >= 0")
    os.makedirs(a.dir, exist_ok=True)
    import numpy as np

    for root in a.checkout:  # numba compiles (and caches) each checkout's kernels: not timed
        subprocess.run([sys.executable, "-c", WARM, os.path.abspath(root)], check=True)

    for label, F in workload(a):
        key = hashlib.sha256(F.tobytes()).hexdigest()[:12]
        fpath = os.path.join(a.dir, f"F-{key}.npy")
        np.save(fpath, F)
        print(f"{label}: F {F.shape}, rows shuffled (order {a.order})", flush=True)
        for root in a.checkout:
            root = os.path.abspath(root)
            tag = hashlib.sha256(root.encode()).hexdigest()[:8]
            wpath = os.path.join(a.dir, f"W-{key}-{tag}.knorm")
            print(f" {root}:", flush=True)
            if not os.path.exists(wpath):
                subprocess.run([sys.executable, "-c", PREPARE, root, fpath, wpath], check=True)
            subprocess.run([sys.executable, "-c", RELEASE, root, fpath, wpath, str(a.more)], check=True)
