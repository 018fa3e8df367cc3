"""Reproduce, and correct, the reference experiment of MATH.md §8 ("Table 3").

n = 200 records with synthetic ages 22–38, random F ∈ {−1, 1}^{d×n} for d = 40 and 20,
ε ∈ {0.1, 1, 2}, 100 releases per cell. Columns: the old study's Laplace with scale 2/ε
(NOT ε-DP for this F: the ℓ₁ sensitivity is d), correctly calibrated Laplace (scale d/ε),
Gaussian (δ = 1e-6, analytic calibration; (ε, δ)-DP, a weaker guarantee), K-norm and
NIM (pure ε-DP; MCMC-approximate sampling). Each cell: mean ℓ₂ error ± standard error
over the releases and the wall time of the 100 releases (mechanism set-up included; the
body's rounding is computed once per workload, in its first K-norm cell).

    python scripts/reproduce_table3.py                      # writes table3.{md,csv,png}
    python scripts/reproduce_table3.py --d 20 --eps 1 --releases 50 --out-dir /tmp
"""

import argparse
import csv
import time
from pathlib import Path

import numpy as np

import knorm
from knorm import workloads as W

COLUMNS = ["Laplace 2/ε (not ε-DP)", "Laplace Δ₁/ε", "Gaussian δ=1e-6", "K-norm", "NIM"]


def run_cell(name, F, eps, x, releases, rng, body):
    t0 = time.perf_counter()
    if name.startswith("Laplace 2"):
        out = F @ x + rng.laplace(0.0, 2.0 / eps, size=(releases, F.shape[0]))
    elif name.startswith("Laplace"):
        out = knorm.LaplaceMechanism(F, epsilon=eps, rng=rng).release(x, size=releases)
    elif name.startswith("Gaussian"):
        out = knorm.GaussianMechanism(F, epsilon=eps, delta=1e-6, rng=rng).release(x, size=releases)
    elif name == "K-norm":
        out = knorm.KNormMechanism(F, epsilon=eps, rng=rng, body=body).release(x, size=releases)
    else:
        out = knorm.NIMechanism(F, epsilon=eps, rng=rng).release(x, size=releases)
    seconds = time.perf_counter() - t0
    err = np.linalg.norm(out - F @ x, axis=1)
    return err.mean(), err.std(ddof=1) / np.sqrt(releases), seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[40, 20])
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 2.0])
    p.add_argument("--releases", type=int, default=100)
    p.add_argument("--seed", type=int, default=2019)
    p.add_argument("--out-dir", default=".")
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    x = rng.integers(22, 39, size=args.n).astype(float)  # synthetic ages 22–38
    rows = []
    for d in args.d:
        F = W.random_pm1(d, args.n, rng=rng)
        body = knorm.SymmetricHull(F)
        for eps in args.eps:
            for name in COLUMNS:
                mean, se, sec = run_cell(name, F, eps, x, args.releases, rng, body)
                rows.append({"d": d, "epsilon": eps, "mechanism": name, "mean_l2_error": mean, "stderr": se,
                             "seconds": sec})
                print(f"d={d:3d} ε={eps:<4g} {name:24s} error {mean:10.2f} ± {se:7.2f}   {sec:7.2f} s", flush=True)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "table3.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| d | ε | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for d in args.d:
        for eps in args.eps:
            cells = [r for r in rows if r["d"] == d and r["epsilon"] == eps]
            lines.append(f"| {d} | {eps:g} | " + " | ".join(
                f"{r['mean_l2_error']:.1f} ± {r['stderr']:.1f} ({r['seconds']:.2f} s)" for r in cells) + " |")
    (out / "table3.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not args.no_plot:
        plot(rows, args, out / "table3.png")


def plot(rows, args, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: pip install 'knorm[plot]' for the plot")
        return
    fig, axes = plt.subplots(1, len(args.d), figsize=(5.5 * len(args.d), 4.2), squeeze=False)
    for ax, d in zip(axes[0], args.d):
        for name in COLUMNS:
            pts = [r for r in rows if r["d"] == d and r["mechanism"] == name]
            ax.errorbar([r["epsilon"] for r in pts], [r["mean_l2_error"] for r in pts],
                        yerr=[2 * r["stderr"] for r in pts], marker="o", capsize=3, label=name,
                        linestyle="--" if "not" in name else "-")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("mean ℓ₂ error")
        ax.set_title(f"random ±1 F, d = {d}, n = {args.n}, {args.releases} releases")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
