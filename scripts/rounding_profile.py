"""Where the rounding's time goes: per iteration chain steps, pivots, pivots per step and chain
seconds, the final eigenvalue spread and τ, then the certification's steps and pivots (the counts
are deterministic, the seconds are not).

Every ``Chain.run`` of the rounding is traced (steps, pivots, wall seconds) and grouped by
rounding iteration (a new frame: the rounding maps its chains into each iteration's frame);
the certification (:func:`knorm.walks.certify.certify`, public seed) is counted the same
way, with its certificate (R-hat, ESS, KS p, τ, W). Rows of F are shuffled
(``np.random.default_rng(1).permutation``) as a user's file would come.

    KNORM_CACHE=off python scripts/rounding_profile.py --marginals 2 3 3 4 4 4
    KNORM_CACHE=off python scripts/rounding_profile.py --pm1 40 200 --no-certify
    KNORM_CACHE=off python scripts/rounding_profile.py --marginals 7 2 7 4 4 7 --first-only
    KNORM_CACHE=off python scripts/rounding_profile.py --marginals 2 3 4 5 6 --max-iter 1 --save T.npz

``--samples-per-dim S`` records ``max(S·r, 100)`` points per rounding iteration instead of knorm's
default (10 per dimension, 2 with a symmetry group). ``--first-only`` stops after the first iteration (the census-size check of its pivots per step);
``--max-iter`` caps the rounding; ``--save`` writes its T (and the certified pool's E[ZZᵀ]).
Prints a markdown table of the rounding's iterations, the certification's counts and certificate,
and a JSON line (``--json``) for benchmarks.
"""

import argparse
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

import knorm
from knorm import workloads as W
from knorm.body.hull import SymmetricHull
from knorm.walks import chains as chains_mod
from knorm.walks import rounding as rounding_mod

_LOCK = threading.Lock()
TRACE: list = []  # (phase, frame id, steps, pivots, seconds) per Chain.run
PHASE = ["rounding"]


class _Stop(Exception):
    pass


def _traced(run):
    def wrapper(self, walk, steps, thin, params):
        p0, t0 = self.pivots, time.perf_counter()
        out = run(self, walk, steps, thin, params)
        with _LOCK:
            TRACE.append((PHASE[0], id(self.frame), steps, self.pivots - p0, time.perf_counter() - t0))
        return out
    return wrapper


def build(args):
    if args.marginals:
        F = W.marginals(tuple(args.marginals), args.way)
        label = f"{args.way}-way marginals over {tuple(args.marginals)}"
    else:
        d, n = args.pm1
        F = W.random_pm1(d, n, rng=args.seed)
        label = f"±1 {d}×{n} (seed {args.seed})"
    F = F[np.random.default_rng(1).permutation(F.shape[0])]
    return F, label


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--marginals", type=int, nargs="+")
    ap.add_argument("--way", type=int, default=2)
    ap.add_argument("--pm1", type=int, nargs=2, default=(40, 200))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chains", type=int, default=8)
    ap.add_argument("--no-certify", action="store_true")
    ap.add_argument("--max-iter", type=int, default=8, help="the rounding's max_iter (what a cap costs the certificate)")
    ap.add_argument("--first-only", action="store_true", help="stop after the rounding's first iteration")
    ap.add_argument("--samples-per-dim", type=float, default=None,
                    help="records per dimension and iteration (knorm's SAMPLES_PER_DIM, or SYMMETRIC_SAMPLES_PER_DIM "
                         "with a symmetry group: 10 and 2), for a comparison of roundings")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", help="write the rounding's T (and the certified pool's E[ZZᵀ]) to this .npz")
    args = ap.parse_args()
    if args.samples_per_dim is not None:
        if not args.samples_per_dim > 0:
            ap.error("--samples-per-dim must be > 0")
        rounding_mod.SAMPLES_PER_DIM = rounding_mod.SYMMETRIC_SAMPLES_PER_DIM = args.samples_per_dim
    chains_mod.Chain.run = _traced(chains_mod.Chain.run)
    F, label = build(args)
    t0 = time.perf_counter()
    body = SymmetricHull(F)
    sym = body.symmetry
    t_body = time.perf_counter() - t0
    print(f"knorm {knorm.__file__}\n{label}: d={F.shape[0]}, n={F.shape[1]}, r={body.dim}, "
          f"symmetry={'yes' if sym is not None else 'no'}; body {t_body:.1f} s", flush=True)
    frames = []
    if args.first_only:
        orig = rounding_mod._frame_for

        def frame_for(base, T):
            frames.append(T)
            if len(frames) > 1:
                raise _Stop
            return orig(base, T)
        rounding_mod._frame_for = frame_for
    t0 = time.perf_counter()
    rnd = None
    try:
        rnd = rounding_mod.round_body(body.frame, chains=args.chains, symmetry=sym, max_iter=args.max_iter)
    except _Stop:
        pass
    t_round = time.perf_counter() - t0
    rows, order = {}, []
    for ph, fid, steps, piv, sec in TRACE:
        if fid not in rows:
            rows[fid] = [0, 0, 0.0]
            order.append(fid)
        rows[fid][0] += steps
        rows[fid][1] += piv
        rows[fid][2] += sec
    its = [rows[f] for f in order]  # one frame per iteration; the first iteration's includes its warm-up
    print("\n| iteration | chain steps | pivots | pivots/step | chain CPU s |\n|---|---|---|---|---|")
    tot = [0, 0, 0.0]
    for i, (s, p, sec) in enumerate(its, 1):
        print(f"| {i} | {s:,} | {p:,} | {p / max(s, 1):,.0f} | {sec:.1f} |")
        tot = [tot[0] + s, tot[1] + p, tot[2] + sec]
    print(f"| rounding | {tot[0]:,} | {tot[1]:,} | {tot[1] / max(tot[0], 1):,.0f} | {tot[2]:.1f} (wall {t_round:.1f}) |")
    out = {"label": label, "r": body.dim, "rounding_steps": tot[0], "rounding_pivots": tot[1],
           "rounding_wall": t_round, "iterations": [list(x) for x in its]}
    if rnd is not None:
        print(f"iterations {rnd.iterations}, final spread {rnd.eigen_spread:.2f}, τ {rnd.tau:.2f}")
        out.update(n_iter=rnd.iterations, spread=rnd.eigen_spread, tau=rnd.tau)
    saved = {}
    if rnd is not None and not args.no_certify:
        from knorm.walks.certify import certify
        from knorm.walks.sampler import cache_rounding

        cache_rounding(body, rnd)
        PHASE[0] = "certify"
        n0 = len(TRACE)
        t0 = time.perf_counter()
        certified = certify(body, chains=args.chains)
        cert = certified.certificate
        if certified.moments is not None:
            saved["pool_second"] = certified.moments.second
        t_cert = time.perf_counter() - t0
        cs = sum(x[2] for x in TRACE[n0:])
        cp = sum(x[3] for x in TRACE[n0:])
        print(f"certification: {cs:,} chain steps, {cp:,} pivots ({cp / max(cs, 1):,.0f}/step), wall {t_cert:.1f} s")
        print(cert.summary())
        out.update(certify_steps=cs, certify_pivots=cp, certify_wall=t_cert, max_rhat=cert.max_rhat,
                   min_ess=cert.min_ess, ks_p=cert.gauge_ks_p, cert_tau=cert.tau, W=cert.warmup)
        print(f"total pivots (rounding + certification): {tot[1] + cp:,}")
    if args.save and rnd is not None:
        np.savez(args.save, T=rnd.T, **saved)
    if args.json:
        print("JSON " + json.dumps(out))


if __name__ == "__main__":
    main()
