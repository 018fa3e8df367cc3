"""``knorm info``: facts about a workload's body and which mechanism to use (F only, no data)."""

import argparse
import json
import sys

from .. import __version__
from ._common import (Progress, _add_debug, _add_workers, _add_workload, _laplace_draws, _nonneg_int, _positive_float,
                      _probability, _seed, load_workload, sampler_options)


def cmd_info(args):
    from .. import bounds
    import numpy as np

    from ..mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
    from ..mechanisms._base import row_norms
    from ..mechanisms.additive import l1_sensitivity, l2_sensitivity
    from ..recommend import CANDIDATES, recommend
    from ..walks.prepared import body_of

    F, label = load_workload(args)  # info never reads data: every number below depends on F only
    w = None
    if not args.json:
        print(f"knorm {__version__}: {label}", flush=True)  # at once: the answers below may take a while
    if getattr(args, "prepared", None):
        w, file_facts, file_lines = _prepared_info(args, F, label)
        if not args.json:
            print("\n".join(file_lines), flush=True)
    # one body for every question (the file's, or this process's): rounded and certified once, and
    # the certified pool's moments answer K-norm's (and a one-level NIM's) errors with no new draws
    K = w.body if w is not None else body_of(F)
    on = {"prepared": w} if w is not None else {"body": K}
    eps = args.epsilon
    facts = {"workload": label, "d": int(F.shape[0]), "n": int(F.shape[1]), "rank": K.dim,
             "l1_sensitivity": l1_sensitivity(F), "l2_sensitivity": l2_sensitivity(F),
             "exact_structure": K.exact_structure.kind if K.exact_structure is not None else None,
             "epsilon": eps, "delta": args.delta, "mc_seed": args.mc_seed}
    if w is not None:
        facts["prepared"] = file_facts
    # where no file holds them, the rounding and the one certification show their stages on a terminal
    progress = Progress(sys.stderr.isatty() and not args.json, "info")
    km = KNormMechanism(F, epsilon=eps, rng=args.mc_seed, sampler_options={**sampler_options(args),
                                                                             "progress": progress}, **on)
    mom = km.pool_moments()
    progress.close()
    if mom is not None:  # E‖z‖₂ = 2^e·unit·E|Z|
        facts["mean_l2_uniform_K"] = float(np.ldexp(mom.norm[0] * K._unit, K._exp))
    else:
        facts["mean_l2_uniform_K"] = float(row_norms(km.sample_uniform(2000)).mean())
    errs = {
        "laplace": LaplaceMechanism(F, epsilon=eps, rng=args.mc_seed).expected_error(
            n_samples=_laplace_draws(F.shape[0])),
        "knorm": km.expected_error(),
    }
    if args.delta is not None:
        errs["gaussian"] = GaussianMechanism(F, epsilon=eps, delta=args.delta).expected_error()
    if not args.no_nim:
        nim = NIMechanism(F, epsilon=eps, rng=args.mc_seed, sampler_options=sampler_options(args), **on)
        errs["nim"] = nim.expected_error()
    facts["expected_l2_error"] = {k: {"value": e.value, "stderr": e.stderr, "exact": e.exact, "method": e.method}
                                  for k, e in errs.items()}
    # each answer's standard error (issue 50 item 3): exact, or K-norm's from the certified pool (no new draws)
    per_se = {"laplace": LaplaceMechanism(F, epsilon=eps).standard_errors(), "knorm": km.standard_errors()}
    if args.delta is not None:
        per_se["gaussian"] = GaussianMechanism(F, epsilon=eps, delta=args.delta).standard_errors()
    facts["per_answer_standard_error"] = {k: e.summary() for k, e in per_se.items()}
    if K.dim <= args.vollb_max_dim:
        volume = bounds.volume(F, rel_error=0.5, rng=args.mc_seed, workers=args.workers)
        lb = bounds.vol_lower_bound(F, eps, rel_error=0.5, volume_estimate=volume)
        facts["vol_lower_bound"] = {"value": lb.value, "stderr": lb.stderr, "note": lb.note}
    else:
        facts["vol_lower_bound"] = None
    candidates = [c for c in CANDIDATES if not (c == "nim" and args.no_nim or c.startswith("gaussian") and args.delta is None)]
    if w is not None and not w.rows and not args.json:
        print("recommend's table is not in the file: computing it (knorm prepare --recommend keeps it there)",
              flush=True)
    table = recommend(F, epsilon=eps, delta=args.delta, rng=args.mc_seed, candidates=candidates, mc_seed=args.mc_seed,
                      workers=args.workers, prepared=w)
    rec = {"mechanism": table.best, "reason": table.reason}
    facts["recommendation"] = rec
    facts["recommend"] = table.as_dict()
    if args.json:
        print(json.dumps(facts, indent=2, default=float, ensure_ascii=False))
        return 0
    print(f"rank {K.dim} of {F.shape[0]}; Δ₁ = {facts['l1_sensitivity']:g}, Δ₂ = {facts['l2_sensitivity']:.4g}; "
          f"K is {facts['exact_structure'] or 'a general polytope (MCMC sampling)'}")
    print(f"E‖z‖₂ for z ~ Uniform(K): {facts['mean_l2_uniform_K']:.4g}")
    print(f"expected ℓ₂ error at ε = {eps:g}" + (f", δ = {args.delta:g}" if args.delta else "") + ":")
    for k, e in errs.items():
        print(f"  {k:9s} {e}")
    print("per-answer standard error (min / median / max over the answers):")
    for k, e in per_se.items():
        s = e.summary()
        print(f"  {k:9s} {s['min']:.4g} / {s['median']:.4g} / {s['max']:.4g}"
              + ("" if s["exact"] else f" (Monte-Carlo SE ≤ {s['max_stderr']:.2g})"))
    lb = facts["vol_lower_bound"]
    print(f"VolLB (no constant): {lb['value']:.4g} ± {lb['stderr']:.2g}" if lb else
          f"VolLB: skipped (rank {K.dim} > --vollb-max-dim {args.vollb_max_dim})")
    print(table)
    return 0


def _prepared_info(args, F, label):
    """``knorm info --prepared FILE``: the loaded workload, what the file holds (checked as a
    release would load it) and its lines of text."""
    from .prepare import load_prepared_option

    w = load_prepared_option(args, F)
    cert = w.certificate
    facts = {"workload": label, "d": int(F.shape[0]), "n": int(F.shape[1]), "rank": int(w.body.dim),
             "fingerprint": w.fingerprint, "rounding": None if w.rounding is None else
             {"iterations": w.rounding.iterations, "tau": w.rounding.tau, "eigen_spread": w.rounding.eigen_spread},
             "certificate": None if cert is None else cert.as_dict(),
             "states": 0 if w.certified is None else len(w.certified.states),
             "recommend_rows": sorted(w.rows.get("rows", {})),
             "pool_moments": w.certified is not None and w.certified.moments is not None}
    lines = [f"prepared file {args.prepared} (public: functions of F and public seeds)",
             f"rank {w.body.dim}; fingerprint {w.fingerprint[:16]}…; " +
             ("exact structure: no rounding, no MCMC" if w.rounding is None else
              f"rounding: {w.rounding.iterations} iteration(s), eigenvalue spread {w.rounding.eigen_spread:.2f}")]
    if cert is not None:
        lines.append(f"walk {cert.summary()}; {facts['states']} public stationary states")
        lines.append(f"a release starts at one of them (OS entropy) and runs W = {cert.warmup} steps: approximate (MCMC)")
        if facts["pool_moments"]:
            lines.append("the certified pool's moments answer K-norm's expected errors below: no new draws")
    elif w.rounding is not None:
        lines.append("no certificate: the first release certifies the walk in memory (knorm prepare writes one)")
    if facts["recommend_rows"]:
        lines.append(f"recommend's rows: {', '.join(facts['recommend_rows'])}")
    return w, facts, lines


def add_parser(sub):
    """Add ``knorm info`` to the subparsers ``sub``."""
    i = sub.add_parser("info", help="facts about a workload's body and a recommended mechanism",
                       description="Facts about F alone (no data is read): rank, sensitivities, expected "
                                   "errors, VolLB and a recommendation. The Monte-Carlo estimates are seeded "
                                   "by --mc-seed (reproducible; they depend on F only, so this costs no privacy).")
    _add_workload(i)
    _add_debug(i, argparse.SUPPRESS)
    i.add_argument("--epsilon", type=_positive_float, default=1.0,
                   help="ε of one answer, at which the expected errors are reported (default 1)")
    i.add_argument("--delta", type=_probability, default=None, help="also report the Gaussian mechanism at this δ")
    i.add_argument("--mc-seed", type=_seed, default=0, metavar="N",
                   help="seed of the Monte-Carlo error and volume estimates (default 0)")
    i.add_argument("--no-nim", action="store_true", help="skip NIM's (slower) error estimate")
    i.add_argument("--vollb-max-dim", type=_nonneg_int, default=20,
                   help="estimate VolLB only up to this rank (default 20; 0 skips it)")
    _add_workers(i)
    i.add_argument("--prepared", metavar="FILE",
                   help="a prepared workload of this F (knorm prepare): shows what it holds (its rounding, "
                        "certificate and stationary states, checked as a release loads them), and answers the "
                        "expected errors and the recommendation from it (K-norm's from its certified pool: no "
                        "new draws)")
    i.add_argument("--json", action="store_true", help="print the facts as machine-readable JSON")
    i.set_defaults(func=cmd_info)
    return i
