"""knorm's optimal Gaussian strategy for marginals against ResidualPlanner's own code (issue 29).

    .venv/bin/python scripts/compare_residualplanner.py [--rp-path /tmp/residualplanner/residual_planner]
        [--knorm] [--out compare_residualplanner.md]

ResidualPlanner (Xiao, He, Zhang & Kifer, NeurIPS 2023; https://github.com/dkifer/ResidualPlanner)
is GPL and never a dependency of knorm: this script imports its ``class_resplan.ResidualPlanner``
only when it is importable (``--rp-path``, the ``RP_PATH`` environment variable, or
``/tmp/residualplanner/residual_planner``; it needs pandas and cvxpy) and says so when it is not.
Get it with::

    git clone https://github.com/dkifer/ResidualPlanner /tmp/residualplanner

Measure: per-query RMSE ``√(Σ variances/d)`` of the sum-of-variances plan, on three workloads
(2-way marginals of 10 binary attributes; 2-way marginals over sizes (2,3,4,5,6); 3-way marginals
of 8 binary attributes):

* at ρ = 1 zCDP: ResidualPlanner's ``selection("sumvar", pcost=2ρ)`` (its privacy constraint
  ``Σ_S p_S/σ_S² = pcost``; its tests.py passes ``pcost = 2ρ``) against knorm's
  :class:`~knorm.mechanisms.residual.MarginalPlan` ``per_query_rmse(rho=1)``;
* at (ε, δ) = (√2, 1e-6): the same plan at ``pcost = μ²`` with μ knorm's analytic calibration
  (ResidualPlanner converts zCDP to (ε, δ) by its own bound, so only the plan is compared), against
  knorm's ``recommend`` rows ``gaussian-marginal`` and ``gaussian-svd`` on the explicit F with its
  rows shuffled (found from F's entries); ``--knorm`` adds the K-norm row (Monte Carlo, minutes)
  and ``knorm_wins_below``, the δ under which K-norm has less error.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's knorm

from knorm import recommend  # noqa: E402
from knorm.body.marginal import MarginalStructure  # noqa: E402
from knorm.mechanisms.residual import MarginalPlan, gaussian_mu  # noqa: E402

WORKLOADS = {"10 binary, 2-way": ((2,) * 10, 2), "(2,3,4,5,6), 2-way": ((2, 3, 4, 5, 6), 2),
             "8 binary, 3-way": ((2,) * 8, 3)}
EPS, DELTA = math.sqrt(2), 1e-6


def residual_planner(path):
    """ResidualPlanner's class, or the reason it cannot be imported."""
    for p in [path, os.environ.get("RP_PATH"), "/tmp/residualplanner/residual_planner"]:
        if p and os.path.isdir(p):
            sys.path.insert(0, p)
            break
    try:
        return importlib.import_module("class_resplan").ResidualPlanner, None
    except Exception as exc:  # an optional peer: say why, never fail the knorm side
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]


def rp_rmse(cls, shape, cliques, pcost):
    system = cls(list(shape))
    for c in cliques:
        system.input_mech(tuple(c))
    total = system.selection(choice="sumvar", pcost=pcost)
    d = sum(math.prod(shape[a] for a in c) for c in cliques)
    return math.sqrt(total / d)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rp-path", default=None)
    ap.add_argument("--knorm", action="store_true", help="also the K-norm row (Monte Carlo) and the crossover δ")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    cls, why = residual_planner(args.rp_path)
    mu, _ = gaussian_mu(EPS, DELTA)
    lines = [f"per-query RMSE; (ε, δ) = (√2, {DELTA:g}) uses μ = {mu:.6g} (knorm's analytic calibration)", "",
             "| workload | RP ρ=1 | knorm ρ=1 | ratio | RP (√2,δ) | gaussian-marginal | gaussian-svd | ratio |"
             + (" K-norm ε=√2 | K-norm wins for δ < |" if args.knorm else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if args.knorm else "")]
    for name, (shape, k) in WORKLOADS.items():
        cliques = list(itertools.combinations(range(len(shape)), k))
        plan = MarginalPlan.build(shape, cliques)
        kz = plan.per_query_rmse(rho=1.0)
        F = MarginalStructure(shape, tuple(cliques)).matrix()
        F = F[np.random.default_rng(0).permutation(len(F))]
        cand = ["gaussian-marginal", "gaussian-svd"] + (["knorm"] if args.knorm else [])
        t = time.perf_counter()
        rec = recommend(F, epsilon=EPS, delta=DELTA, candidates=cand, rng=0)
        secs = time.perf_counter() - t
        gm, gs = rec.table["gaussian-marginal"].per_query_rmse, rec.table["gaussian-svd"].per_query_rmse
        if cls is not None:
            rz, re_ = rp_rmse(cls, shape, cliques, 2.0), rp_rmse(cls, shape, cliques, mu * mu)
            cells = [f"{rz:.4f}", f"{kz:.4f}", f"{kz / rz:.6f}", f"{re_:.4f}", f"{gm:.4f}", f"{gs:.4f}",
                     f"{gm / re_:.6f}"]
        else:
            cells = ["—", f"{kz:.4f}", "—", "—", f"{gm:.4f}", f"{gs:.4f}", "—"]
        if args.knorm:
            kr = rec.table["knorm"]
            cells += [f"{kr.per_query_rmse:.4f} ± {kr.per_query_stderr:.2g}", f"{rec.knorm_wins_below:.3g}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        print(f"{name}: recommend {secs:.1f} s", file=sys.stderr)
    if cls is None:
        lines.append(f"\nResidualPlanner not importable ({why}): its columns are empty.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
