"""``knorm prepare``: the work that depends on F only, done once and saved for later releases."""

import argparse
import json
import sys
import time
from pathlib import Path

from ._common import (CLIError, Progress, UsageError, _add_debug, _add_workers, _add_workload, _dask_executor,
                      _positive_int, _require_dask, check_output, check_prepared_file, load_workload)


def load_prepared_option(args, F, option="--prepared"):
    """``--prepared FILE`` (or ``option``, e.g. ``--verify``) for the workload F: its
    :class:`~knorm.walks.prepared.PreparedWorkload` (None without the option); refused (exit 1,
    one line naming the option) for a missing file, another F or a stale file."""
    path = getattr(args, option.lstrip("-"), None)
    if not path:
        return None
    from ..walks.prepared import load_prepared

    check_prepared_file(path, option)
    try:
        return load_prepared(path, F)
    except (OSError, ValueError) as exc:
        raise CLIError(f"{option}: {str(exc).removeprefix('prepared: ')}".splitlines()[0]) from None


def prepare_chains(args, executor):
    """``--chains``, or its default: ``max(8, N)`` for ``--workers N``, ``max(8, the cluster's threads)``
    for ``--scheduler``, else 8 (a seeded prepare's file depends on the chain count only; ``knorm
    sample``'s bank runs as many release chains)."""
    from ..walks.sampler import DEFAULT_CHAINS

    if getattr(args, "chains", None) is not None:
        return args.chains
    slots = args.workers or 0
    if executor is not None:
        slots = executor.slots
    return max(DEFAULT_CHAINS, slots)


def cmd_prepare(args):
    if args.verify:
        return _verify(args)
    from ..errors import ConvergenceError
    from ..walks.prepared import prepare

    if not args.out:
        raise UsageError("--out: give the prepared-workload file to write (or --verify FILE to check one)")
    if args.scheduler and args.workers:
        raise UsageError("--workers and --scheduler cannot be combined")
    out = check_output(args.out, args.force, inputs=(args.matrix,), suffixes=(".knorm", ".npz"))
    if args.scheduler:
        _require_dask()
    F, label = load_workload(args)
    # bars on a terminal; otherwise a line as each stage starts and ends (counts and times only)
    progress = Progress(not args.quiet, "prepare", plain=not sys.stderr.isatty())
    t0 = time.perf_counter()
    executor = None
    try:
        if args.scheduler:
            executor = _dask_executor(args.scheduler)
        workers = executor if executor is not None else args.workers
        chains = prepare_chains(args, executor)
        w = prepare(F, out, chains=chains, workers=workers, progress=progress, resume=not args.restart,
                    recommend=bool(args.recommend))  # the table's rows, ε-free, kept in the file
    except (ValueError, ConvergenceError) as exc:
        raise CLIError(str(exc).splitlines()[0]) from None
    finally:
        progress.close()
        if executor is not None:
            executor.close()
    rows = sorted(w.rows.get("rows", {}))
    cert = w.certificate
    summary = {"workload": label, "d": int(F.shape[0]), "n": int(F.shape[1]), "dim": int(w.body.dim),
               "fingerprint": w.fingerprint, "chains": chains, "rounding": w.rounding is not None,
               "rounding_iterations": None if w.rounding is None else w.rounding.iterations,
               "tau": None if w.rounding is None else w.rounding.tau,
               "certificate": None if cert is None else {**cert.as_dict(), "rhat_limit": cert.rhat_limit},
               "recommend_rows": rows, "seconds": time.perf_counter() - t0, "out": str(out),
               "stages": w.stages}
    if args.json:
        print(json.dumps(summary, indent=2))
    elif not args.quiet:
        how = ("exact structure: nothing to round or certify" if w.rounding is None else
               f"rounded in {w.rounding.iterations} iteration(s) of {chains} chains")
        if rows:
            how += f"; recommend's rows {', '.join(rows)}"
        print(f"knorm prepare: {label}, rank {w.body.dim}; {how}; {summary['seconds']:.2f} s")
        if cert is not None:
            print(f"walk {cert.summary()}")
        what = "F and its fingerprint, the rounding" + (", the certificate and 64 stationary states" if cert else "") + \
            (" and recommend's rows" if rows else "")
        print(f"wrote {out} (public: {what}: functions of F and public seeds only; no data, no noise); "
              f"use it with knorm sample --prepared {out} (F comes from the file)"
              + ("; knorm info and --mechanism auto read recommend's rows from it" if rows else ""))
    return 0


def _verify(args):
    """``knorm prepare --verify FILE``: re-run a short certification of someone else's file."""
    from ..walks.certify import verify

    F, label = load_workload(args)
    w = load_prepared_option(args, F, "--verify")
    if w.certified is None:
        raise CLIError(f"--verify: {args.verify!r} holds no certificate (exact structure, or prepared without one)")
    t0 = time.perf_counter()
    ok, m = verify(w.body, w.rounding, w.certified, workers=args.workers)
    m["seconds"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"workload": label, "passed": ok, **m}, indent=2))
    else:
        print(f"knorm prepare --verify: {label}, rank {w.body.dim}; the file's walk {w.certificate.summary()}")
        print(f"re-run from its states: max R-hat {m['max_rhat']:.4f}, min bulk ESS {m['min_ess']:.0f} of {m['pool']} "
              f"records, gauge KS p {m['gauge_ks_p']:.3f}, τ {m['tau']:.2f} per step; {m['seconds']:.1f} s: "
              + ("passed" if ok else "FAILED (" + "; ".join(m["failures"]) + ")"))
    return 0 if ok else 1


def add_parser(sub):
    """Add ``knorm prepare`` to the subparsers ``sub``."""
    s = sub.add_parser("prepare", help="do the work that depends on F only once and save it (for knorm sample "
                                       "--prepared)",
                       description="Compute the rounding of K = F·B₁ⁿ and certify the billiard walk on it once "
                                   "(R-hat, bulk ESS, the gauge's exact law; functions of F and fixed public seeds) "
                                   "and save them with F's fingerprint and 64 public stationary states, so that "
                                   "later releases with the same workload (knorm sample --prepared FILE) cost a "
                                   "warm-up of W steps from one of those states. The file is public: it holds "
                                   "nothing computed from data and no noise.")
    _add_workload(s)
    _add_debug(s, argparse.SUPPRESS)
    s.add_argument("--out", help="the prepared-workload file to write (.knorm or .npz)")
    s.add_argument("--verify", metavar="FILE",
                   help="instead of preparing, check a prepared file (someone else's) for this workload: load it "
                        "(thresholds, states inside K) and re-run a short certification from its states; exit 1 "
                        "if it fails")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--recommend", action=argparse.BooleanOptionalAction, default=True,
                   help="also compute knorm.recommend's table (default; --no-recommend skips it): each mechanism's expected error, ε-free, a function "
                        "of F and fixed seeds) and keep it in the file, so that knorm sample --mechanism auto "
                        "--prepared FILE takes the table from it (a chosen multi-level NIM still searches its "
                        "plan again)")
    s.add_argument("--json", action="store_true", help="print a machine-readable summary")
    s.add_argument("--quiet", action="store_true", help="no progress bar and no summary (unless --json)")
    _add_workers(s)
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the chains on this Dask distributed scheduler (tcp://host:port; pip install "
                        "'knorm[dask]'); the file is the same as with threads")
    s.add_argument("--chains", type=_positive_int, default=None, metavar="N",
                   help="chains of the rounding and of the certified run (default 8, or the --workers count or "
                        "the cluster's threads when more); the file depends on N, never on --workers or "
                        "--scheduler")
    s.add_argument("--restart", action="store_true",
                   help="discard the snapshot of an unfinished prepare (OUT.partial) instead of continuing from it")
    s.set_defaults(func=cmd_prepare)
    return s
