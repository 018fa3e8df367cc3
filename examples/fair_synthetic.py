"""A statistics office's whole flow on a real table: statsmodels' "fair" data (6,366 women, offline).

records → plan → release → consistent tables → synthetic records, and the comparison with
Gaussian noise under (ε, δ) (issue 29):

1. declare a domain from the data set's documentation (never from the data);
2. build the histogram x over it (``knorm.data.histogram``);
3. plan from F alone: ``knorm.recommend`` at ε (pure ε-DP) and at (ε, δ) with the optimal
   Gaussian strategies (ResidualPlanner's, the SVD bound's), and the δ below which K-norm wins;
4. release all 2-way marginals with the pure-DP recommendation;
5. post-process (free): private-pgm's consistent marginal tables and synthetic records over the
   declared domain (``knorm.synth.synthesize``), under the release's claim, unchanged;
6. compare each table's error: released, synthetic records, and the optimal Gaussian at δ.

The comparison reads the TRUE marginals outside any mechanism: it exists only to show this
demonstration's error; a real release publishes one mechanism's answers and nothing else. The
Gaussian release is made for the comparison only (a real office releases once: two releases
compose to (2ε, δ)).

    python examples/fair_synthetic.py                    # private noise (OS entropy)
    python examples/fair_synthetic.py --seed 0           # reproducible, NOT private
    python examples/fair_synthetic.py --small --seed 0   # 3 attributes (what CI runs)
    python examples/fair_synthetic.py --plot fair.png    # each table's error, as a figure

Needs statsmodels (the data ships with it), pandas, private-pgm and matplotlib for --plot:
``pip install -e ".[examples,synth,plot]"``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's knorm, not an installed one
import knorm  # noqa: E402
from knorm.data import Attribute, Domain, histogram, marginal_keys, marginal_workload, split_marginals  # noqa: E402
from knorm.mechanisms import ResidualGaussianMechanism  # noqa: E402
from knorm.synth import synthesize  # noqa: E402

# ---- 1. the declared domain, from statsmodels.datasets.fair.NOTE ------------------------------
ATTRIBUTES = {
    "rate_marriage": Attribute("rate_marriage", categories=[1, 2, 3, 4, 5],
                               labels=["very poor", "poor", "fair", "good", "very good"]),
    "religious": Attribute("religious", categories=[1, 2, 3, 4], labels=["not", "mildly", "fairly", "strongly"]),
    # "No. children": the survey's coded values (5.5 = five or more)
    "children": Attribute("children", categories=[0, 1, 2, 3, 4, 5.5], labels=["0", "1", "2", "3", "4", "5+"]),
    # "time spent in extramarital affairs", ≥ 0: none, or some
    "affairs": Attribute("affairs", edges=[0, 1e-9, 1e9], labels=["none", "some"]),
}
FULL = ("rate_marriage", "religious", "children", "affairs")  # 5·4·6·2 = 240 cells, 104 marginal queries
SMALL = ("rate_marriage", "religious", "affairs")  # 5·4·2 = 40 cells, 38 marginal queries


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epsilon", type=float, default=1.0, help="ε of the release")
    p.add_argument("--delta", type=float, default=1e-6, help="δ of the Gaussian comparison")
    p.add_argument("--small", action="store_true", help=f"only the attributes {', '.join(SMALL)} (fast; for CI)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise: a reproducible demonstration that is NOT private (default: OS entropy)")
    p.add_argument("--mc", type=int, default=1000, help="recommend's Monte-Carlo draws (from F alone, seeded)")
    p.add_argument("--plot", default=None, help="write each table's error as a figure (.png/.svg/.pdf)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import statsmodels.api as sm  # the data ships with statsmodels: no download

    table = sm.datasets.fair.load_pandas().data
    domain = Domain([ATTRIBUTES[a] for a in (SMALL if args.small else FULL)])

    def rng(i):
        return None if args.seed is None else args.seed + i  # int: reproducible and NOT private

    # ---- 2. the histogram: private; it leaves only through a mechanism's release() --------------
    x = histogram(table, domain)
    F = marginal_workload(domain, 2)
    keys = marginal_keys(domain, 2)
    print(f"{len(table)} records; domain {domain!r}; all 2-way marginals: F is {F.shape[0]} x {F.shape[1]}")

    # ---- 3. the plan, from F alone -----------------------------------------------------------------
    pure = knorm.recommend(F, epsilon=args.epsilon, rng=rng(0), n_samples=args.mc,
                           candidates=["laplace", "identity", "knorm"])
    both = knorm.recommend(F, epsilon=args.epsilon, delta=args.delta, rng=rng(1), n_samples=args.mc,
                           candidates=["gaussian", "gaussian-marginal", "gaussian-svd", "knorm"])
    print(f"\n{pure}\n\n{both}")

    # ---- 4. the release -------------------------------------------------------------------------------
    mech = pure.mechanism  # the least-error pure ε-DP mechanism (K-norm here)
    t0 = time.perf_counter()
    answers = mech.release(x)
    print(f"\nreleased with {pure.best} in {time.perf_counter() - t0:.1f} s: {mech.privacy}")

    # ---- 5. free post-processing: consistent tables and synthetic records ---------------------------
    t0 = time.perf_counter()
    syn = synthesize(F, answers, noise=mech, shape=domain.shape, names=domain.names, rng=rng(2), iters=1000,
                     noise_draws=500)
    print(f"{len(syn.records)} synthetic records in {time.perf_counter() - t0:.1f} s; {syn.note}")
    frame = syn.dataframe({name: domain[name].labels for name in domain.names})
    print(frame.head(3).to_string())

    # ---- 6. the comparison (DEMONSTRATION ONLY: the true marginals are read) -----------------------
    gauss = ResidualGaussianMechanism(F, epsilon=args.epsilon, delta=args.delta, rng=rng(3))
    truth = F @ x
    records_x = np.bincount(np.ravel_multi_index(syn.records.T, domain.shape), minlength=F.shape[1])
    versions = {"released": answers, "consistent": syn.answers, "synthetic": F @ records_x,
                f"Gaussian δ={args.delta:g}": gauss.release(x)}
    tables = {name: split_marginals(domain, 2, v - truth) for name, v in versions.items()}
    print(f"\nper-table RMSE of the counts (true marginals read for this report only), ε = {args.epsilon:g}:")
    print(f"  {'table':28s}" + "".join(f"{name:>19s}" for name in versions))
    rmse = {name: [float(np.sqrt(np.mean(tables[name][k] ** 2))) for k in keys] for name in versions}
    for i, k in enumerate(keys):
        print(f"  {' × '.join(k):28s}" + "".join(f"{rmse[name][i]:19.2f}" for name in versions))
    print(f"  {'all':28s}" + "".join(f"{np.sqrt(np.mean((v - truth) ** 2)):19.2f}" for v in versions.values()))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3.6))
        width = 0.8 / len(versions)
        for j, name in enumerate(versions):
            ax.bar(np.arange(len(keys)) + (j - (len(versions) - 1) / 2) * width, rmse[name], width, label=name)
        ax.set_xticks(np.arange(len(keys)), ["×".join(k) for k in keys], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("RMSE per cell (counts)")
        ax.set_title(f"fair data, 2-way marginals at ε = {args.epsilon:g}: K-norm vs Gaussian (δ = {args.delta:g})",
                     fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"figure: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
