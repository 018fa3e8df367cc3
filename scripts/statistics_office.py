"""Time each step of docs/statistics-office.md on a realistic domain, in Python and through the CLI.

A made-up table of N records (default 3000) over five declared attributes of sizes 2, 3, 4, 5, 6
(720 cells; all 2-way marginals: 155 queries, rank 101): DataFrame → histogram → prepare (F only,
once) → load → one K-norm release at ε = 1 → non-negative consistent tables, named. Then the same
through the command line (knorm prepare; knorm sample --prepared --count 1; answers.npz back to
tables). Prints one line per step with its wall time; the machine may be shared, so compare steps
of one run:

    python scripts/statistics_office.py            # private noise (OS entropy)
    python scripts/statistics_office.py --records 3000 --workers 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import knorm
from knorm.data import Attribute, Domain, histogram, marginal_workload, split_marginals

DOMAIN = Domain([
    Attribute("sex", categories=["F", "M"]),
    Attribute("region", categories=["north", "centre", "south"]),
    Attribute("age", edges=[0, 25, 45, 65, 120]),
    Attribute("education", categories=["none", "primary", "secondary", "tertiary", "doctorate"]),
    Attribute("income", edges=[0, 10_000, 20_000, 35_000, 50_000, 80_000, 10**7]),
])


def table(records, rng):
    """A made-up population (the office's private records)."""
    return pd.DataFrame({
        "sex": rng.choice(["F", "M"], records), "region": rng.choice(["north", "centre", "south"], records),
        "age": rng.uniform(18, 95, records),
        "education": rng.choice(["none", "primary", "secondary", "tertiary", "doctorate"], records,
                                p=[0.05, 0.2, 0.4, 0.3, 0.05]),
        "income": rng.lognormal(10, 0.7, records)})


def step(name, t0):
    print(f"  {name:48s} {time.perf_counter() - t0:7.2f} s", flush=True)
    return time.perf_counter()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3000)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    df = table(args.records, np.random.default_rng(0))
    F = marginal_workload(DOMAIN, 2)
    print(f"{DOMAIN!r}; {args.records} records; 2-way marginals: F is {F.shape[0]} × {F.shape[1]}")
    opts = {} if args.workers is None else {"workers": args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print("Python:")
        t = time.perf_counter()
        t0 = t
        x = histogram(df, DOMAIN)
        t = step("histogram", t)
        knorm.prepare(F, tmp / "W.knorm", **opts)
        t = step("knorm.prepare (F only, once; the rounding)", t)
        w = knorm.load_prepared(tmp / "W.knorm", F)
        t = step("knorm.load_prepared", t)
        m = knorm.KNormMechanism(F, epsilon=1.0, prepared=w, sampler_options=opts)
        a = m.release(x)
        t = step("release (1 answer, ε = 1; warm-up and draws)", t)
        e = m.expected_error()
        t = step("m.expected_error() (the file's certified pool)", t)
        rec = knorm.recommend(F, epsilon=1.0, prepared=w)
        t = step("knorm.recommend(F, epsilon=1, prepared=w)", t)
        tables = split_marginals(DOMAIN, 2, knorm.postprocess.nonnegative(F, a))
        t = step("nonnegative + split_marginals", t)
        print(f"  {'all':48s} {t - t0:7.2f} s   ({len(tables)} tables; expected error {e}; recommended "
              f"{rec.best}; {m.privacy})")
        print("command line:")
        np.save(tmp / "F.npy", F)
        np.save(tmp / "x.npy", x)
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        work = ["--workers", str(args.workers)] if args.workers else []
        t0 = t = time.perf_counter()
        subprocess.run(["knorm", "prepare", "--matrix", "F.npy", "--out", "W2.knorm", "--quiet", *work], cwd=tmp,
                       env=env, check=True)
        t = step("knorm prepare", t)
        subprocess.run(["knorm", "sample", "--matrix", "F.npy", "--data", "x.npy", "--prepared", "W2.knorm",
                        "--count", "1", "--out", "answers.npz", "--quiet", *work], cwd=tmp, env=env, check=True)
        t = step("knorm sample --prepared --count 1", t)
        subprocess.run(["knorm", "info", "--matrix", "F.npy", "--prepared", "W2.knorm", "--epsilon", "1"], cwd=tmp,
                       env=env, check=True, stdout=subprocess.DEVNULL)
        t = step("knorm info --prepared (errors and recommend)", t)
        with np.load(tmp / "answers.npz") as z:
            answers = z["samples"][0]
            claim = json.loads(str(z["privacy"]))
        split_marginals(DOMAIN, 2, knorm.postprocess.nonnegative(F, answers))
        t = step("answers.npz → nonnegative + split_marginals", t)
        print(f"  {'all':48s} {t - t0:7.2f} s   (claim: ε = {claim['epsilon']:g}, {claim['sampling']})")


if __name__ == "__main__":
    main()
