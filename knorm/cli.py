"""The ``knorm`` command line.

``knorm uniform`` is the engine's main job: approximately uniform draws from
``K = F·B₁ⁿ`` with a summary of speed and mixing (samples/s, R-hat, ESS).
"""

import argparse
import sys
import time

import numpy as np

from . import __version__


def _workload(args):
    if args.matrix:
        try:
            F = np.load(args.matrix, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"knorm: error: cannot read matrix {args.matrix!r}: {exc}") from None
        return F, f"matrix {args.matrix} {F.shape}"
    gen = np.random.default_rng(args.seed)
    if args.workload == "pm1":
        return gen.choice([-1.0, 1.0], size=(args.d, args.n)), f"random ±1 F, d={args.d}, n={args.n}"
    return np.eye(args.d), f"identity F (cross-polytope), d={args.d}"


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def cmd_uniform(args):
    from . import WALKS, SymmetricHull, sample_uniform
    from .walks.sampler import rounding_of

    F, label = _workload(args)
    try:
        K = SymmetricHull(F)
    except ValueError as exc:
        raise SystemExit(f"knorm: error: {exc}") from None
    if args.walk not in WALKS:  # pragma: no cover - argparse choices guard this
        raise SystemExit(f"knorm: error: unknown walk {args.walk!r}")
    print(f"knorm {__version__}: {label}; K has dimension {K.dim} in R^{K.ambient_dim}")
    t0 = time.perf_counter()
    rnd = rounding_of(K)
    print(f"rounding: {rnd.iterations} iteration(s), eigenvalue spread {rnd.eigen_spread:.2f}, "
          f"{time.perf_counter() - t0:.2f} s (includes JIT compilation on a first run)")
    x, info = sample_uniform(K, args.size, walk=args.walk, chains=args.chains, rng=args.seed, return_info=True)
    print(info.summary())
    print(f"samples/s: {info.samples_per_second:.1f}   R-hat (max): {info.max_rhat:.4f}   "
          f"ESS (min bulk): {info.min_ess:.0f}   ESS/s: {info.ess_per_second:.1f}")
    if args.out:
        np.save(args.out, x)
        print(f"wrote {x.shape[0]} draws to {args.out}")
    return 0 if info.converged else 1


def build_parser():
    p = argparse.ArgumentParser(prog="knorm", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"knorm {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    u = sub.add_parser("uniform", help="uniform draws from K = F·B₁ⁿ with mixing diagnostics")
    u.add_argument("--workload", choices=["pm1", "identity"], default="pm1",
                   help="random ±1 matrix (default) or the identity")
    u.add_argument("--d", type=_positive_int, default=20, help="number of queries (default 20)")
    u.add_argument("--n", type=_positive_int, default=100, help="number of cells (default 100)")
    u.add_argument("--matrix", help="load F from a .npy file instead")
    u.add_argument("--size", type=_positive_int, default=2000, help="number of draws (default 2000)")
    u.add_argument("--walk", choices=["billiard", "hit_and_run", "coordinate", "ball"], default="billiard")
    u.add_argument("--chains", type=_positive_int, default=None)
    u.add_argument("--seed", type=int, default=0)
    u.add_argument("--out", help="save the draws to this .npy file")
    u.set_defaults(func=cmd_uniform)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
