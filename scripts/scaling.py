"""Scaling study: ESS/s, steps/s and pivots per step of each walk vs d and n.

Random ±1 F with d ∈ {10, 20, 40, 80} and n ∈ {d, 5d, 25d}; writes scaling.csv and
scaling.png (with matplotlib). A few seconds per configuration, plus rounding.

    python scripts/scaling.py --out-dir /tmp/scaling
    python scripts/scaling.py --d 10 20 --seconds 1

With ``--family`` it measures the workloads of the engine issue instead, one size at a
time, from a cold body: rounding seconds, first certified K-norm release, 1000 further
releases, billiard pivots per step, µs per pivot, τ and min-coordinate ESS/s; writes
scaling_<family>.csv row by row. A size that fails (OracleError, LinAlgError, …) or
runs past ``--size-timeout`` is a row saying so (status, stage, message); the study
goes on with the next size.

    python scripts/scaling.py --family marginals --attributes 6 8 10 12 14
    python scripts/scaling.py --family pm1 --d 40 60 80 100 120      # n = 5d
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm import experiments as E  # noqa: E402


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=["marginals", "pm1"], help="the engine issue's workloads (see above)")
    p.add_argument("--attributes", type=int, nargs="+", default=[6, 8, 10, 12, 14],
                   help="--family marginals: 2-way marginals of this many binary attributes")
    p.add_argument("--d", type=int, nargs="+", default=None,
                   help="d values (default 10 20 40 80; --family pm1: 40 60 80 100 120, n = 5d)")
    p.add_argument("--factors", type=int, nargs="+", default=[1, 5, 25], help="n = factor · d")
    p.add_argument("--walks", nargs="+", default=["billiard", "hit_and_run", "coordinate", "ball"])
    p.add_argument("--seconds", type=float, default=None,
                   help="sampling time per configuration and walk (default 3; --family: 10)")
    p.add_argument("--pivot-seconds", type=float, default=3.0, help="--family: single-chain pivot timing")
    p.add_argument("--chains", type=int, default=4, help="--family: chains of the steady-state billiard run")
    p.add_argument("--size-timeout", type=float, default=None,
                   help="--family: seconds per size before it is recorded as a timeout (default: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=".")
    p.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    if a.family:
        sizes = a.attributes if a.family == "marginals" else (a.d or [40, 60, 80, 100, 120])
        print("JIT warm-up ...", flush=True)
        E.measure_workload(E.family_workload("marginals", 4), seconds=0.2, pivot_seconds=0.1)
        E.scaling_family(a.family, sizes, seconds=10.0 if a.seconds is None else a.seconds,
                         pivot_seconds=a.pivot_seconds, chains=a.chains, seed=a.seed, out_dir=a.out_dir,
                         measure=None if a.size_timeout is None else E.measure_with_timeout(a.size_timeout),
                         out=lambda s: print(s, flush=True))
    else:
        E.scaling(a.d or [10, 20, 40, 80], a.factors, a.walks, seconds=3.0 if a.seconds is None else a.seconds,
                  seed=a.seed, out_dir=a.out_dir, plot_path=not a.no_plot)
