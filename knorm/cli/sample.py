"""``knorm sample``: private noise, or private answers Fx + noise, in bulk."""

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

from .. import __version__
from .._jit import CompileTimer
from ..walks.chains import sampling_kernels_cached
from ..walks.chains import WALKS
from ..walks.checkpoint import Checkpoint, CheckpointConflict
from ..walks.prepared import workload_fingerprint
from ._common import (DATA_2D, MECHANISMS, CLIError, Progress, UsageError, _add_debug, _add_workers, _add_workload,
                      _dask_executor, _laplace_draws, _positive_float, _positive_int, _probability, _require_dask,
                      _seed, _warn, check_memory, check_output, check_prepared_file, load_data, load_workload,
                      write_samples)
from ..errors import BudgetExceededError
from .budget import add_budget_options, budget_line, budget_summary, open_budget
from .prepare import load_prepared_option, prepare_chains


def _npy_ndim(path):
    """The dimensions of a .npy file from its header alone (no value read), or None where it is not
    one that numpy opens (load_data says why, later)."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False).ndim  # mapped, not read
    except Exception:  # not a .npy numpy opens: load_data's messages say why
        return None


def _checkpoint(args, F, x):
    """``--checkpoint``: the run's :class:`~knorm.walks.checkpoint.Checkpoint`, bound to the
    whole command (F, the data's hash or "no data", mechanism, ε, δ, count, walk, options,
    seed). A new run refuses a folder that holds a checkpoint; ``--resume`` refuses unless
    the folder holds an unfinished run of the identical command (exit 2, nothing written)."""
    matrix = F if isinstance(F, np.ndarray) else workload_fingerprint(F)  # a workload by its structure: F's digest
    context = {"knorm": __version__, "command": "sample", "matrix": matrix, "data": "no data" if x is None else x,
               "mechanism": args.mechanism, "epsilon": args.epsilon, "delta": args.delta, "count": args.count,
               "walk": args.walk, "accept_uncertified": args.accept_uncertified, "seed": args.nonprivate_seed}
    option = "--resume" if args.resume else "--checkpoint"
    try:
        return Checkpoint(args.checkpoint, every=args.checkpoint_every, resume=args.resume, context=context)
    except CheckpointConflict as exc:
        raise UsageError(f"{option}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise CLIError(f"--checkpoint: {exc}".splitlines()[0]) from None


def _noise_rng(args, checkpoint):
    """The mechanism's rng: the explicit non-private seed, else OS entropy.

    With ``--checkpoint`` (and no seed), 128 bits of OS entropy are drawn once and saved
    (0600) with the run's first snapshot, so that ``--resume`` continues the same (still
    private) run; the checkpoint deletes them when the run finishes.
    """
    if args.nonprivate_seed is not None:
        return args.nonprivate_seed
    if checkpoint is None:
        return None
    try:
        return np.random.default_rng(np.random.SeedSequence(checkpoint.entropy()))
    except ValueError as exc:
        raise UsageError(f"--resume: {exc}") from None


def build_mechanism(name, F, args, rng, sampler_options, prepared=None, accountant=None):
    from ..mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism

    extra = {"accept_uncertified": True} if args.accept_uncertified else {}
    if prepared is not None:  # --prepared: the rounding is loaded, not computed
        extra["prepared"] = prepared
    try:
        if name == "laplace":
            return LaplaceMechanism(F, epsilon=args.epsilon, rng=rng, accountant=accountant)
        if name == "gaussian":
            return GaussianMechanism(F, epsilon=args.epsilon, delta=args.delta, rng=rng, accountant=accountant)
        if name == "knorm":
            return KNormMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=rng, accountant=accountant,
                                  bank_size=1000, sampler_options=sampler_options, **extra)
        return NIMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=rng, sampler_options=sampler_options,
                           accountant=accountant, **extra)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _auto_mechanism(F, args, rng, sampler_options, prepared=None, accountant=None):
    """``--mechanism auto``: :func:`knorm.recommend`'s least-error mechanism (from F alone), built
    with the run's rng; returns (its choice as JSON-ready data, the mechanism)."""
    from ..recommend import recommend

    options = {"walk": args.walk, "sampler_options": sampler_options, "accept_uncertified": args.accept_uncertified}
    try:
        rec = recommend(F, epsilon=args.epsilon, delta=args.delta, rng=rng, mechanism_options=options,
                        prepared=prepared, accountant=accountant)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return {"mechanism": rec.best, "reason": rec.reason, **rec.as_dict()}, rec.mechanism


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
        # runs from a certified body (docs/design.md §3.5.1): the certificate's numbers, not a per-run pool's
        "certificates": [i.extra["certificate"] for i in infos if "certificate" in i.extra],
    }


def _estimate_dict(e):
    return {"value": e.value, "stderr": e.stderr, "exact": e.exact, "method": e.method}


def _expected_error(mech, norms):
    """E‖noise‖₂, data-independent.

    Laplace / Gaussian: the mechanism's own estimate (exact formula or Monte Carlo over
    fresh draws). K-norm / NIM: with ``norms`` (noise-only runs) the mean ℓ₂ norm of the
    released noise vectors ± its SE; without (runs on data) ``mech.expected_error`` from the
    certified pool's moments (public: no draws) where K-norm has them, else over 1000 fresh
    draws made after the release and never released.
    """
    from ..mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism

    if isinstance(mech, GaussianMechanism):
        return _estimate_dict(mech.expected_error())
    if isinstance(mech, LaplaceMechanism):
        return _estimate_dict(mech.expected_error(n_samples=_laplace_draws(mech.d)))
    if norms is None:
        try:
            pooled = isinstance(mech, KNormMechanism) and mech.pool_moments() is not None
            e = mech.expected_error() if pooled else mech.expected_error(n_samples=1000)
        except Exception as exc:  # e.g. a sampler run that did not certify: never lose the answers for it
            return {"value": None, "stderr": None, "exact": False,
                    "method": f"not estimated: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"}
        d = _estimate_dict(e)
        if not pooled:
            d["method"] += " (draws made after the release, never released)"
        return d
    from ..mechanisms._base import mean_stderr

    value, se = mean_stderr(norms)
    return {"value": value, "stderr": se, "exact": False,
            "method": f"mean ℓ₂ norm of the {len(norms)} noise vectors"}


def _uncertainty(mech, level):
    """Each answer's standard error and central ``level`` interval half-width (answer ± half-width):
    functions of F, ε and public seeds only (issue 50 item 3; never of the data)."""
    se, hw = mech.standard_errors(), mech.interval_half_widths(level=level)
    return {"level": level, "standard_errors": se.value.tolist(), "standard_errors_mc_se": se.stderr.tolist(),
            "half_widths": hw.value.tolist(), "half_widths_mc_se": hw.stderr.tolist(),
            "standard_errors_method": se.method, "half_widths_method": hw.method}


def _claim_dict(p, noise_source):
    """A PrivacyClaim as JSON-ready data, with the noise source the command line knows
    (OS entropy kept in a checkpoint folder is still OS entropy) and its text."""
    p = dataclasses.replace(p, noise_source=noise_source)
    return {**p.as_dict(), "text": str(p)}


def _claims(mech, noise_source):
    """(total claim of what was released since the mechanism was built, claim of one answer)."""
    return _claim_dict(mech.privacy, noise_source), _claim_dict(mech.privacy_per_answer, noise_source)


def _check_sample_args(args):
    """Argument combinations argparse cannot express (usage errors, exit 2)."""
    if args.mechanism == "gaussian" and args.delta is None:
        raise UsageError("--mechanism gaussian needs --delta")
    if args.delta is not None and args.mechanism not in ("gaussian", "auto"):
        raise UsageError(f"--delta applies only to --mechanism gaussian or auto; {args.mechanism} is pure ε-DP "
                         "(δ = 0)")
    if args.resume and not args.checkpoint:
        raise UsageError("--resume needs --checkpoint DIR")
    if args.regions and not args.data:
        raise UsageError("--regions applies only with --data (one histogram per row)")
    if args.disjoint and not args.regions:
        raise UsageError("--disjoint applies only with --regions (it declares the rows of --data disjoint)")
    if args.regions and args.count not in (None, 1):
        raise UsageError("--regions releases one answer per region: give --count 1 (or leave it out); run again "
                         "for more answers on the same regions (they compose: k runs cost k·ε)")
    if args.regions:
        args.count = 1
    if args.data and args.count is None and _npy_ndim(args.data) == 2:  # before asking for a count it cannot take
        raise UsageError(f"--data {args.data!r}: {DATA_2D}")
    if args.data and args.count is None:
        raise UsageError("--data needs --count K, the number of answers to release on the data: K answers cost "
                         "K·ε in total (--count 1 releases one answer at ε)")
    if args.budget and not args.data:
        raise UsageError("--budget applies only with --data (noise alone spends nothing)")
    for option, value in (("--budget-epsilon", args.budget_epsilon), ("--budget-delta", args.budget_delta)):
        if value is not None and not args.budget:
            raise UsageError(f"{option} applies only with --budget FILE (it sets the budget of a new ledger)")
    if args.allow_noncounts and not args.data:
        raise UsageError("--allow-noncounts applies only with --data")
    if args.error_estimate and not args.data:
        raise UsageError("--error-estimate applies only with --data (noise-only runs always report the noise's "
                         "mean norm)")
    if args.data and not args.out and not args.json:
        raise UsageError("--data needs --out FILE or --json: otherwise the answers (and the budget spent on "
                         "them) would be lost")
    if args.scheduler and args.workers:
        raise UsageError("--workers and --scheduler cannot be combined")
    mcmc_only = [o for o, v in (("--checkpoint", args.checkpoint), ("--scheduler", args.scheduler),
                                ("--workers", args.workers), ("--accept-uncertified", args.accept_uncertified),
                                ("--prepared", args.prepared))
                 if v]
    if mcmc_only and args.mechanism not in ("knorm", "nim", "auto"):
        raise UsageError(f"{mcmc_only[0]} applies only to the MCMC mechanisms (knorm, nim, or auto choosing one), "
                         f"not to --mechanism {args.mechanism}")


def cmd_sample(args):
    _check_sample_args(args)
    out = check_output(args.out, args.force, inputs=(args.data, args.matrix, args.prepared))
    if args.checkpoint and Path(args.checkpoint).exists() and not Path(args.checkpoint).is_dir():
        raise CLIError(f"--checkpoint {args.checkpoint!r} is a file, not a folder")
    if args.prepared:  # checked before the workload is built
        check_prepared_file(args.prepared)
    if args.scheduler:
        _require_dask()
    if args.count is None:  # noise only (with --data the count is required: _check_sample_args)
        args.count = NOISE_COUNT
    F, label = load_workload(args)
    prepared = load_prepared_option(args, F)
    d = F.shape[0]
    x = load_data(args.data, F.shape[1], args.allow_noncounts, args.regions) if args.data else None
    answers_in_json = x is not None and args.json and out is None
    copies = (4 if args.mechanism in ("laplace", "gaussian") else 8) + (8 if answers_in_json else 0)
    rows = len(x) if args.regions else args.count
    check_memory("--data" if args.regions else "--count", rows, d, copies)

    accountant = open_budget(args) if args.budget else None
    checkpoint = _checkpoint(args, F, x) if args.checkpoint else None
    if args.nonprivate_seed is not None:
        _warn(f"--nonprivate-seed {args.nonprivate_seed}: the noise is reproducible from this seed, "
              "so the output is NOT PRIVATE")
    rng = _noise_rng(args, checkpoint)
    noise_source = "seed" if args.nonprivate_seed is not None else "os-entropy"  # checkpointed: still OS entropy
    sampler_options = {}
    if args.workers:
        sampler_options["workers"] = args.workers
    if checkpoint is not None:
        sampler_options["checkpoint"] = checkpoint
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress(show, f"{args.mechanism} ε={args.epsilon:g}")
    executor = None
    if args.mechanism in ("knorm", "nim", "auto") and not (args.quiet or args.scheduler or sampling_kernels_cached()):
        sys.stderr.write("knorm: compiling the sampling kernels once (under a minute on 2 cores; cached for later runs)\n")
    t0 = time.perf_counter()
    compiling = CompileTimer().start()
    try:
        if args.scheduler:
            executor = _dask_executor(args.scheduler)
        opts = {**sampler_options, "progress": progress, **({"workers": executor} if executor else {})}
        # the bank's chains follow the cores the command names (--workers M, a cluster's threads), as
        # knorm prepare's do: never the machine's CPU count, so a plain command gives the same bits anywhere
        from ..walks.sampler import DEFAULT_CHAINS

        if (chains := prepare_chains(args, executor)) > DEFAULT_CHAINS:
            opts["chains"] = chains
        choice = None
        if args.mechanism == "auto":
            choice, mech = _auto_mechanism(F, args, rng, opts, prepared, accountant)
        else:
            mech = build_mechanism(args.mechanism, F, args, rng, opts, prepared, accountant)
        if x is not None and args.count > 1:  # said before anything is released, --quiet or not
            _announce_total(mech, args.count)
        elif x is not None and args.regions and not args.disjoint and len(x) > 1:
            _announce_total(mech, len(x), "one per row of --data: not declared disjoint (--disjoint)")
        t0, compile_before = time.perf_counter(), compiling.seconds
        if x is not None and args.regions:  # one answer per row: parallel composition only if declared disjoint
            samples = mech.release_each(x, allow_noncounts=args.allow_noncounts, disjoint=bool(args.disjoint))
        elif x is not None:
            samples = np.atleast_2d(mech.release(x, size=args.count, allow_noncounts=args.allow_noncounts))
        else:
            samples = mech.sample_noise(size=args.count)
    except CheckpointConflict as exc:  # the saved run is not this one: refused before anything is released
        raise UsageError(f"--resume: {exc}") from None
    except BudgetExceededError as exc:  # refused before anything was drawn: nothing released, nothing recorded
        raise CLIError(f"--budget {args.budget}: {exc}") from None
    except BaseException:
        if checkpoint is not None and not checkpoint.resumable:
            checkpoint.retire()  # no snapshot to continue: the saved entropy alone is a useless secret
        raise
    finally:
        compiling.stop()
        progress.close()
        if executor is not None:
            executor.close()
    seconds = time.perf_counter() - t0 - (compiling.seconds - compile_before)  # the speed counts no compiling
    if compiling.seconds >= 0.5 and not args.quiet:
        sys.stderr.write(f"knorm: compiled the kernels in {compiling.seconds:.1f} s (once; not counted in the "
                         "speed)\n")
    if checkpoint is not None:
        try:  # before the answers exist anywhere: from here on no crash leaves their noise to replay
            checkpoint.retire()
        except OSError as exc:
            raise CLIError(f"--checkpoint: cannot delete the finished run's checkpoint ({exc}); the answers were "
                           "not written") from None
        seconds += checkpoint.resumed_seconds  # a resumed run: the sampler time its snapshots had already spent
    total, per_answer = _claims(mech, noise_source)
    diagnostics = _diagnostics(mech)
    summary = {
        "knorm": __version__,
        "workload": label,
        "d": int(d),
        "n": int(F.shape[1]),
        "count": int(args.count),
        "regions": len(x) if args.regions else None,
        "disjoint": bool(args.disjoint) if args.regions else None,
        "output": "answers Fx + noise" if x is not None else "noise",
        "data_touched": x is not None,
        "private": total["private"],
        "noise_source": total["noise_source"],
        "privacy": total,
        "privacy_per_answer": per_answer,
        "mechanism_choice": choice,
        "seconds": seconds,
        "samples_per_second": len(samples) / seconds if seconds > 0 else None,
        "compile_seconds": compiling.seconds,
    }
    if x is None:  # noise alone touches no data: its statistics are safe to print
        from ..mechanisms._base import mean_stderr, row_norms

        norms = row_norms(samples)  # F at 1e±300: no square over- or underflows
        summary["mean_l2_noise"], summary["mean_l2_noise_stderr"] = mean_stderr(norms)
        summary["expected_error"] = _expected_error(mech, norms)
    else:  # computed, on request only, after the answers are written (below)
        summary["expected_error"] = None
        summary["error_estimate"] = bool(args.error_estimate)
    summary["diagnostics"] = diagnostics
    summary["resumed_from_checkpoint"] = bool(checkpoint is not None and checkpoint.loaded)
    summary["checkpoint_deleted"] = checkpoint is not None  # the finished run's snapshots and entropy
    summary["out"] = str(out) if out else None
    summary["budget"] = budget_summary(accountant) if accountant is not None else None
    if out is not None:  # the answers first: nothing after the release delays them
        write_samples(out, samples, {"privacy": total, "privacy_per_answer": per_answer, "summary": summary})
    estimate = x is not None and args.error_estimate  # on request, after the answers are written
    if args.json:
        if estimate:
            try:
                summary["expected_error"] = _expected_error(mech, None)
            finally:
                progress.close()
        if answers_in_json:
            summary["answers"] = samples.tolist()
            summary["uncertainty"] = _uncertainty(mech, args.level)
        print(json.dumps(summary, indent=2, default=float, ensure_ascii=False))
        return 0
    if not args.quiet:
        _print_sample_summary(summary)
    if estimate:  # nothing computed from Fx or the answers: separate draws, never released
        try:
            summary["expected_error"] = ee = _expected_error(mech, None)
        finally:
            progress.close()  # the draws' own bar, if they needed a sampler run
        if not args.quiet:
            print(f"expected error E‖noise‖₂: {_estimate_text(ee)} ({ee['method']})", flush=True)
    return 0


NOISE_COUNT = 1000  # --count without --data (noise only: nothing spent)


def _announce_total(mech, count, why=""):
    """Before a release of ``count`` > 1 answers on the data: their total claim, on stderr."""
    p = mech.privacy_per_answer
    tot = p.composed(count)
    per = f"ε = {p.epsilon:g}" + (f", δ = {p.delta:g}" if p.delta else "")
    sys.stderr.write(f"knorm: releasing {count} answers on the same data{f' ({why})' if why else ''}: total ε = "
                     f"{tot.epsilon:g}"
                     + (f", δ = {tot.delta:g}" if tot.delta else "")
                     + f" ({count} × {per}, basic composition)\n")


def _claim_terms(p):
    s = f"{p['mechanism']}, {p['notion']}, ε = {p['epsilon']:g}" + (f", δ = {p['delta']:g}" if p["delta"] else "")
    s += "; approximate (MCMC sampling)" if p["approximate"] else "; exact sampling"
    if not p["certified"]:
        s += "; UNCERTIFIED (a sampler run that did not certify was accepted)"
    return s


def _privacy_lines(s):
    tot, one = s["privacy"], s["privacy_per_answer"]
    lines = []
    if not s["private"]:
        lines.append("NOT PRIVATE: the noise came from --nonprivate-seed and is reproducible from it")
    if s["data_touched"] and s.get("regions") and s.get("disjoint"):
        lines.append(f"privacy (total, one answer on each of {s['regions']} disjoint regions by your declaration "
                     "(--disjoint), parallel composition): " + _claim_terms(tot))
    elif s["data_touched"] and s.get("regions"):
        lines.append(f"privacy (total, {s['regions']} answers, one per row, on the same data: rows not declared "
                     "disjoint (--disjoint), basic composition): " + _claim_terms(tot))
    elif s["data_touched"]:
        k = tot["answers"]
        lines.append(f"privacy (total, {k} answer{'s' if k != 1 else ''} on the same data, basic composition): "
                     + _claim_terms(tot))
    if s["data_touched"]:
        lines.append(f"privacy per answer: ε = {one['epsilon']:g}" + (f", δ = {one['delta']:g}" if one["delta"]
                                                                       else "")
                     + (f"; {one['composition']}" if one["composition"] else ""))
    else:
        lines.append("privacy: noise only, no data touched (nothing spent)")
        lines.append("per answer Fx + noise made from one of these vectors: " + _claim_terms(one)
                     + "; k such answers on the same data cost k·ε"
                     + (f"; {one['composition']}" if one["composition"] else ""))
    return lines


def _estimate_text(ee):
    if ee["value"] is None:
        return "not estimated"
    return f"{ee['value']:.4g}" + ("" if ee["exact"] or ee["stderr"] is None else f" ± {ee['stderr']:.2g}")


def _total_terms(p):
    return f"total ε = {p['epsilon']:g}" + (f", δ = {p['delta']:g}" if p["delta"] else "")


def _speed(s):
    """The speed line: ``count`` draws in the run's seconds, with a rate from 2 draws on
    (1 draw has no rate to speak of)."""
    n, sec = s.get("regions") or s["count"], s["seconds"]
    if n == 1:
        return f"speed: 1 sample in {sec:.2f} s"
    rate = s["samples_per_second"]
    shown = "" if not rate else f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"
    return f"speed: {n} samples in {sec:.2f} s" + (f" ({shown} samples/s)" if shown else "")


def _print_sample_summary(s):
    head = f"knorm {s['knorm']}: {s['workload']}; {s.get('regions') or s['count']} × {s['output']}"
    if s.get("regions"):
        head += " (one per region)"
    if s["data_touched"]:
        head += f" at {_total_terms(s['privacy'])}"
    print(head)
    if s["mechanism_choice"]:
        print(f"--mechanism auto chose {s['mechanism_choice']['mechanism']}: {s['mechanism_choice']['reason']}")
    for line in _privacy_lines(s):
        print(line)
    if s["resumed_from_checkpoint"]:
        print("resumed from a checkpoint: the speed below counts the whole run, before and after the interrupt")
    print(_speed(s))
    ee = s["expected_error"]
    if s["data_touched"]:
        print("nothing computed from the data is shown" + ("" if s.get("error_estimate") else
              "; --error-estimate adds E‖noise‖₂ (from separate draws, made after the answers are written)"))
    else:
        ee_text = _estimate_text(ee)
        independent = not ee["method"].startswith("mean ℓ₂ norm of the")  # else it repeats the first number
        print(f"noise: mean ℓ₂ norm {s['mean_l2_noise']:.4g}"
              + (f" ± {s['mean_l2_noise_stderr']:.2g}" if s["mean_l2_noise_stderr"] else "")
              + (f"; expected error {ee_text} ({ee['method']})" if independent else ""))
    dg = s["diagnostics"]
    if dg and dg["certificates"]:
        c = dg["certificates"][0]
        print(f"mixing: the walk certified once for this body (knorm {c['version']}): max R-hat "
              f"{max(x['max_rhat'] for x in dg['certificates']):.4f}, min bulk ESS "
              f"{min(x['min_ess'] for x in dg['certificates']):.0f} of {c['pool']} records, gauge KS p "
              f"{min(x['gauge_ks_p'] for x in dg['certificates']):.3f}; each vector W = "
              f"{max(x['warmup'] for x in dg['certificates'])} steps after its chain's public stationary start "
              "or its previous vector")
    elif dg:
        print(f"mixing: max R-hat {dg['max_rhat']:.4f}, min bulk ESS {dg['min_ess']:.0f} over {dg['draws']} draws "
              f"({dg['runs']} sampler run(s)), {'certified' if dg['converged'] else 'NOT certified'}")
    if s.get("budget"):
        print(budget_line(s["budget"]))
    if s.get("checkpoint_deleted"):
        print("checkpoint: the finished run's snapshots and entropy (secrets) were deleted before the output was "
              "written")
    if s["out"]:
        print(f"wrote {s['out']}")


def add_parser(sub):
    """Add ``knorm sample`` to the subparsers ``sub``."""
    s = sub.add_parser("sample", help="private noise or releases Fx + noise, in bulk",
                       description="Private noise, or private answers Fx + noise with --data. The noise comes "
                                   "from OS entropy; --nonprivate-seed makes a reproducible run that is NOT "
                                   "private. With --data, nothing computed from the data is printed except the "
                                   "answers, and the summary states the total claim of the run.")
    _add_workload(s)
    _add_debug(s, argparse.SUPPRESS)
    s.add_argument("--mechanism", choices=(*MECHANISMS, "auto"), default="knorm",
                   help="default knorm; auto: the least expected error among all mechanisms (knorm.recommend, "
                        "from F alone; with --delta the Gaussian mechanism competes)")
    s.add_argument("--epsilon", type=_positive_float, default=1.0, help="ε of one answer (default 1)")
    s.add_argument("--delta", type=_probability, default=None,
                   help="δ in (0, 1), for --mechanism gaussian (or auto, letting it compete)")
    s.add_argument("--count", type=_positive_int, default=None,
                   help="number of answers (with --data: required, and count answers on the same data cost "
                        "count·ε in total, printed before they are released) or noise draws (without --data: "
                        f"default {NOISE_COUNT}, nothing spent)")
    s.add_argument("--data", help="x as a .npy vector of n counts: release Fx + noise (default: noise only); "
                                  "needs --count and --out or --json")
    s.add_argument("--regions", action="store_true",
                   help="with --data: its rows are histograms, one per region (regions × cells); "
                        "release one answer per row; the rows count as answers on the same data (rows·ε) unless "
                        "--disjoint")
    s.add_argument("--disjoint", action="store_true",
                   help="with --regions: declare the rows of --data disjoint data sets (every record in exactly one "
                        "row): all rows at the ε of one answer (parallel composition, by your declaration)")
    s.add_argument("--allow-noncounts", action="store_true",
                   help="with --data: accept an x with negative or non-integer entries (refused by default: a "
                        "histogram holds counts)")
    s.add_argument("--error-estimate", action="store_true",
                   help="with --data: after the answers are written, estimate the expected error E‖noise‖₂ from "
                        "fresh draws (never released; an MCMC mechanism's draws take about as long as the release)")
    s.add_argument("--level", type=_probability, default=0.9,
                   help="with --data --json: each answer's standard error and the half-width of its central "
                        "confidence interval at this level (default 0.9; public: F and ε only)")
    s.add_argument("--walk", choices=list(WALKS), default="billiard",
                   help="the MCMC walk drawing z uniform in K (knorm, nim; default billiard); every walk targets "
                        "the same law")
    s.add_argument("--nonprivate-seed", type=_seed, default=None, metavar="N",
                   help="seed the noise: a reproducible run that is NOT PRIVATE (for tests and debugging); "
                        "default: OS entropy")
    s.add_argument("--accept-uncertified", action="store_true",
                   help="release even if the walk (or, with --checkpoint, a sampler run) does not certify (the claim "
                        "then says UNCERTIFIED)")
    s.add_argument("--out", help="write the samples to FILE (.npy, or .npz with the privacy claim and summary)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--json", action="store_true",
                   help="print a machine-readable summary (with --data and no --out: including the answers)")
    s.add_argument("--quiet", action="store_true", help="no progress bar and no summary (unless --json)")
    s.add_argument("--checkpoint", metavar="DIR",
                   help="save snapshots of the unfinished run in DIR (created 0700; secret like the noise: they "
                        "hold its entropy and chain states); deleted when the run finishes; a new run refuses a "
                        "DIR that holds a checkpoint. A resumable run certifies its own pool (the per-run path)")
    s.add_argument("--checkpoint-every", type=_positive_float, default=30.0, metavar="SECONDS",
                   help="with --checkpoint: seconds between snapshots (default 30)")
    s.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --checkpoint DIR: the identical command only (same F, "
                        "data, mechanism, ε, δ, count, walk, options), else refused")
    s.add_argument("--prepared", metavar="FILE",
                   help="a prepared workload of this F (knorm prepare): its rounding and certificate are loaded, "
                        "not computed, and a release runs W steps from one of its public stationary states (refused "
                        "for another F, or if its certificate misses a threshold)")
    add_budget_options(s)
    _add_workers(s)
    s.add_argument("--scheduler", metavar="ADDRESS", help="run chain batches on this Dask distributed scheduler")
    s.set_defaults(func=cmd_sample)
    return s
