"""What the strategy mechanisms cost and reach on large workloads given implicitly (knorm.implicit).

Two tables, per-query RMSE = √(E‖err‖₂²/d) at ε = √2 (HDMM's measure), with wall-clock seconds:

1. ``--cost``: p-Identity's search time against n (one start, p = n/16, prefix), the cost that
   recommend weighs before including it (O(n²p) per L-BFGS-B step, at most ``maxiter`` steps).
2. ``--targets``: identity, hierarchical (HB: no root, b over 2..n), p-Identity on the
   flattened cells, Kronecker p-Identity and Kronecker hierarchical, on implicit workloads (no d × n matrix built):
   all ranges and prefix over n cells, all boxes of a k × k grid. HDMM's published or measured
   numbers for comparison: prefix 1024 6.78, all ranges 1024 7.85, prefix 2048 7.69, 2-D
   ranges 32 × 32 9.07 (identity 11.33).

Run with one BLAS thread for comparable timings::

    OMP_NUM_THREADS=1 python scripts/strategy_cost.py --cost --max-n 1024
    OMP_NUM_THREADS=1 python scripts/strategy_cost.py --targets all_range:1024 prefix:2048 ranges:32
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from knorm import implicit
from knorm.mechanisms import (HierarchicalMechanism, IdentityMechanism, KroneckerHierarchicalMechanism,
                              KroneckerPIdentityMechanism, PIdentityMechanism)

EPS = float(np.sqrt(2))


def per_query(m, W) -> float:
    return float(np.sqrt(m.expected_squared_error() / W.d))


def timed(make):
    t0 = time.perf_counter()
    m = make()
    return m, time.perf_counter() - t0


def cost(max_n: int) -> None:
    print("| n | p | iterations | seconds (one start) | per-query RMSE, prefix |")
    print("|---|---|---|---|---|")
    n = 128
    while n <= max_n:
        W = implicit.prefix(n)
        m, s = timed(lambda: PIdentityMechanism(W, epsilon=EPS, starts=1))
        print(f"| {n} | {m.p} | {m.optimization['iterations']} | {s:.1f} | {per_query(m, W):.4f} |", flush=True)
        n *= 2


def targets(names: list[str], p_identity_max_n: int) -> None:
    print("| workload | d | identity | hierarchical (b, levels) | p-identity | Kronecker p-identity | "
          "Kronecker hierarchical |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        kind, size = name.split(":")
        k = int(size)
        W = {"all_range": implicit.all_range, "prefix": implicit.prefix,
             "ranges": lambda k: implicit.ranges((k, k))}[kind](k)
        ident, s0 = timed(lambda: IdentityMechanism(W, epsilon=EPS))
        hier, s1 = timed(lambda: HierarchicalMechanism(W, epsilon=EPS))
        cells = [f"{per_query(ident, W):.4f} ({s0:.1f} s)",
                 f"{per_query(hier, W):.4f} (b = {hier.branching}, {hier.levels}; {s1:.1f} s)"]
        if W.n <= p_identity_max_n:
            pid, s2 = timed(lambda: PIdentityMechanism(W, epsilon=EPS))
            cells.append(f"{per_query(pid, W):.4f} ({pid.starts} start(s); {s2:.1f} s)")
        else:
            cells.append(f"— (n = {W.n} > {p_identity_max_n})")
        if len(W.shape) > 1:
            kp, s3 = timed(lambda: KroneckerPIdentityMechanism(W, epsilon=EPS))
            kh, s4 = timed(lambda: KroneckerHierarchicalMechanism(W, epsilon=EPS))
            cells += [f"{per_query(kp, W):.4f} ({s3:.1f} s)",
                      f"{per_query(kh, W):.4f} (b = {kh.branchings}; {s4:.1f} s)"]
        else:
            cells += ["— (one attribute)"] * 2
        print(f"| {name} | {W.d} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cost", action="store_true", help="p-Identity's time against n")
    ap.add_argument("--max-n", type=int, default=1024, help="largest n of --cost (doubling from 128)")
    ap.add_argument("--targets", nargs="*", default=None,
                    help="workloads kind:size, kind in all_range, prefix, ranges (k × k)")
    ap.add_argument("--p-identity-max-n", type=int, default=1024,
                    help="skip the flattened p-Identity above this many cells (its search is O(n²p) per step)")
    args = ap.parse_args()
    if args.cost:
        cost(args.max_n)
    if args.targets:
        targets(args.targets, args.p_identity_max_n)
    if not args.cost and not args.targets:
        ap.print_help()


if __name__ == "__main__":
    main()
