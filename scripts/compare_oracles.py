"""ESS/s of hit-and-run with the facet-walk oracle vs the HiGHS LP oracle, in one run.

Both are the same Markov chain (same rounded frame, same random inputs; only the chord
oracle differs). The script first checks that the two trajectories coincide, so ESS per
step is the same for both; ESS per step is measured on a long facet-walk run, and each
oracle's steps per second on one core. ESS/s = ESS/step × steps/s.

    python scripts/compare_oracles.py            # d = 40, n = 200 (the issue's setting)
    python scripts/compare_oracles.py --d 20 --n 100 --highs-steps 40
"""

import argparse
import time

import numpy as np

import knorm
from knorm.body import ReferenceOracle
from knorm.walks.chains import Chain, run_chains
from knorm.walks.reference import hit_and_run_reference
from knorm.walks.sampler import _start_points, rounding_of

NO_CLIP = np.array([np.inf])  # hit-and-run over all of K (no ball clip)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=40)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--highs-steps", type=int, default=60, help="steps of the HiGHS chain (2 LPs each)")
    p.add_argument("--ess-steps", type=int, default=None, help="steps per chain of the ESS run (default 300·d)")
    args = p.parse_args(argv)
    d, n = args.d, args.n
    rng = np.random.default_rng(args.seed)
    F = rng.choice([-1.0, 1.0], size=(d, n))
    K = knorm.SymmetricHull(F)
    t0 = time.perf_counter()
    frame = rounding_of(K).frame
    print(f"random ±1 F, d={d}, n={n}: rank {K.dim}; rounding {time.perf_counter() - t0:.2f} s")
    r = frame.r
    ref = ReferenceOracle(frame.Ft.T, method="highs")
    x0 = _start_points(frame, 1, np.random.default_rng(args.seed + 1))[0]

    # 1. same inputs -> same trajectory; and steps/s of each oracle on one core
    k = args.highs_steps
    chain = Chain(frame, x0, np.random.default_rng(args.seed + 2))
    run_chains([chain], "hit_and_run", 1, 1, NO_CLIP, workers=1)  # JIT warm-up step
    chain = Chain(frame, x0, np.random.default_rng(args.seed + 2))
    t = time.perf_counter()
    fast_path = run_chains([chain], "hit_and_run", k, 1, NO_CLIP, workers=1)[0]
    t_fast_k = time.perf_counter() - t
    gen = np.random.default_rng(args.seed + 2)
    normals, unif = gen.standard_normal((k, r)), gen.random((k, 2))
    t = time.perf_counter()
    highs_path = hit_and_run_reference(ref, x0, normals, unif)
    t_highs = time.perf_counter() - t
    dev = np.max(np.abs(fast_path - highs_path)) / np.max(np.abs(highs_path))
    print(f"same inputs, {k} steps: max relative deviation of the two trajectories {dev:.1e}")

    # 2. ESS per step (same chain for both oracles) and facet-walk steps/s on one core
    steps = args.ess_steps or 300 * d
    chains = [Chain(frame, x, np.random.default_rng(args.seed + 10 + i))
              for i, x in enumerate(_start_points(frame, 4, np.random.default_rng(args.seed + 3)))]
    run_chains(chains, "hit_and_run", 20 * d, 20 * d, NO_CLIP)  # warm-up
    t = time.perf_counter()
    rec = run_chains(chains, "hit_and_run", steps, 1, NO_CLIP, workers=1)
    t_fast = time.perf_counter() - t
    amb = K.to_ambient(rounding_of(K).to_span(rec))
    ess = float(np.min(knorm.ess(amb)))
    ess_per_step = ess / (4 * steps)
    fast_sps = 4 * steps / t_fast
    highs_sps = k / t_highs
    print(f"hit-and-run ESS per step (min coordinate, {4 * steps} steps): {ess_per_step:.2e}"
          f"  (τ ≈ {1 / ess_per_step:.0f} steps)")
    print(f"facet walk : {fast_sps:10.1f} steps/s/core  -> {fast_sps * ess_per_step:10.3f} ESS/s/core"
          f"  (pivots/step {chains[0].pivots / chains[0].stats[2]:.0f})")
    print(f"HiGHS LP   : {highs_sps:10.1f} steps/s/core  -> {highs_sps * ess_per_step:10.3f} ESS/s/core"
          f"  ({1e3 / highs_sps:.1f} ms/step, 2 LPs)")
    print(f"ratio facet walk / HiGHS (ESS/s): {fast_sps / highs_sps:.0f}x"
          f"   [check: {k / t_fast_k:.0f} steps/s on the short run]")

    # 3. the default walk (billiard) through the public API
    x, info = knorm.sample_uniform(K, 4000, rng=args.seed, return_info=True)
    import os

    cores = min(os.cpu_count() or 1, info.chains)
    print(f"default walk: {info.summary()}")
    print(f"default walk: {info.ess_per_second / cores:.0f} min-coordinate ESS/s per core ({cores} cores), "
          f"end to end (pilot and warm-up included)")


if __name__ == "__main__":
    main()
