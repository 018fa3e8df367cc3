"""``knorm prepare``: the work that depends on F only, done once and saved for later releases."""

import argparse
import json
import sys
import time

from ._common import CLIError, Progress, _add_debug, _add_workers, _add_workload, check_output, load_workload


def load_prepared_option(args, F):
    """``--prepared FILE`` for the workload F: its :class:`~knorm.walks.prepared.PreparedWorkload`
    (None without the option); refused (exit 1, one line) for another F or a stale file."""
    if not getattr(args, "prepared", None):
        return None
    from ..walks.prepared import load_prepared

    try:
        return load_prepared(args.prepared, F)
    except (OSError, ValueError) as exc:
        raise CLIError(f"--prepared: {str(exc).removeprefix('prepared: ')}".splitlines()[0]) \
            from None


def cmd_prepare(args):
    from ..walks.prepared import prepare

    out = check_output(args.out, args.force, inputs=(args.matrix,), suffixes=(".knorm", ".npz"))
    F, label = load_workload(args)
    progress = Progress(not args.quiet and sys.stderr.isatty(), "prepare")
    t0 = time.perf_counter()
    try:
        w = prepare(F, None if args.recommend else out, workers=args.workers, progress=progress)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    finally:
        progress.close()
    rows = []
    if args.recommend:  # the table's rows, ε-free, kept in the file (the mechanism it builds draws nothing)
        from ..recommend import recommend

        try:
            table = recommend(F, epsilon=1.0, prepared=w, workers=args.workers).table
        except ValueError as exc:
            raise CLIError(f"--recommend: {exc}".splitlines()[0]) from None
        rows = [k for k, r in table.items() if r.rms is not None and k in w.rows.get("rows", {})]
        w.save(out)
    summary = {"workload": label, "d": int(F.shape[0]), "n": int(F.shape[1]), "dim": int(w.body.dim),
               "fingerprint": w.fingerprint, "rounding": w.rounding is not None,
               "rounding_iterations": None if w.rounding is None else w.rounding.iterations,
               "tau": None if w.rounding is None else w.rounding.tau,
               "recommend_rows": rows, "seconds": time.perf_counter() - t0, "out": str(out)}
    if args.json:
        print(json.dumps(summary, indent=2))
    elif not args.quiet:
        how = ("exact structure: nothing to round" if w.rounding is None else
               f"rounded in {w.rounding.iterations} iteration(s), τ = {w.rounding.tau:.2f}")
        if rows:
            how += f"; recommend's rows {', '.join(rows)}"
        print(f"knorm prepare: {label}, rank {w.body.dim}; {how}; {summary['seconds']:.2f} s")
        what = "F's fingerprint, the rounding" + (" and recommend's rows" if rows else "")
        print(f"wrote {out} (public: {what}: functions of F only; no data, no noise); "
              "use it with knorm sample --prepared (and --mechanism auto, with --recommend)")
    return 0


def add_parser(sub):
    """Add ``knorm prepare`` to the subparsers ``sub``."""
    s = sub.add_parser("prepare", help="do the work that depends on F only once and save it (for knorm sample "
                                       "--prepared)",
                       description="Compute the rounding of K = F·B₁ⁿ (a function of F and a fixed public seed) "
                                   "and save it with F's fingerprint, so that later releases with the same "
                                   "workload (knorm sample --prepared FILE) skip it. The file is public: it holds "
                                   "nothing computed from data and no noise.")
    _add_workload(s)
    _add_debug(s, argparse.SUPPRESS)
    s.add_argument("--out", required=True, help="the prepared-workload file to write (.knorm or .npz)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--recommend", action="store_true",
                   help="also compute knorm.recommend's table (each mechanism's expected error, ε-free: a function "
                        "of F and fixed seeds) and keep it in the file, so that knorm sample --mechanism auto "
                        "--prepared FILE takes the table from it (a chosen multi-level NIM still searches its "
                        "plan again)")
    s.add_argument("--json", action="store_true", help="print a machine-readable summary")
    s.add_argument("--quiet", action="store_true", help="no progress bar and no summary (unless --json)")
    _add_workers(s)
    s.set_defaults(func=cmd_prepare)
    return s
