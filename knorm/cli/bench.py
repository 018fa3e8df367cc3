"""``knorm bench``: the oracle comparison, the Table-3 reproduction and the scaling study."""

import argparse
import os
import tempfile
from pathlib import Path

from ..walks.chains import WALKS
from ._common import (CLIError, UsageError, _add_debug, _add_workers, _check_writable, _positive_float, _positive_int,
                      _seed)

# Defaults of the scripts the documentation's tables come from (scripts/compare_oracles.py,
# reproduce_table3.py, scaling.py): `knorm bench X` with no options reproduces them.
BENCH_DEFAULTS = {
    "oracles": {"d": [40], "seed": 0},
    "table3": {"d": [40, 20], "seed": 2019},
    "scaling": {"d": [10, 20, 40, 80], "seed": 0},
}
BENCH_FILES = {"oracles": [], "table3": ["table3.csv", "table3.md", "table3.png"],
               "scaling": ["scaling.csv", "scaling.png"]}


def bench_parts(args):
    return ["oracles", "table3"] if args.what == "all" else [args.what]


def bench_outputs(args):
    """The files ``knorm bench`` writes into --out-dir (oracles writes none)."""
    return [nm for part in bench_parts(args) for nm in BENCH_FILES[part]
            if not (args.no_plot and nm.endswith(".png"))]


def check_bench_outputs(args):
    names = bench_outputs(args)
    if not names:
        return
    folder = Path(args.out_dir)
    if folder.exists() and not folder.is_dir():
        raise CLIError(f"--out-dir {args.out_dir!r} is a file, not a folder")
    existing = [str(folder / nm) for nm in names if (folder / nm).exists()]
    if existing and not args.force:
        raise UsageError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                         "use --force to overwrite")
    base = folder
    while not base.exists():
        base = base.parent
    _check_writable(base, "--out-dir")


def _bench_atomically(folder, run):
    """``run(tmp)`` writes into a temporary folder inside ``folder``; each file it made is
    then renamed into ``folder`` (os.replace). An interrupted benchmark leaves nothing.
    Returns the paths written."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".knorm-bench-", dir=folder))
    try:
        run(tmp)
        written = []
        for f in sorted(tmp.iterdir()):
            os.replace(f, folder / f.name)
            written.append(folder / f.name)
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _bench_print(line):
    """Progress lines of the experiments, less their "wrote <temporary path>" lines."""
    if not line.startswith("wrote "):
        print(line, flush=True)


def cmd_bench(args):
    from .. import experiments as E

    check_bench_outputs(args)
    folder = Path(args.out_dir)
    for part in bench_parts(args):
        d = args.d or BENCH_DEFAULTS[part]["d"]
        seed = BENCH_DEFAULTS[part]["seed"] if args.bench_seed is None else args.bench_seed
        print(f"knorm bench {part}: d = {' '.join(map(str, d))}, seed {seed}", flush=True)
        written = []
        if part == "oracles":
            for di in d:
                E.compare_oracles(di, args.n, seed=seed, highs_steps=args.highs_steps, workers=args.workers)
        elif part == "table3":
            def run(tmp, d=d, seed=seed):
                E.table3(tuple(d), args.n, tuple(args.eps), releases=args.releases, seed=seed, out_dir=tmp,
                         plot_path=not args.no_plot, workers=args.workers, out=_bench_print)
            written = _bench_atomically(folder, run)
        else:
            def run(tmp, d=d, seed=seed):
                E.scaling(tuple(d), tuple(args.factors), tuple(args.walks), seconds=args.seconds, seed=seed,
                          out_dir=tmp, plot_path=not args.no_plot, workers=args.workers, out=_bench_print)
            written = _bench_atomically(folder, run)
        for path in written:
            print(f"wrote {path}")
    return 0


def add_parser(sub):
    """Add ``knorm bench`` to the subparsers ``sub``."""
    b = sub.add_parser("bench", help="oracle comparison, Table-3 reproduction and scaling study",
                       description="Benchmarks on synthetic workloads and synthetic data (no real data); "
                                   "nothing bench prints is private. With no options each benchmark runs the "
                                   "settings and seeds of its script (scripts/compare_oracles.py: d 40, seed 0; "
                                   "scripts/reproduce_table3.py: d 40 20, seed 2019; scripts/scaling.py: d 10 20 "
                                   "40 80, seed 0), so it reproduces the documentation's tables. Files are written "
                                   "atomically and never overwritten without --force.")
    _add_debug(b, argparse.SUPPRESS)
    b.add_argument("what", nargs="?", choices=["oracles", "table3", "scaling", "all"], default="all",
                   help="all: oracles and table3 (default)")
    b.add_argument("--d", type=_positive_int, nargs="+", default=None,
                   help="query counts (default: the script's, see above)")
    b.add_argument("--n", type=_positive_int, default=200, help="cells: columns of the random ±1 workload F (oracles, table3; default 200)")
    b.add_argument("--eps", type=_positive_float, nargs="+", default=[0.1, 1.0, 2.0], help="table3")
    b.add_argument("--releases", type=_positive_int, default=100, help="table3: releases per cell")
    b.add_argument("--highs-steps", type=_positive_int, default=60, help="oracles: steps of the HiGHS chain")
    b.add_argument("--factors", type=_positive_int, nargs="+", default=[1, 5, 25], help="scaling: n = factor·d")
    b.add_argument("--walks", nargs="+", choices=list(WALKS),
                   default=list(WALKS), help="scaling")
    b.add_argument("--seconds", type=_positive_float, default=3.0,
                   help="scaling: sampling seconds per configuration and walk (default 3)")
    b.add_argument("--bench-seed", type=_seed, default=None, metavar="N",
                   help="seed of the synthetic workloads, data and noise (default: the script's, see above)")
    b.add_argument("--out-dir", default=".", help="folder for table3.* and scaling.* (default .)")
    b.add_argument("--force", action="store_true", help="overwrite table3.* / scaling.* files already in --out-dir")
    b.add_argument("--no-plot", action="store_true", help="write no figures (table3.png, scaling.png)")
    _add_workers(b)
    b.set_defaults(func=cmd_bench)
    return b
