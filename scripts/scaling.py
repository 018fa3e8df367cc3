"""Scaling study: ESS/s, steps/s and pivots per step of each walk vs d and n.

Random ±1 F with d ∈ {10, 20, 40, 80} and n ∈ {d, 5d, 25d}; writes scaling.csv and
scaling.png (with matplotlib). A few seconds per configuration, plus rounding.

    python scripts/scaling.py --out-dir /tmp/scaling
    python scripts/scaling.py --d 10 20 --seconds 1
"""

import argparse

from knorm.experiments import scaling

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[10, 20, 40, 80])
    p.add_argument("--factors", type=int, nargs="+", default=[1, 5, 25], help="n = factor · d")
    p.add_argument("--walks", nargs="+", default=["billiard", "hit_and_run", "coordinate", "ball"])
    p.add_argument("--seconds", type=float, default=3.0, help="sampling time per configuration and walk")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=".")
    p.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    scaling(a.d, a.factors, a.walks, seconds=a.seconds, seed=a.seed, out_dir=a.out_dir, plot_path=not a.no_plot)
