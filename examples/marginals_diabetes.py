"""Private 2-way marginals of a real table: scikit-learn's diabetes data (442 patients, offline).

The steps a data curator takes with knorm:

1. declare a domain from documentation and clinical conventions (never from the data);
2. build the histogram x of the table over that domain (``knorm.data.histogram``);
3. release all 2-way marginals with the K-norm mechanism at ε = 1;
4. post-process to consistent, non-negative marginals (free: no privacy cost);
5. read the released answers back as named tables (``knorm.data.split_marginals``).

For the demonstration the same marginals are also released with the Laplace and Gaussian
(δ = 1e-6) mechanisms, and every release is compared with the TRUE marginals. That
comparison reads the data outside any mechanism: it exists only to show the error of this
demonstration, and a real release publishes one mechanism's answers and nothing else.

    python examples/marginals_diabetes.py                 # private noise (OS entropy)
    python examples/marginals_diabetes.py --seed 0        # reproducible, NOT private
    python examples/marginals_diabetes.py --small         # 3 attributes (what CI runs)
    python examples/marginals_diabetes.py --repeats 20    # mean error of 20 releases each (costs 20ε)

Needs scikit-learn and pandas: ``pip install -e ".[examples]"``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's knorm, not an installed one
import knorm  # noqa: E402
from knorm import postprocess  # noqa: E402
from knorm.data import Attribute, Domain, histogram, marginal_keys, marginal_workload, split_marginals  # noqa: E402

# ---- 1. the declared domain ------------------------------------------------------------------
# Every edge below comes from the data set's documentation (units of Efron et al. 2004: age in
# years, BMI in kg/m², serum values in mg/dL) and from clinical conventions, chosen before
# looking at the records. Bins from the data (quantiles, observed min/max) would leak.
# The outer edges are generous physical limits, so no real record falls outside them.
ATTRIBUTES = {
    "age": Attribute("age", edges=[0, 40, 60, 120], labels=["<40", "40-59", "60+"]),
    # the source codes sex as 1 or 2 without saying which is which
    "sex": Attribute("sex", categories=[1, 2], labels=["sex 1", "sex 2"]),
    # WHO adult classes: underweight, normal, overweight, obese
    "bmi": Attribute("bmi", edges=[0, 18.5, 25, 30, 100], labels=["<18.5", "18.5-25", "25-30", "30+"]),
    # s6 = blood glucose; the ADA's fasting thresholds 100 and 126 mg/dL, as bins (not diagnoses)
    "s6": Attribute("s6", edges=[0, 100, 126, 1000], labels=["glu<100", "glu 100-125", "glu 126+"]),
    # s3 = HDL cholesterol; below 40 mg/dL is "low" (NCEP ATP III)
    "s3": Attribute("s3", edges=[0, 40, 1000], labels=["HDL<40", "HDL 40+"]),
}
FULL = ("age", "sex", "bmi", "s6", "s3")  # 3·2·4·3·2 = 144 cells, 77 marginal queries
SMALL = ("sex", "bmi", "s6")  # 2·4·3 = 24 cells, 26 marginal queries


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epsilon", type=float, default=1.0, help="ε of each mechanism's release")
    p.add_argument("--delta", type=float, default=1e-6, help="δ of the Gaussian baseline")
    p.add_argument("--small", action="store_true", help=f"only the attributes {', '.join(SMALL)} (fast; for CI)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise: a reproducible demonstration that is NOT private (default: OS entropy)")
    p.add_argument("--repeats", type=int, default=1,
                   help="average the demonstration's error over this many releases per mechanism (each costs ε "
                        "more: basic composition; a demonstration, not a deployment)")
    p.add_argument("--show", default="bmi,s6", help="one 2-way marginal to print as a named table")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {args.repeats}")
    from sklearn.datasets import load_diabetes  # ships with scikit-learn: no download

    domain = Domain([ATTRIBUTES[a] for a in (SMALL if args.small else FULL)])
    table = load_diabetes(scaled=False, as_frame=True).frame  # raw units, a pandas DataFrame

    # ---- 2. the histogram: private; it leaves only through a mechanism's release() --------------
    x = histogram(table, domain)
    F = marginal_workload(domain, 2)
    print(f"domain {domain!r}; all 2-way marginals: F is {F.shape[0]} x {F.shape[1]}")

    # ---- 3. the releases -------------------------------------------------------------------------
    def rng(i):
        return None if args.seed is None else args.seed + i  # int: reproducible and NOT private

    mechanisms = {
        "K-norm": knorm.KNormMechanism(F, epsilon=args.epsilon, rng=rng(0)),
        "Laplace": knorm.LaplaceMechanism(F, epsilon=args.epsilon, rng=rng(1)),
        "Gaussian": knorm.GaussianMechanism(F, epsilon=args.epsilon, delta=args.delta, rng=rng(2)),
    }
    truth = F @ x  # DEMONSTRATION ONLY: the true marginals, to measure the error below
    rows, released = [], {}
    for name, mech in mechanisms.items():
        t0 = time.perf_counter()
        expected = mech.expected_error()  # a property of F and ε alone: no data
        answers = mech.release(x, size=args.repeats)  # (repeats, d)
        # ---- 4. free post-processing: consistent marginals, then also non-negative counts -------
        # (K-norm noise lies in the column space of F already, so least squares leaves it as it is)
        consistent = postprocess.least_squares(F, answers)
        nonneg = postprocess.nonnegative(F, answers)
        seconds = time.perf_counter() - t0
        released[name] = nonneg[0]
        errs = [np.linalg.norm(a - truth, axis=1) for a in (answers, consistent, nonneg)]  # DEMONSTRATION ONLY
        rows.append((name, expected, errs, seconds, mech.privacy))

    eps = f"ε = {args.epsilon:g}"
    what = "one release" if args.repeats == 1 else f"mean ± s.e. over {args.repeats} releases"
    print(f"\nℓ₂ error of the {F.shape[0]} marginal answers at {eps}, {what} of each mechanism\n"
          "(the true marginals are read for this report only; 'expected' is E‖noise‖₂, from F and ε alone):")
    print(f"  {'mechanism':9s} {'expected':>13s} {'raw':>13s} {'least sq.':>13s} {'nonneg.':>13s} {'time s':>7s}")

    def cell(v, se):
        return f"{v:.1f}" + (f" ± {se:.2g}" if se else "")

    for name, expected, errs, seconds, _ in rows:
        stats = [cell(e.mean(), e.std(ddof=1) / np.sqrt(len(e)) if len(e) > 1 else 0.0) for e in errs]
        print(f"  {name:9s} {cell(expected.value, expected.stderr):>13s} " + " ".join(f"{s:>13s}" for s in stats)
              + f" {seconds:7.1f}")
    print("privacy of each mechanism's releases:")
    for name, *_, claim in rows:
        print(f"  {claim}")

    # ---- 5. named tables ---------------------------------------------------------------------
    key = tuple(args.show.split(","))
    if key in marginal_keys(domain, 2):
        a, b = (domain[k] for k in key)
        private = split_marginals(domain, 2, released["K-norm"])[key]
        true = split_marginals(domain, 2, truth)[key]  # DEMONSTRATION ONLY
        print(f"\n{key[0]} × {key[1]}: K-norm, consistent and non-negative, first release (true counts in brackets)")
        width = max(len(s) for s in b.labels) + 2
        print(" " * 10 + "".join(f"{s:>{width + 6}s}" for s in b.labels))
        for i, row_label in enumerate(a.labels):
            cells = "".join(f"{private[i, j]:>{width}.1f} [{true[i, j]:3.0f}]" for j in range(b.size))
            print(f"{row_label:10s}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
