"""One checkout's oracle costs at all ≤ k-way marginals of M binary attributes, built without the dense F
(``knorm.implicit.marginals``; M = 16, k = 3: rank 697, n = 65,536), in the first frame ``chol(FFᵀ/n)``.

Prints one JSON line, CPU seconds (this process), and short hashes of what was computed (the
same hash from two checkouts: the same bits):

* ``crash``: the body's centre crash basis (the first frame's length scale pays it) and a crash
  towards a random point (each chain's start state pays one);
* ``radius``: the first ``--radius-solves`` of ``chains.body_radius``'s directions solved in turn
  from the centre crash, as its first group does (dual simplex, steepest-edge pricing), pivots;
* ``step``: ``--steps`` billiard steps of one chain on this thread after 2 from the centre (the
  length from those solves' median), pivots.

Run it from each checkout in turn, in fresh processes, to compare (docs/benchmarks.md, "Rank 697:
where a chain step's time goes"):

    for i in 1 2; do for c in /tmp/knorm-base .; do
      PYTHONPATH=$c python scripts/pivot_costs.py --binary 16 --k 3 --radius-solves 8 --steps 1
    done; done
"""

import argparse
import hashlib
import itertools
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

import knorm.implicit as I  # noqa: E402
from knorm.body.hull import SymmetricHull  # noqa: E402
from knorm.walks import chains as C  # noqa: E402
from chain_step import first_frame, time_steps  # noqa: E402  (scripts/, this script's folder)


def _sha(*arrays):
    return hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:12]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", type=int, default=16, help="M binary attributes")
    p.add_argument("--k", type=int, default=3, help="all marginals of at most k attributes")
    p.add_argument("--radius-solves", type=int, default=8)
    p.add_argument("--steps", type=int, default=1)
    a = p.parse_args()
    cliques = [c for j in range(a.k + 1) for c in itertools.combinations(range(a.binary), j)]
    frame = first_frame(SymmetricHull(I.marginals((2,) * a.binary, cliques)).frame)
    r, n = frame.r, frame.n
    out = {"r": r, "n": n, "product": frame.cols.structured or "dense"}

    c = time.process_time()
    centre = frame.crash_basis()
    out["crash_centre_cpu_s"] = time.process_time() - c
    c = time.process_time()
    towards = frame.crash_basis(np.random.default_rng(3).standard_normal(r))
    out["crash_point_cpu_s"] = time.process_time() - c
    out["crash_bits"] = _sha(centre.basis, centre.Binv, towards.basis)

    Z = frame.to_oracle(C.radius_directions(r)[: a.radius_solves])
    st = centre.copy()
    bases = np.empty((len(Z), r), np.int64)
    c = time.process_time()
    for i, z in enumerate(Z):
        frame.solve(z, st, True)
        bases[i] = st.basis
    cpu = time.process_time() - c
    piv = int(st.ctr[1] - centre.ctr[1])
    g, _ = frame.gauges_from_bases(Z, bases, True)
    out.update(radius_solves=len(Z), radius_cpu_s=cpu, radius_pivots=piv, radius_us_per_pivot=1e6 * cpu / piv,
               radius_bits=_sha(bases, g))
    C._RADII[frame] = (float(np.median(1.0 / g)), bases)

    if a.steps:
        out.update(time_steps(frame, a.steps))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
