"""The ``knorm`` command line.

* ``knorm sample``  -- differentially private noise or releases (``Fx + noise``) in bulk.
* ``knorm info``    -- facts about a workload's body and which mechanism to use.
* ``knorm uniform`` -- the engine alone: uniform draws from K with mixing diagnostics.
* ``knorm bench``   -- the oracle comparison and the Table-3 reproduction.

Errors (bad arguments, unreadable or malformed files) end with one line on stderr and a
non-zero status, never a traceback; an existing output file is never overwritten
without ``--force``; output is written atomically (temporary file, then rename).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import __version__
from ._io import atomic_write

MECHANISMS = ("knorm", "nim", "laplace", "gaussian")
WORKLOADS = ("pm1", "bernoulli", "identity", "prefix", "all_range", "width_range", "marginals")


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's convention for usage errors)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return v


# ---- inputs ---------------------------------------------------------------------------------

def _load_npy(path, what):
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CLIError(f"{what} file {path!r} does not exist") from None
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot read {what} file {path!r} as .npy: {exc}".splitlines()[0]) from None
    if isinstance(arr, np.lib.npyio.NpzFile):  # pragma: no cover - np.load of .npz
        raise CLIError(f"{what} file {path!r} is an .npz archive; give a .npy array")
    return arr


def load_workload(args):
    """F from ``--matrix`` or from ``--workload`` with its sizes; returns (F, label)."""
    from . import workloads as W
    from .body.hull import validate_matrix

    if args.matrix:
        F = _load_npy(args.matrix, "matrix")
        try:
            F = validate_matrix(F)
        except ValueError as exc:
            raise CLIError(f"matrix {args.matrix!r}: {exc}") from None
        return F, f"matrix {args.matrix} {F.shape[0]}×{F.shape[1]}"
    shape = tuple(args.shape) if args.shape else None
    try:
        F = W.by_name(args.workload, d=args.d, n=args.n, k=args.k, shape=shape, rng=args.seed)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"workload {args.workload!r}: {exc}") from None
    return F, f"workload {args.workload} {F.shape[0]}×{F.shape[1]}"


def check_output(path, force):
    if path is None:
        return None
    p = Path(path)
    if p.suffix not in (".npy", ".npz"):
        raise CLIError(f"output {path!r} must end in .npy or .npz")
    if p.exists() and not force:
        raise CLIError(f"output {path!r} exists; use --force to overwrite it")
    if not p.parent.exists():
        raise CLIError(f"output folder {str(p.parent)!r} does not exist")
    return p


def write_samples(path, array, meta=None):
    """Write .npy (array) or .npz (array + JSON metadata) atomically."""
    if path.suffix == ".npy":
        atomic_write(path, lambda f: np.save(f, array))
    else:
        meta = {k: np.array(json.dumps(v, default=float)) for k, v in (meta or {}).items()}
        atomic_write(path, lambda f: np.savez(f, samples=array, **meta))


class Progress:
    """tqdm bar on a terminal (none with --quiet or when stderr is not a TTY)."""

    def __init__(self, enabled, desc):
        self.bar = None
        self.enabled = enabled
        self.desc = desc
        self.runs = 0

    def __call__(self, done, target):
        if not self.enabled:
            return
        from tqdm import tqdm

        if self.bar is None or self.bar.total != target or done < self.bar.n:
            if self.bar is not None:
                self.bar.close()
            self.runs += 1
            self.bar = tqdm(total=target, desc=f"{self.desc} (run {self.runs})", unit="draw", file=sys.stderr,
                            leave=False, dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


# ---- knorm sample -----------------------------------------------------------------------------

def build_mechanism(name, F, args, sampler_options):
    from .mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism

    try:
        if name == "laplace":
            return LaplaceMechanism(F, epsilon=args.epsilon, rng=args.seed)
        if name == "gaussian":
            if args.delta is None:
                raise CLIError("--mechanism gaussian needs --delta")
            return GaussianMechanism(F, epsilon=args.epsilon, delta=args.delta, rng=args.seed)
        if name == "knorm":
            return KNormMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=args.seed,
                                  bank_size=1000, sampler_options=sampler_options)
        return NIMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=args.seed, sampler_options=sampler_options)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _diagnostics(mech):
    infos = []
    if hasattr(mech, "levels"):
        infos = [lv.mechanism.last_info for lv in mech.levels if lv.mechanism.last_info is not None]
    elif getattr(mech, "last_info", None) is not None:
        infos = [mech.last_info]
    if not infos:
        return None
    return {
        "runs": len(infos),
        "min_ess": min(i.min_ess for i in infos),
        "max_rhat": max(i.max_rhat for i in infos),
        "converged": all(i.converged for i in infos),
        "draws": sum(i.draws for i in infos),
        "steps": sum(i.steps for i in infos),
        "sampler_seconds": sum(i.seconds for i in infos),
        "thin": [i.thin for i in infos],
    }


def _expected_error(mech, norms):
    """E‖noise‖₂: the mechanism's formula / Monte Carlo where cheap (Laplace, Gaussian);
    for K-norm and NIM the mean ℓ₂ norm of the released noise (unbiased) ± its SE."""
    from .mechanisms import GaussianMechanism, LaplaceMechanism

    if isinstance(mech, (LaplaceMechanism, GaussianMechanism)):
        e = mech.expected_error() if isinstance(mech, GaussianMechanism) else mech.expected_error(n_samples=50_000)
        return {"value": e.value, "stderr": e.stderr, "exact": e.exact, "method": e.method}
    se = float(norms.std(ddof=1) / np.sqrt(len(norms))) if len(norms) > 1 else None
    return {"value": float(norms.mean()), "stderr": se, "exact": False,
            "method": f"mean ℓ₂ norm of the {len(norms)} released noise vectors"}


def _claim(mech):
    p = mech.privacy
    return {"mechanism": p.mechanism, "epsilon": p.epsilon, "delta": p.delta, "notion": p.notion,
            "sampling": p.sampling, "neighbours": p.neighbours, "composition": p.composition,
            "details": p.details}


def cmd_sample(args):
    out = check_output(args.out, args.force)
    F, label = load_workload(args)
    x = None
    if args.data:
        x = _load_npy(args.data, "data")
    sampler_options = {}
    if args.workers:
        sampler_options["workers"] = args.workers
    if args.scheduler:
        sampler_options["workers"] = _dask_executor(args.scheduler)
    if args.checkpoint:
        from .walks.checkpoint import Checkpoint

        sampler_options["checkpoint"] = Checkpoint(args.checkpoint, every=args.checkpoint_every, resume=args.resume)
    elif args.resume:
        raise CLIError("--resume needs --checkpoint DIR")
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress(show, f"{args.mechanism} ε={args.epsilon:g}")
    sampler_options["progress"] = progress
    mech = build_mechanism(args.mechanism, F, args, sampler_options)
    t0 = time.perf_counter()
    try:
        if x is not None:
            samples = np.atleast_2d(mech.release(x, size=args.count))
        else:
            samples = mech.sample_noise(size=args.count)
    except ValueError as exc:
        raise CLIError(f"data {args.data!r}: {exc}" if x is not None else str(exc)) from None
    finally:
        progress.close()
        if args.scheduler:
            sampler_options["workers"].close()
    seconds = time.perf_counter() - t0
    noise = samples - (F @ mech.check_x(x) if x is not None else 0.0)
    norms = np.linalg.norm(noise, axis=1)
    summary = {
        "knorm": __version__,
        "workload": label,
        "d": int(F.shape[0]),
        "n": int(F.shape[1]),
        "count": int(args.count),
        "output": "answers Fx + noise" if x is not None else "noise",
        "privacy": _claim(mech),
        "seconds": seconds,
        "samples_per_second": args.count / seconds if seconds > 0 else None,
        "mean_l2_noise": float(norms.mean()),
        "mean_l2_noise_stderr": float(norms.std(ddof=1) / np.sqrt(len(norms))) if len(norms) > 1 else None,
        "expected_error": _expected_error(mech, norms),
        "diagnostics": _diagnostics(mech),
        "resumed_from_checkpoint": bool(args.checkpoint and sampler_options["checkpoint"].loaded),
        "out": str(out) if out else None,
    }
    if out is not None:
        write_samples(out, samples, {"privacy": summary["privacy"], "summary": summary})
    if args.json:
        print(json.dumps(summary, indent=2, default=float, ensure_ascii=False))
    elif not args.quiet:
        _print_sample_summary(summary)
    return 0


def _print_sample_summary(s):
    p = s["privacy"]
    print(f"knorm {s['knorm']}: {s['workload']}; {s['count']} × {s['output']}")
    print(f"privacy: {p['mechanism']}, {p['notion']}, ε = {p['epsilon']:g}"
          + (f", δ = {p['delta']:g}" if p["delta"] else "") + f"; sampling {p['sampling']}"
          + (f"; {p['composition']}" if p["composition"] else ""))
    print(f"speed: {s['count']} samples in {s['seconds']:.2f} s ({s['samples_per_second']:.1f} samples/s)")
    ee = s["expected_error"]
    independent = not ee["method"].startswith("mean ℓ₂ norm of the")  # else it repeats the line's first number
    print(f"noise: mean ℓ₂ norm {s['mean_l2_noise']:.4g}"
          + (f" ± {s['mean_l2_noise_stderr']:.2g}" if s["mean_l2_noise_stderr"] else "")
          + (f"; expected error {ee['value']:.4g}" + ("" if ee["exact"] else f" ± {ee['stderr']:.2g}")
             + f" ({ee['method']})" if independent else ""))
    dg = s["diagnostics"]
    if dg:
        print(f"mixing: max R-hat {dg['max_rhat']:.4f}, min bulk ESS {dg['min_ess']:.0f} over {dg['draws']} draws "
              f"({dg['runs']} sampler run(s)), {'certified' if dg['converged'] else 'NOT certified'}")
    if s["out"]:
        print(f"wrote {s['out']}")


# ---- knorm info -------------------------------------------------------------------------------

def cmd_info(args):
    from . import bounds
    from .body import SymmetricHull
    from .mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
    from .mechanisms.additive import l1_sensitivity, l2_sensitivity

    F, label = load_workload(args)
    K = SymmetricHull(F)
    eps = args.epsilon
    facts = {"workload": label, "d": int(F.shape[0]), "n": int(F.shape[1]), "rank": K.dim,
             "l1_sensitivity": l1_sensitivity(F), "l2_sensitivity": l2_sensitivity(F),
             "exact_structure": K.exact_structure.kind if K.exact_structure is not None else None,
             "epsilon": eps, "delta": args.delta}
    km = KNormMechanism(F, epsilon=eps, rng=args.seed, body=K)
    z = km.sample_uniform(2000)
    nz = np.linalg.norm(z, axis=1)
    facts["mean_l2_uniform_K"] = float(nz.mean())
    errs = {
        "laplace": LaplaceMechanism(F, epsilon=eps, rng=args.seed).expected_error(n_samples=50_000),
        "knorm": km.expected_error(n_samples=2000),
    }
    if args.delta is not None:
        errs["gaussian"] = GaussianMechanism(F, epsilon=eps, delta=args.delta).expected_error()
    if not args.no_nim:
        errs["nim"] = NIMechanism(F, epsilon=eps, rng=args.seed).expected_error(n_samples=1000)
    facts["expected_l2_error"] = {k: {"value": e.value, "stderr": e.stderr, "exact": e.exact, "method": e.method}
                                  for k, e in errs.items()}
    if K.dim <= args.vollb_max_dim:
        lb = bounds.vol_lower_bound(F, eps, rel_error=0.5, rng=args.seed)
        facts["vol_lower_bound"] = {"value": lb.value, "stderr": lb.stderr, "note": lb.note}
    else:
        facts["vol_lower_bound"] = None
    pure = {k: v for k, v in errs.items() if k != "gaussian"}
    best = min(pure, key=lambda k: pure[k].value)
    rec = {"mechanism": best, "reason": f"smallest expected ℓ₂ error among pure ε-DP mechanisms at ε = {eps:g}"}
    if "gaussian" in errs and errs["gaussian"].value < pure[best].value:
        rec["note"] = (f"the Gaussian mechanism is more accurate ({errs['gaussian'].value:.4g}) but only "
                       f"(ε, δ)-DP with δ = {args.delta:g}")
    facts["recommendation"] = rec
    if args.json:
        print(json.dumps(facts, indent=2, default=float, ensure_ascii=False))
        return 0
    print(f"knorm {__version__}: {label}")
    print(f"rank {K.dim} of {F.shape[0]}; Δ₁ = {facts['l1_sensitivity']:g}, Δ₂ = {facts['l2_sensitivity']:.4g}; "
          f"K is {facts['exact_structure'] or 'a general polytope (MCMC sampling)'}")
    print(f"E‖z‖₂ for z ~ Uniform(K): {facts['mean_l2_uniform_K']:.4g}")
    print(f"expected ℓ₂ error at ε = {eps:g}" + (f", δ = {args.delta:g}" if args.delta else "") + ":")
    for k, e in errs.items():
        print(f"  {k:9s} {e}")
    lb = facts["vol_lower_bound"]
    print(f"VolLB (no constant): {lb['value']:.4g} ± {lb['stderr']:.2g}" if lb else
          f"VolLB: skipped (rank {K.dim} > --vollb-max-dim {args.vollb_max_dim})")
    print(f"recommended: {rec['mechanism']} ({rec['reason']})" + (f"; {rec['note']}" if "note" in rec else ""))
    return 0


# ---- knorm uniform / bench ---------------------------------------------------------------------

def cmd_uniform(args):
    from . import SymmetricHull, sample_uniform
    from .walks.sampler import rounding_of

    F, label = load_workload(args)
    out = check_output(args.out, args.force)
    K = SymmetricHull(F)
    print(f"knorm {__version__}: {label}; K has dimension {K.dim} in R^{K.ambient_dim}")
    t0 = time.perf_counter()
    rnd = rounding_of(K)
    print(f"rounding: {rnd.iterations} iteration(s), eigenvalue spread {rnd.eigen_spread:.2f}, "
          f"{time.perf_counter() - t0:.2f} s (includes JIT compilation on a first run)")
    x, info = sample_uniform(K, args.count, walk=args.walk, chains=args.chains, rng=args.seed, return_info=True,
                             workers=args.workers)
    print(info.summary())
    print(f"samples/s: {info.samples_per_second:.1f}   R-hat (max): {info.max_rhat:.4f}   "
          f"ESS (min bulk): {info.min_ess:.0f}   ESS/s: {info.ess_per_second:.1f}")
    if out is not None:
        write_samples(out, x, {"diagnostics": {"rhat": info.rhat.tolist(), "ess": info.ess.tolist()}})
        print(f"wrote {x.shape[0]} draws to {out}")
    return 0 if info.converged else 1


def cmd_bench(args):
    from .experiments import compare_oracles, table3

    if args.what in ("oracles", "all"):
        compare_oracles(args.d, args.n, seed=args.seed, highs_steps=args.highs_steps)
    if args.what in ("table3", "all"):
        table3((args.d,), args.n, tuple(args.eps), releases=args.releases, seed=args.seed, out_dir=args.out_dir,
               plot_path=not args.no_plot)
    return 0


def _dask_executor(address):
    from .distributed import DaskExecutor

    try:
        return DaskExecutor(address)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CLIError(f"cannot reach the Dask scheduler at {address!r}: {exc}".splitlines()[0]) from None


# ---- parser -----------------------------------------------------------------------------------

def _add_workload(p, d=20, n=100):
    g = p.add_argument_group("workload")
    g.add_argument("--workload", choices=WORKLOADS, default="pm1", help="named workload (default: random ±1)")
    g.add_argument("--d", type=_positive_int, default=d, help=f"number of queries (default {d})")
    g.add_argument("--n", type=_positive_int, default=n, help=f"number of cells (default {n})")
    g.add_argument("--k", type=_positive_int, default=None, help="range width / marginal order")
    g.add_argument("--shape", type=_positive_int, nargs="+", help="attribute sizes for --workload marginals")
    g.add_argument("--matrix", help="load F (d × n) from a .npy file instead")
    g.add_argument("--seed", type=int, default=0, help="seed for the workload and the mechanism (default 0)")


def build_parser():
    p = _Parser(prog="knorm", description="K-norm and NIM differential privacy on an exact sampling engine.")
    p.add_argument("--version", action="version", version=f"knorm {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("sample", help="private noise or releases Fx + noise, in bulk")
    _add_workload(s)
    s.add_argument("--mechanism", choices=MECHANISMS, default="knorm")
    s.add_argument("--epsilon", type=_positive_float, default=1.0)
    s.add_argument("--delta", type=float, default=None, help="δ for --mechanism gaussian")
    s.add_argument("--count", type=_positive_int, default=1000, help="number of draws (default 1000)")
    s.add_argument("--data", help="x as a .npy vector of length n: release Fx + noise (default: noise only)")
    s.add_argument("--walk", choices=["billiard", "hit_and_run", "coordinate", "ball"], default="billiard")
    s.add_argument("--out", help="write the samples to FILE (.npy, or .npz with the privacy claim and diagnostics)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--json", action="store_true", help="print a machine-readable summary")
    s.add_argument("--quiet", action="store_true", help="no progress bar and no summary (unless --json)")
    s.add_argument("--checkpoint", metavar="DIR", help="save sampler snapshots in DIR")
    s.add_argument("--checkpoint-every", type=_positive_float, default=30.0, metavar="SECONDS")
    s.add_argument("--resume", action="store_true", help="continue the interrupted run saved in --checkpoint")
    s.add_argument("--workers", type=_positive_int, default=None, help="local threads running chains")
    s.add_argument("--scheduler", metavar="ADDRESS", help="run chain batches on this Dask distributed scheduler")
    s.set_defaults(func=cmd_sample)

    i = sub.add_parser("info", help="facts about a workload's body and a recommended mechanism")
    _add_workload(i)
    i.add_argument("--epsilon", type=_positive_float, default=1.0)
    i.add_argument("--delta", type=float, default=None, help="also report the Gaussian mechanism at this δ")
    i.add_argument("--no-nim", action="store_true", help="skip NIM's (slower) error estimate")
    i.add_argument("--vollb-max-dim", type=int, default=20, help="estimate VolLB only up to this rank (default 20)")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_info)

    u = sub.add_parser("uniform", help="uniform draws from K = F·B₁ⁿ with mixing diagnostics")
    _add_workload(u)
    u.add_argument("--count", "--size", dest="count", type=_positive_int, default=2000,
                   help="number of draws (default 2000)")
    u.add_argument("--walk", choices=["billiard", "hit_and_run", "coordinate", "ball"], default="billiard")
    u.add_argument("--chains", type=_positive_int, default=None)
    u.add_argument("--workers", type=_positive_int, default=None)
    u.add_argument("--out", help="save the draws (.npy or .npz)")
    u.add_argument("--force", action="store_true")
    u.set_defaults(func=cmd_uniform)

    b = sub.add_parser("bench", help="oracle comparison and Table-3 reproduction at a chosen size")
    b.add_argument("what", nargs="?", choices=["oracles", "table3", "all"], default="all")
    b.add_argument("--d", type=_positive_int, default=20)
    b.add_argument("--n", type=_positive_int, default=200)
    b.add_argument("--eps", type=_positive_float, nargs="+", default=[0.1, 1.0, 2.0])
    b.add_argument("--releases", type=_positive_int, default=100)
    b.add_argument("--highs-steps", type=_positive_int, default=40)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out-dir", default=".")
    b.add_argument("--no-plot", action="store_true")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CLIError as exc:
        sys.stderr.write(f"knorm: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("knorm: interrupted" + (" (resume with --resume)\n" if getattr(args, "checkpoint", None)
                                                else "\n"))
        return 130
    except (ValueError, OSError, RuntimeError) as exc:
        sys.stderr.write(f"knorm: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
