"""Time ``knorm publish`` on an ANES-like example: records → tables of every region, after ``knorm prepare``.

Made-up records (default 8,000, seeded) over five declared attributes shaped like the American National
Election Studies' (sex 2, age band 4, education 4, party identification 7, ideology 7: 1,568 cells; all
2-way marginals: d = 221, rank 155) and seven declared regions (``--by region``). The workload is
prepared once (``knorm prepare --workload marginals --shape 2 4 4 7 7 --k 2``; minutes, F only), then
each ``knorm publish --prepared`` runs in a fresh process (imports, reading the CSV, the histograms, the
release of 7 regions, post-processing, standard errors, the table) and its wall and CPU times are printed:

    python scripts/publish_timing.py                            # prepares into a temporary folder
    python scripts/publish_timing.py --prepared anes.knorm --repeats 3 --post nonnegative integer
    python scripts/publish_timing.py --mechanism laplace       # the same command without MCMC

The noise comes from OS entropy (a private run each time); nothing of the records is printed.
"""

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REGIONS = ["New England", "Mid-Atlantic", "South Atlantic", "Midwest", "South Central", "Mountain", "Pacific"]
DOMAIN = [
    {"name": "sex", "categories": ["female", "male"]},
    {"name": "age", "edges": [18, 30, 45, 65, "inf"], "clip": True},
    {"name": "education", "categories": ["high school or less", "some college", "bachelor", "graduate"]},
    {"name": "party", "categories": [1, 2, 3, 4, 5, 6, 7],
     "labels": ["strong Dem", "weak Dem", "lean Dem", "independent", "lean Rep", "weak Rep", "strong Rep"]},
    {"name": "ideology", "categories": [1, 2, 3, 4, 5, 6, 7]},
    {"name": "region", "categories": REGIONS},
]
SHAPE = "2 4 4 7 7"


def write_records(path, n, seed=0):
    """A made-up survey (the office's private records in a real run)."""
    rng = np.random.default_rng(seed)
    party = rng.integers(1, 8, n)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["respondent", "sex", "age", "education", "party", "ideology", "region", "weight"])
        for i in range(n):
            w.writerow([i, rng.choice(["female", "male"]), int(rng.integers(18, 95)),
                        rng.choice(DOMAIN[2]["categories"]), party[i],
                        int(np.clip(party[i] + rng.integers(-2, 3), 1, 7)), rng.choice(REGIONS),
                        f"{rng.uniform(0.2, 3):.3f}"])


def _child_cpu():
    """User + system CPU seconds of the finished child processes (the commands timed)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=8000)
    ap.add_argument("--prepared", help="a prepared file of the workload (made here when missing)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--post", nargs="+", default=["none", "least-squares", "nonnegative", "integer"])
    ap.add_argument("--mechanism", default="knorm", help="knorm (default), or laplace: the command without MCMC")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="knorm-publish-"))
    write_records(folder / "people.csv", args.records)
    (folder / "domain.json").write_text(json.dumps(DOMAIN, indent=1))
    knorm = [sys.executable, "-m", "knorm"]
    prepared = Path(args.prepared) if args.prepared else folder / "anes.knorm"
    if not prepared.exists() and args.mechanism == "knorm":
        t0 = time.perf_counter()
        subprocess.run([*knorm, "prepare", "--workload", "marginals", "--shape", *SHAPE.split(), "--k", "2",
                        "--out", str(prepared), "--quiet"], check=True)
        print(f"knorm prepare (once, F only): {time.perf_counter() - t0:.1f} s")
    print(f"{args.records} records, 7 regions, shape ({SHAPE.replace(' ', ', ')}), 2-way marginals; "
          f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    for post in args.post:
        for r in range(args.repeats):
            out = folder / f"tables-{post}-{r}.csv"
            cmd = [*knorm, "publish", "--records", str(folder / "people.csv"), "--domain", str(folder / "domain.json"),
                   "--by", "region", "--k", "2", "--post", post, "--out", str(out), "--quiet",
                   "--mechanism", args.mechanism, *(["--prepared", str(prepared)] if args.mechanism == "knorm" else [])]
            t0, c0 = time.perf_counter(), _child_cpu()
            subprocess.run(cmd, check=True)
            print(f"  knorm publish --mechanism {args.mechanism} --post {post:14s} {time.perf_counter() - t0:6.2f} s "
                  f"wall, {_child_cpu() - c0:6.2f} s CPU (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"(files in {folder})")


if __name__ == "__main__":
    main()
