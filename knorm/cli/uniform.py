"""``knorm uniform``: the engine alone, uniform draws from K with mixing diagnostics."""

import argparse
import time

from .. import __version__
from ..walks.chains import WALKS
from ._common import (_add_debug, _add_workers, _add_workload, _positive_int, _seed, _warn, check_memory, check_output,
                      load_workload, write_samples)


def cmd_uniform(args):
    from .. import SymmetricHull, sample_uniform
    from ..walks.sampler import rounding_of

    out = check_output(args.out, args.force, inputs=(args.matrix,))
    F, label = load_workload(args)
    d, n = F.shape
    check_memory("--count", args.count, d, 8)
    if args.chains is not None:  # each chain holds B⁻¹ (d × d), a block of random inputs (512 × d) and 2n scores
        check_memory("--chains", args.chains, d * d + 512 * (d + 1) + 4 * n, 2, what="the chains' states",
                     hint="use fewer chains")
    if args.nonprivate_seed is not None:
        _warn(f"--nonprivate-seed {args.nonprivate_seed}: the draws are reproducible from this seed; "
              "noise made from them is NOT PRIVATE")
    K = SymmetricHull(F)
    print(f"knorm {__version__}: {label}; K has dimension {K.dim} in R^{K.ambient_dim}")
    t0 = time.perf_counter()
    rnd = rounding_of(K, args.workers)
    print(f"rounding: {rnd.iterations} iteration(s), eigenvalue spread {rnd.eigen_spread:.2f}, "
          f"{time.perf_counter() - t0:.2f} s (includes JIT compilation on a first run)")
    x, info = sample_uniform(K, args.count, walk=args.walk, chains=args.chains, rng=args.nonprivate_seed,
                             return_info=True, workers=args.workers)
    print(info.summary())
    print(f"samples/s: {info.samples_per_second:.1f}   R-hat (max): {info.max_rhat:.4f}   "
          f"ESS (min bulk): {info.min_ess:.0f}   ESS/s: {info.ess_per_second:.1f}")
    if out is not None:
        source = "os-entropy" if args.nonprivate_seed is None else "seed"
        write_samples(out, x, {"diagnostics": {"rhat": info.rhat.tolist(), "ess": info.ess.tolist(),
                                               "converged": bool(info.converged)},
                               "noise_source": source})
        print(f"wrote {x.shape[0]} draws to {out}")
    return 0 if info.converged else 1


def add_parser(sub):
    """Add ``knorm uniform`` to the subparsers ``sub``."""
    u = sub.add_parser("uniform", help="uniform draws from K = F·B₁ⁿ with mixing diagnostics",
                       description="Uniform draws from K (the engine alone, no data). The draws come from OS "
                                   "entropy; --nonprivate-seed makes them reproducible (noise made from seeded "
                                   "draws is not private).")
    _add_workload(u)
    _add_debug(u, argparse.SUPPRESS)
    u.add_argument("--count", "--size", dest="count", type=_positive_int, default=2000,
                   help="number of draws (default 2000)")
    u.add_argument("--walk", choices=list(WALKS), default="billiard",
                   help="the MCMC walk (default billiard; every walk targets Uniform(K))")
    u.add_argument("--chains", type=_positive_int, default=None,
                   help="number of independent chains (default 8)")
    _add_workers(u)
    u.add_argument("--nonprivate-seed", type=_seed, default=None, metavar="N",
                   help="seed the draws (reproducible; default: OS entropy)")
    u.add_argument("--out", help="save the draws (.npy or .npz)")
    u.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    u.set_defaults(func=cmd_uniform)
    return u
