"""ESS/s of hit-and-run with the facet-walk oracle vs the HiGHS LP oracle, in one run.

Both are the same Markov chain (same rounded frame, same random inputs; only the chord
oracle differs): the script checks that the two trajectories coincide, measures ESS per
step on a long facet-walk run and each oracle's steps per second on one core.
ESS/s = ESS/step × steps/s. Also reports the default walk's ESS/s per core.

    python scripts/compare_oracles.py            # d = 40, n = 200 (the issue's setting)
    python scripts/compare_oracles.py --d 20 --n 100 --highs-steps 40
"""

import argparse

from knorm.experiments import compare_oracles

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=40)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--highs-steps", type=int, default=60, help="steps of the HiGHS chain (2 LPs each)")
    p.add_argument("--ess-steps", type=int, default=None, help="steps per chain of the ESS run (default 300·d)")
    a = p.parse_args()
    compare_oracles(a.d, a.n, seed=a.seed, highs_steps=a.highs_steps, ess_steps=a.ess_steps)
