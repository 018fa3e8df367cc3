"""Precision-based attacks on every mechanism's release path: control (knorm before issue #37,
float answers ``fl(Fx + noise)``) against defended (answers on the public grid ``2^k``).

    python scripts/fp_attack.py [--answers 1000] [--seed 1] [--markdown]

Neighbours x₀ = 0 and x₁ = e₁ (one record in the first cell), ε = 1, half the answers from
each, fresh noise for every answer. Attacks (knorm.audit_fp): for every mechanism, the
granularity test (a candidate x is impossible where no float noise n gives ``fl(Fx + n)``
equal to the answer, on any coordinate) and a naive-Bayes classifier on the answers' 8
lowest bits (of the grid integers a/γ on defended answers; chance: 50%); Mironov's certainty test where the noise is numpy's Laplace as
drawn (Laplace, identity strategy, bounded Laplace). Prints
one row per (mechanism, attack, variant): certain-and-right %, certain-and-wrong %, accuracy.
A pure ε = 1 mechanism allows no certain answer and accuracy at most e/(1 + e) ≈ 73.1%.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import knorm.workloads as W
from knorm import (GaussianMechanism, HierarchicalMechanism, IdentityMechanism, KNormMechanism, LaplaceMechanism,
                   NIMechanism)
from knorm.audit_fp import certain_attack, granularity_attack, low_bits_attack, undefended
from knorm.mechanisms.bounded import BoundedLaplaceMechanism, CovarianceGaussianMechanism
from knorm.mechanisms.residual import ResidualGaussianMechanism, SVDGaussianMechanism

EPS, DELTA = 1.0, 1e-6
ONE = np.array([[1.0]])
MCMC_F = W.random_pm1(4, 6, rng=4)  # a body with no exact sampler: MCMC (billiard walk)


def cases():
    """(name, F or None, make(rng) -> mechanism, Laplace scale of the certainty test or None)."""
    return [
        ("Laplace, 1 cell", ONE, lambda r: LaplaceMechanism(ONE, epsilon=EPS, rng=r), "scale"),
        ("Gaussian, 1 cell", ONE, lambda r: GaussianMechanism(ONE, epsilon=EPS, delta=DELTA, rng=r), None),
        ("K-norm exact, 1 cell", ONE, lambda r: KNormMechanism(ONE, epsilon=EPS, rng=r), None),
        ("K-norm exact, prefix(4)", W.prefix(4), lambda r: KNormMechanism(W.prefix(4), epsilon=EPS, rng=r), None),
        ("K-norm MCMC, random ±1 4×6", MCMC_F, lambda r: KNormMechanism(MCMC_F, epsilon=EPS, rng=r), None),
        ("NIM, random ±1 4×6", MCMC_F, lambda r: NIMechanism(MCMC_F, epsilon=EPS, rng=r), None),
        ("strategy identity, 1 cell", ONE, lambda r: IdentityMechanism(ONE, epsilon=EPS, rng=r), "scale"),
        ("strategy hierarchical, prefix(4)", W.prefix(4),
         lambda r: HierarchicalMechanism(W.prefix(4), epsilon=EPS, rng=r), None),
        ("residual Gaussian, marginals (2,2) k=1", W.marginals((2, 2), 1),
         lambda r: ResidualGaussianMechanism(W.marginals((2, 2), 1), epsilon=EPS, delta=DELTA, rng=r), None),
        ("SVD Gaussian, prefix(4)", W.prefix(4),
         lambda r: SVDGaussianMechanism(W.prefix(4), epsilon=EPS, delta=DELTA, rng=r), None),
        ("bounded Laplace, [0, 1], clip=False", None,
         lambda r: BoundedLaplaceMechanism(0.0, 1.0, epsilon=EPS, delta=DELTA, clip=False, rng=r), "scale"),
        ("covariance Gaussian, M = [[1]]", None,
         lambda r: CovarianceGaussianMechanism(ONE, 1.0, epsilon=EPS, delta=DELTA, rng=r), None),
    ]


def answers_of(F, make, truth, rng):
    """One answer per entry of ``truth`` (0: x₀, 1: x₁), fresh noise each, as an (m, d) array;
    the mechanism (for its scale and grid) and the true answers Fx₀, Fx₁ (d,)."""
    mech = make(rng)
    d = 1 if F is None else F.shape[0]
    out = np.empty((len(truth), d))
    for t in (0, 1):
        idx = np.flatnonzero(truth == t)
        if F is None:  # a 1-D statistic: the value itself
            a = mech.release(float(t), size=len(idx)) if isinstance(mech, BoundedLaplaceMechanism) \
                else mech.release(np.array([float(t)]), size=len(idx))
            out[idx] = np.asarray(a).reshape(len(idx), -1)
        else:
            x = np.zeros(F.shape[1])
            x[0] = t
            out[idx] = np.atleast_2d(mech.release(x, size=len(idx)))
    fx0, fx1 = (np.zeros(1), np.ones(1)) if F is None else (np.zeros(d), F[:, 0].astype(float))
    return mech, out, fx0, fx1


def run(n_answers: int = 1000, seed: int = 1, names: list[str] | None = None, log=print) -> list:
    """Every case, control then defended: a list of AttackResult (printed as rows by ``log``)."""
    results = []
    for name, F, make, certain in cases():
        if names is not None and name not in names:
            continue
        for variant in ("control", "defended"):
            t0 = time.perf_counter()
            rng = np.random.default_rng([seed, len(results)])
            truth = rng.permutation(np.arange(n_answers) % 2)
            if variant == "control":
                with undefended():
                    mech, a, fx0, fx1 = answers_of(F, make, truth, rng)
            else:
                mech, a, fx0, fx1 = answers_of(F, make, truth, rng)
            k = None if variant == "control" else mech.grid_exponent
            rows = [granularity_attack(f"{name} · granularity · {variant}", a, truth, fx0, fx1, k)]
            if certain:
                rows.append(certain_attack(f"{name} · Mironov · {variant}", a[:, 0], truth, float(fx0[0]),
                                           float(fx1[0]), float(getattr(mech, certain)), k))
            rows.append(low_bits_attack(f"{name} · low bits · {variant}", a[:, 0], truth, float(fx1[0]), k))
            for r in rows:
                log(r.row() + f"   ({time.perf_counter() - t0:.1f} s)")
            results.extend(rows)
    return results


LABELS = {"Laplace, 1 cell": "Laplace (1 cell)", "Gaussian, 1 cell": "Gaussian (1 cell)",
          "K-norm exact, 1 cell": "K-norm exact (1 cell)", "K-norm exact, prefix(4)": "K-norm exact (prefix 4)",
          "K-norm MCMC, random ±1 4×6": "K-norm MCMC (random ±1, 4×6)", "NIM, random ±1 4×6": "NIM (random ±1, 4×6)",
          "strategy identity, 1 cell": "identity strategy (1 cell)",
          "strategy hierarchical, prefix(4)": "hierarchical strategy (prefix 4)",
          "residual Gaussian, marginals (2,2) k=1": "residual Gaussian (1-way marginals, 2×2)",
          "SVD Gaussian, prefix(4)": "SVD Gaussian (prefix 4)",
          "bounded Laplace, [0, 1], clip=False": "bounded Laplace ([0, 1], `clip=False`)",
          "covariance Gaussian, M = [[1]]": "covariance Gaussian (M = [[1]])"}


def markdown(results) -> str:
    """The table of docs/benchmarks.md: one row per mechanism."""
    by = {}
    for r in results:
        mech, attack, variant = (p.strip() for p in r.name.split("·"))
        by.setdefault(mech, {})[(attack, variant)] = r

    def pct(v: float) -> str:
        return f"{100 * v:.1f}%"
    lines = ["| mechanism (workload) | control: granularity, certain ✓ / ✗ (accuracy) | control: Mironov | "
             "control: low bits | defended: certain ✓ / ✗ (accuracy), each attack | defended: low bits |",
             "|---|---:|---:|---:|---:|---:|"]
    for mech, r in by.items():
        g, mi = r[("granularity", "control")], r.get(("Mironov", "control"))
        defended = [r[("granularity", "defended")]] + ([r[("Mironov", "defended")]] if mi else [])
        mir = f"{pct(mi.certain_right)} / {pct(mi.certain_wrong)} ({pct(mi.accuracy)})" if mi else "—"
        dc = f"{pct(max(x.certain_right for x in defended))} / {pct(max(x.certain_wrong for x in defended))} " \
             f"({pct(max(x.accuracy for x in defended))})"
        lines.append(f"| {LABELS.get(mech, mech)} | {pct(g.certain_right)} / {pct(g.certain_wrong)} ({pct(g.accuracy)}) "
                     f"| {mir} | {pct(r[('low bits', 'control')].accuracy)} | {dc} | "
                     f"{pct(r[('low bits', 'defended')].accuracy)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=1000, help="answers per (mechanism, variant), half from each x")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", action="store_true", help="then print docs/benchmarks.md's table")
    args = ap.parse_args()
    print(f"{'mechanism · attack · variant':<44} {'answers':>6} {'cert.✓':>7} {'cert.✗':>7} {'accur.':>7}")
    results = run(args.answers, args.seed)
    if args.markdown:
        print()
        print(markdown(results))


if __name__ == "__main__":
    main()
