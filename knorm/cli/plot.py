"""``knorm plot``: figures of a workload's chains, its errors against ε and NIM's spectrum."""

import argparse

from .. import __version__
from ..walks.chains import WALKS
from ._common import (MECHANISMS, CLIError, UsageError, _add_debug, _add_workers, _add_workload, _nonneg_int,
                      _positive_float, _positive_int, _probability, _seed, check_memory, check_output, load_workload,
                      sampler_options)


CHAIN_PLOTS = ("chains", "trace", "rank", "autocorrelation", "ess-rhat")
PLOTS = CHAIN_PLOTS + ("error-vs-epsilon", "nim-spectrum")
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _check_plot_args(args):
    """Options that do not apply to the chosen figure (usage errors, exit 2)."""
    own = {"--coord": ("coord", CHAIN_PLOTS), "--count": ("count", CHAIN_PLOTS), "--chains": ("chains", CHAIN_PLOTS),
           "--eps": ("eps", ("error-vs-epsilon",)), "--mechanisms": ("mechanisms", ("error-vs-epsilon",)),
           "--delta": ("delta", ("error-vs-epsilon",)), "--mc-samples": ("mc_samples", ("error-vs-epsilon",))}
    for option, (attr, kinds) in own.items():
        if getattr(args, attr) is not None and args.what not in kinds:
            raise UsageError(f"{option} does not apply to knorm plot {args.what}")
    mechs = args.mechanisms or ["laplace", "knorm", "nim"]
    if "gaussian" in mechs and args.delta is None:
        raise UsageError("--mechanisms gaussian needs --delta")
    if args.delta is not None and "gaussian" not in mechs:
        raise UsageError("--delta applies only with --mechanisms gaussian")


def _require_matplotlib():
    """Fail before any work when the plot extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CLIError("knorm plot needs matplotlib, which is not installed: pip install 'knorm[plot]'") from None


def cmd_plot(args):
    _check_plot_args(args)
    out = check_output(args.out, args.force, inputs=(args.matrix,), suffixes=PLOT_SUFFIXES)
    _require_matplotlib()
    from .. import plots

    F, label = load_workload(args)  # every figure depends on F (and the seed) only, never on data
    d = F.shape[0]
    print(f"knorm {__version__}: {label}")
    if args.what == "error-vs-epsilon":
        eps = args.eps or [0.1, 0.3, 1.0, 3.0]
        errs = plots.expected_errors(F, eps, mechanisms=args.mechanisms or ("laplace", "knorm", "nim"),
                                     delta=args.delta, n_samples=args.mc_samples or 2000, walk=args.walk,
                                     rng=args.seed, workers=args.workers)
        for name, row in errs.items():
            if name != "epsilons":
                cells = (f"ε={e:g}: {r.value:.4g}" + ("" if r.exact else f" ± {r.stderr:.2g}")
                         for e, r in zip(eps, row))
                print(f"  {name:9s} " + "  ".join(cells))
        fig = plots.error_vs_epsilon(errors=errs)
    elif args.what == "nim-spectrum":
        from ..mechanisms import NIMechanism

        try:  # the levels' covariances depend on F only, not on ε
            mech = NIMechanism(F, epsilon=1.0, walk=args.walk, rng=args.seed, sampler_options=sampler_options(args))
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        fig = plots.nim_spectrum(mech)
    else:
        from ..walks.sampler import Sampler

        count = args.count or 1000
        check_memory("--count", count, d, 8)
        if args.chains is not None:
            check_memory("--chains", args.chains, d * d + 512 * (d + 1) + 4 * F.shape[1], 2,
                         what="the chains' states", hint="use fewer chains")
        sampler = Sampler(F, walk=args.walk, chains=args.chains, rng=args.seed, workers=args.workers)
        _, info = sampler.run(count)
        print(info.summary())
        coord = args.coord or 0
        if coord >= sampler.body.dim:
            raise CLIError(f"--coord {coord}: K has dimension {sampler.body.dim}, so coord must be below it")
        make = {"chains": lambda: plots.chains(sampler, coord), "trace": lambda: plots.trace(sampler, coord),
                "rank": lambda: plots.rank(sampler, coord), "autocorrelation": lambda: plots.autocorrelation(sampler),
                "ess-rhat": lambda: plots.ess_rhat(sampler)}
        fig = make[args.what]()
    plots.save(fig, out)
    print(f"wrote {out}")
    return 0


def add_parser(sub):
    """Add ``knorm plot`` to the subparsers ``sub``."""
    pl = sub.add_parser("plot", help="figures of chains, errors and NIM's spectrum for a workload",
                        description="Figures of a workload F (no data is read): the chains of a sampler run "
                                    "(chains: trace, rank, autocorrelation and ESS/R-hat in one figure; or one "
                                    "of them), the expected error of each mechanism against ε, the eigenvalues "
                                    "of NIM's levels. --seed seeds the sampler and the Monte-Carlo estimates "
                                    "(they depend on F only, so this costs no privacy).")
    _add_workload(pl)
    _add_debug(pl, argparse.SUPPRESS)
    pl.add_argument("what", choices=PLOTS)
    pl.add_argument("--out", required=True, help="the figure (.png, .pdf or .svg)")
    pl.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    pl.add_argument("--walk", choices=list(WALKS), default="billiard",
                    help="the MCMC walk (default billiard; every walk targets Uniform(K))")
    pl.add_argument("--seed", type=_seed, default=0, metavar="N",
                    help="seed of the sampler and the Monte-Carlo estimates (default 0)")
    pl.add_argument("--count", type=_positive_int, default=None,
                    help="chain figures: draws fit for release asked of the run (default 1000)")
    pl.add_argument("--chains", type=_positive_int, default=None, help="chain figures: number of chains")
    pl.add_argument("--coord", type=_nonneg_int, default=None,
                    help="chains, trace, rank: the span coordinate shown (default 0)")
    _add_workers(pl)
    pl.add_argument("--eps", type=_positive_float, nargs="+", default=None,
                    help="error-vs-epsilon: the ε values (default 0.1 0.3 1 3)")
    pl.add_argument("--mechanisms", nargs="+", choices=MECHANISMS, default=None,
                    help="error-vs-epsilon: mechanisms (default laplace knorm nim)")
    pl.add_argument("--delta", type=_probability, default=None, help="error-vs-epsilon: δ for gaussian")
    pl.add_argument("--mc-samples", type=_positive_int, default=None,
                    help="error-vs-epsilon: Monte-Carlo draws per estimate (default 2000)")
    pl.set_defaults(func=cmd_plot)
    return pl
