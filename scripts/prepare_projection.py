"""Project a prepare too large for this machine onto 8, 16 and 64 cores, from measured pieces.

For k-way marginals over ``--shape`` (``--binary M``: M binary attributes; built with the
marginal structure's own ``matrix()``, past ``knorm.workloads``' 2 GiB cap for constructors),
rows shuffled by ``default_rng(--order)``, it measures in this process:

1. ``body``: F's body (structure, span, oracle coordinates): wall and CPU seconds, peak memory;
2. ``radius``: the first frame's length scale (``body_radius``: ``radius_count(r)`` solves, 64 up to
   rank 256, in 8 groups, on ``--workers`` threads): CPU seconds (``--radius-solves K``: K of them,
   scaled to all); every
   frame the rounding walks solves one, and the certification's final frame another;
3. ``start``: a crash basis towards a point and its solve (a chain's start state,
   ``start_states``), CPU seconds, and one warm-started solve (an end-point basis);
4. ``step``: ``--workers`` billiard chains on as many threads, ``--skip`` steps from the centre,
   then ``--steps`` steps timed: CPU seconds and pivots per chain-step, in the first frame
   (``chol(F Fᵀ/n)``). A pivot is memory-bound: chains side by side slow each other (on a machine
   of many cores more than here; the projection does not model it). The rounded frames'
   steps took 0.7–1.0× these pivots at ranks 197–332 (docs/benchmarks.md), so this is the dearer
   end.

Then, for each ``--chains`` c, prepare's schedule in steps per chain (knorm's constants; the counts a
``knorm prepare --json`` reports per stage, tests/walks/test_ledger.py): the rounding's first
warm-up ``⌈20·min(1, 8/c)⌉``, ``--iterations`` iterations (at least as many as put
``20·max(τ, 2)`` steps before the last one's records) of ``max(8, ⌈s·r/c⌉)`` records (s = 2 with
the body's symmetry group, else 10); the certification's warm-up ``⌈20τ⌉`` (``--tau``:
the rounding's τ, 1.17–1.66 measured at ranks 101–332), ``⌈certify_pool(c)/c⌉`` pool records (even) at
thinning 1, ``⌈64/c⌉·2`` steps of states. The projection (not a measurement) on p cores:

    T(p) = Σ stages steps·⌈c/p⌉·step_s + body + (iterations + 1)·radius/min(8, p)
           + c·(start + solve)/min(c, p) + c·solve/min(8, p)     (iterations: the schedule's)

(chains of equal cost, at most p at once; the radius and end-point solves in 8 groups; the start
states in threads). Left out: the pool's diagnostics and the file (≤ 0.3 s at rank 101, measured by
``knorm prepare --json``). A release from the prepared file runs one chain W = ⌈20τ⌉ steps
(rounded frame): W·step_s, after loading F and the body.

    python scripts/prepare_projection.py --binary 16 --k 3 --steps 3          # rank 697
    python scripts/prepare_projection.py --shape 2 2 3 4 5 5 6 8 --k 2          # census, rank 332
    python scripts/prepare_projection.py --shape 2 3 4 5 6 --k 2 --tau 1.2      # check against a prepare
    python scripts/prepare_projection.py --binary 12 --k 3 --operator dense     # the dense product's step
"""

import argparse
import itertools
import json
import math
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm.body import hull  # noqa: E402
from knorm.body.hull import SymmetricHull  # noqa: E402
from knorm.body.marginal import MarginalStructure  # noqa: E402
from knorm.walks import chains as C  # noqa: E402
from knorm.walks.certify import N_STATES, certify_pool  # noqa: E402
from knorm.walks.prepared import workload_fingerprint  # noqa: E402
from knorm.walks.rounding import (SAMPLES_PER_DIM, SYMMETRIC_SAMPLES_PER_DIM, TAU_GUESS, WARMUP_CHAINS,  # noqa: E402
                                  WARMUP_TAUS)
from knorm.walks.sampler import WARMUP_TAUS as CERT_WARMUP_TAUS  # noqa: E402


def clocks():
    return time.perf_counter(), time.process_time()


def since(t):
    return time.perf_counter() - t[0], time.process_time() - t[1]


def schedule(r, chains, tau, iterations, symmetric):
    """Steps per chain of each stage of knorm.prepare at ``chains`` chains (see the module docstring)."""
    n_points = max((SYMMETRIC_SAMPLES_PER_DIM if symmetric else SAMPLES_PER_DIM) * r, 100)
    per_chain = max(8, -(-n_points // chains))
    first = math.ceil(WARMUP_TAUS * TAU_GUESS * min(1.0, WARMUP_CHAINS / chains))
    # rule (1): the last iteration's records come after WARMUP_TAUS·max(τ, TAU_GUESS) steps per chain
    need = WARMUP_TAUS * max(tau, TAU_GUESS)
    iterations = max(iterations, 1 + max(0, math.ceil((need - first) / per_chain)))
    return iterations, {"rounding": first + iterations * per_chain, "certification: warm-up": math.ceil(CERT_WARMUP_TAUS * tau),
            "certification: pool": max(4, 2 * -(-certify_pool(chains) // (2 * chains))),  # even, as Sampler.run
            "certification: states": -(-N_STATES // chains) * 2}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", type=int, nargs="+")
    p.add_argument("--binary", type=int, help="M binary attributes (instead of --shape)")
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--order", type=int, default=1, help="seed of the row shuffle")
    p.add_argument("--steps", type=int, default=4, help="billiard steps timed")
    p.add_argument("--skip", type=int, default=2, help="steps from the centre before the timed ones")
    p.add_argument("--tau", type=float, default=1.66, help="the rounding's τ assumed (census measured 1.17-1.66)")
    p.add_argument("--iterations", type=int, default=2, help="rounding iterations assumed (1-2 measured)")
    p.add_argument("--chains", type=int, nargs="+", default=[8, 16, 64])
    p.add_argument("--cores", type=int, nargs="+", default=[2, 8, 16, 64])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--radius-solves", type=int, default=64,
                   help="time this many of the length scale's 64 solves and scale (default all 64)")
    p.add_argument("--operator", choices=["auto", "dense", "tables", "transform"], default="auto",
                   help="the pivot's product: the body's choice (default), or forced (a comparison of paths)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.operator != "auto":  # the body's cost model, overridden
        hull.STRUCTURED_ABOVE = np.inf if a.operator == "dense" else 0.0
        hull.plan_ops = lambda st, r: 0.0 if a.operator == "tables" else np.inf
        hull.spectral_cost = lambda st, r: 0.0 if a.operator == "transform" else np.inf
    shape = tuple([2] * a.binary if a.binary else a.shape)
    out = {"shape": shape, "k": a.k}

    t = clocks()
    F = MarginalStructure(shape, tuple(itertools.combinations(range(len(shape)), a.k))).matrix()
    F = F[np.random.default_rng(a.order).permutation(F.shape[0])]
    out["F"] = {"d": F.shape[0], "n": F.shape[1], "GiB": F.nbytes / 2**30, "build_s": since(t)[0]}
    t = clocks()
    body = SymmetricHull._of(F, workload_fingerprint(F))
    out["body"] = dict(zip(("wall_s", "cpu_s"), since(t)), rank=body.dim,
                       peak_rss_GiB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                       marginal_operator=body.frame.cols.structured or "dense", symmetric=body.symmetry is not None)
    del F
    r = body.dim
    print(f"body: rank {r}, {out['body']['wall_s']:.1f} s, peak RSS {out['body']['peak_rss_GiB']:.1f} GiB, "
          f"product {out['body']['marginal_operator']}",
          file=sys.stderr, flush=True)
    base = body.frame
    Fr = base.Ft.T
    frame = base.mapped(np.linalg.cholesky(Fr @ Fr.T / base.n + 1e-12 * np.eye(r)))  # the rounding's first frame
    t = clocks()
    k = C.radius_count(r)  # the length scale's directions at this rank
    if a.radius_solves >= k:
        C.body_radius(frame, workers=a.workers)
        out["radius"] = dict(zip(("wall_s", "cpu_s"), since(t)))
    else:  # the first radius_solves of its k solves, in its first group's way (warm-started in turn), scaled;
        # the walk's length scale from their median (an estimate of body_radius's, for the timed steps only)
        Z = frame.to_oracle(C.radius_directions(r)[: a.radius_solves])
        bases = frame.optimal_bases(Z, frame.crash_basis(), True)
        out["radius"] = {"cpu_s": since(t)[1] * k / a.radius_solves, "solves": a.radius_solves, "directions": k}
        g, _ = frame.gauges_from_bases(Z, bases, True)
        C._RADII[frame] = (float(np.median(1.0 / g)), bases)
    print(f"radius: {out['radius']['cpu_s']:.1f} CPU s", file=sys.stderr, flush=True)
    params = C.default_params("billiard", frame)
    chain = C.Chain(frame, np.zeros(r), np.random.default_rng(5))
    chain.run("billiard", a.skip, a.skip, params)
    x = chain.x.copy()
    t = clocks()
    st = C.start_states(frame, [x], 1)[0]
    out["start"] = {"cpu_s": since(t)[1]}
    # the timed steps: --workers chains at once on as many threads (a pivot is memory-bound: chains
    # side by side slow each other, as they do in a prepare), CPU seconds per chain-step
    cs = [chain] + [C.Chain(frame, x, np.random.default_rng(6 + i), st.copy()) for i in range(a.workers - 1)]
    piv0 = sum(c.pivots for c in cs)
    t = clocks()
    C.run_chains(cs, "billiard", a.steps, a.steps, params, a.workers)
    wall, cpu = since(t)
    k = a.steps * len(cs)
    out["step"] = {"cpu_s": cpu / k, "pivots": (sum(c.pivots for c in cs) - piv0) / k, "steps": a.steps,
                   "chains": len(cs)}
    t = clocks()
    frame.solve(chain.x, st)  # a solve warm-started at a point some steps away (an end-point basis)
    out["solve"] = {"cpu_s": since(t)[1]}
    out["step"]["us_per_pivot"] = 1e6 * out["step"]["cpu_s"] / out["step"]["pivots"]
    print(f"step: {out['step']['cpu_s']:.2f} CPU s, {out['step']['pivots']:.0f} pivots", file=sys.stderr, flush=True)

    sym = out["body"]["symmetric"]
    s_step, body_s = out["step"]["cpu_s"], out["body"]["wall_s"]
    rad, start, solve = out["radius"]["cpu_s"], out["start"]["cpu_s"], out["solve"]["cpu_s"]
    out["tau"], out["iterations"] = a.tau, a.iterations
    out["release_s"] = math.ceil(CERT_WARMUP_TAUS * a.tau) * s_step
    rows = []
    for c in a.chains:
        its, sch = schedule(r, c, a.tau, a.iterations, sym)
        longest = sum(sch.values())
        row = {"chains": c, "iterations": its, "schedule": sch, "longest_chain_steps": longest, "chain_steps": c * longest,
               "chain_cpu_s": c * longest * s_step, "projected_s": {}}
        for cores in a.cores:
            serial = body_s + (its + 1) * rad / min(8, cores) + c * (start + solve) / min(c, cores) + \
                c * solve / min(8, cores)
            row["projected_s"][cores] = longest * math.ceil(c / cores) * s_step + serial
            row.setdefault("serial_s", {})[cores] = serial
        rows.append(row)
    out["projection"] = rows
    if a.json:
        print(json.dumps(out, indent=2, default=float))
        return
    print(f"{len(shape)} attributes {shape}, {a.k}-way: d = {out['F']['d']}, n = {out['F']['n']}, rank {r}; body "
          f"{body_s:.1f} s ({out['body']['peak_rss_GiB']:.1f} GiB peak); radius {rad:.1f} CPU s; start state "
          f"{start:.2f} s, solve {solve:.2f} s; step {s_step:.2f} CPU s ({out['step']['pivots']:.0f} pivots, "
          f"{out['step']['us_per_pivot']:.0f} µs each, first frame); τ {a.tau}, {a.iterations} iterations assumed")
    print("| chains | longest chain (steps) | chain CPU | " + " | ".join(f"{c} cores" for c in a.cores) + " |")
    print("|---:|---:|---:|" + "---:|" * len(a.cores))
    for row in rows:
        print(f"| {row['chains']} | {row['longest_chain_steps']} | {row['chain_cpu_s'] / 3600:.2f} h | "
              + " | ".join(f"{v:.1f} s" if v < 120 else f"{v / 60:.1f} min" for v in row["projected_s"].values())
              + " |")
    print(f"a release from the file: W = {math.ceil(CERT_WARMUP_TAUS * a.tau)} steps ≈ {out['release_s']:.0f} s "
          "(one chain, first-frame steps), after the load")


if __name__ == "__main__":
    main()
