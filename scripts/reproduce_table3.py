"""Reproduce, and correct, the reference experiment of docs/design.md §8 ("Table 3").

n = 200 records with synthetic ages 22–38, random F ∈ {−1, 1}^{d×n} for d = 40 and 20,
ε ∈ {0.1, 1, 2}, 100 releases per cell. Columns: the old study's Laplace with scale 2/ε
(NOT ε-DP for this F: the ℓ₁ sensitivity is d), correctly calibrated Laplace (scale d/ε),
Gaussian (δ = 1e-6, analytic calibration; (ε, δ)-DP, a weaker guarantee), K-norm and
NIM (pure ε-DP; MCMC-approximate sampling). Each cell: mean ℓ₂ error ± standard error
over the releases and the wall time of the releases (mechanism set-up included; the
body's rounding is computed once per workload, in its first K-norm cell).

    python scripts/reproduce_table3.py                      # writes table3.{md,csv,png}
    python scripts/reproduce_table3.py --d 20 --eps 1 --releases 50 --out-dir /tmp
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's knorm

from knorm.experiments import table3  # noqa: E402

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[40, 20])
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 2.0])
    p.add_argument("--releases", type=int, default=100)
    p.add_argument("--seed", type=int, default=2019)
    p.add_argument("--out-dir", default=".")
    p.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    table3(a.d, a.n, a.eps, releases=a.releases, seed=a.seed, out_dir=a.out_dir, plot_path=not a.no_plot)
