"""The ``knorm`` command line.

* ``knorm sample``  -- differentially private noise or releases (``Fx + noise``) in bulk.
* ``knorm info``    -- facts about a workload's body and which mechanism to use.
* ``knorm uniform`` -- the engine alone: uniform draws from K with mixing diagnostics.
* ``knorm bench``   -- the oracle comparison and the Table-3 reproduction.
* ``knorm plot``    -- figures: a run's chains, error vs ε, NIM's spectrum (no data).

Privacy: mechanism noise comes from OS entropy; ``--nonprivate-seed`` makes a
reproducible run that is NOT private (a warning is printed and the outputs record it).
With ``--data`` nothing computed from the data is printed except the answers
themselves; the summary states the total claim of all answers (basic composition).

Errors end with one line on stderr, exit status 2 for usage errors and 1 otherwise,
never a traceback (``knorm --debug ...`` shows it). Arguments, inputs, outputs and
optional imports are checked before any sampling; an existing output file is never
overwritten without ``--force``; output is written atomically (temporary file, then
rename).
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

from .. import __version__
from .._io import atomic_write
from .._validate import check_memory as _check_memory
from ..walks.chains import WALKS
from ..walks.checkpoint import SNAPSHOTS, Checkpoint, CheckpointConflict

MECHANISMS = ("knorm", "nim", "laplace", "gaussian")
WORKLOADS = ("pm1", "bernoulli", "identity", "prefix", "all_range", "width_range", "marginals")
WORKLOAD_DEFAULTS = {"d": 20, "n": 100}
WORKLOAD_OPTIONS = {"pm1": ("d", "n"), "bernoulli": ("d", "n"), "identity": ("d", "n"), "prefix": ("d", "n"),
                    "all_range": ("n",), "width_range": ("n", "k"), "marginals": ("shape", "k")}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


class UsageError(CLIError):
    """Arguments that cannot go together: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # no prefix of an option is accepted silently
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, exit 2 (argparse's convention for usage errors)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _int_type(low, what):
    """An argparse type: an int >= ``low``, else a one-line usage error saying ``what``."""

    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    return parse


_positive_int = _int_type(1, "a positive integer")
_seed = _int_type(0, "a non-negative integer seed")
_nonneg_int = _int_type(0, "a non-negative integer")


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return v


def _probability(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text}")
    return v


# ---- inputs ---------------------------------------------------------------------------------

def _load_npy(path, what):
    p = Path(path)
    if not p.exists():
        raise CLIError(f"{what} file {path!r} does not exist")
    if p.is_dir():
        raise CLIError(f"{what} file {path!r} is a directory")
    if p.stat().st_size == 0:
        raise CLIError(f"{what} file {path!r} is empty (0 bytes), not a .npy array")
    try:
        arr = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise CLIError(f"cannot read {what} file {path!r} as .npy: {exc}".splitlines()[0]) from None
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise CLIError(f"{what} file {path!r} is an .npz archive; give a .npy array")
    return arr


def load_workload(args):
    """F from ``--matrix`` or from ``--workload`` with its sizes; returns (F, label)."""
    from .. import workloads as W
    from ..body.hull import validate_matrix

    if args.matrix:
        given = [f"--{k}" for k in ("workload", "d", "n", "k", "shape") if getattr(args, k) is not None]
        if given:
            raise UsageError(f"--matrix gives F; it cannot be combined with {', '.join(given)}")
        F = _load_npy(args.matrix, "--matrix")
        try:
            F = validate_matrix(F)
        except ValueError as exc:
            raise CLIError(f"--matrix {args.matrix!r}: {exc}") from None
        return F, f"matrix {args.matrix} {F.shape[0]}×{F.shape[1]}"
    name = args.workload or "pm1"
    allowed = WORKLOAD_OPTIONS[name]
    given = [k for k in ("d", "n", "k", "shape") if getattr(args, k) is not None]
    stray = [f"--{k}" for k in given if k not in allowed]
    if stray:
        raise UsageError(f"{', '.join(stray)} does not apply to --workload {name} "
                         f"(it takes {', '.join('--' + k for k in allowed)})")
    if name in ("identity", "prefix") and args.d is not None and args.n is not None and args.d != args.n:
        raise UsageError(f"--workload {name} is square: give --n (or --d), not two different sizes")
    d = args.d if args.d is not None else WORKLOAD_DEFAULTS["d"]
    n = args.n if args.n is not None else (args.d if name in ("identity", "prefix") and args.d is not None
                                           else WORKLOAD_DEFAULTS["n"])
    if name == "marginals" and args.shape is None:
        raise UsageError("--workload marginals needs --shape (the attribute sizes)")
    if name == "width_range" and args.k is None:
        raise UsageError("--workload width_range needs --k (the range width)")
    shape = tuple(args.shape) if args.shape else None
    rows, cols = _workload_shape(name, d, n, args.k, shape)
    check_memory(f"--workload {name}", rows, cols, 4, what="F's entries (rows × columns)",
                 hint="choose smaller sizes")
    try:
        F = W.by_name(name, d=d, n=n, k=args.k, shape=shape, rng=args.workload_seed)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"--workload {name!r}: {exc}") from None
    return F, f"workload {name} {F.shape[0]}×{F.shape[1]}"


def _workload_shape(name, d, n, k, shape):
    """(rows, columns) of a named workload, computed before building it."""
    if name in ("pm1", "bernoulli"):
        return d, n
    if name in ("identity", "prefix"):
        return n, n
    if name == "all_range":
        return n * (n + 1) // 2, n
    if name == "width_range":
        return max(n - (k or 1) + 1, 1), n
    cells = math.prod(shape)
    k = min(k or 1, len(shape))
    e = [1] + [0] * k  # rows = e_k(shape), the k-th elementary symmetric polynomial of the sizes
    for size in shape:
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * size
    return e[k], cells


def load_data(path, n):
    """x from ``--data``: a finite real vector of length n (checked before any sampling)."""
    x = _load_npy(path, "--data")
    if x.dtype == object or np.iscomplexobj(x) or x.dtype.kind not in "biuf":
        raise CLIError(f"--data {path!r}: x must be a real numeric vector, got dtype {x.dtype}")
    if x.ndim != 1 or x.shape[0] != n:
        raise CLIError(f"--data {path!r}: x must have shape ({n},) to match F's {n} columns; got {x.shape}")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise CLIError(f"--data {path!r}: x contains NaN or infinite entries")
    return x


def _check_writable(folder, what):
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CLIError(f"{what}: cannot write in folder {str(folder)!r} ({exc.strerror or exc})") from None


def check_output(path, force, option="--out", inputs=(), suffixes=(".npy", ".npz")):
    """The output path, checked before any work: suffix, not a folder, not an input, no
    silent overwrite, an existing writable parent folder."""
    if path is None:
        return None
    p = Path(path)
    if p.suffix not in suffixes:
        raise CLIError(f"{option} {path!r} must end in {', '.join(suffixes[:-1])} or {suffixes[-1]}")
    if p.is_dir():
        raise CLIError(f"{option} {path!r} is a directory")
    if p.exists() and not force:
        raise CLIError(f"{option} {path!r} exists; use --force to overwrite it")
    for q in inputs:
        if q and p.exists() and Path(q).exists() and p.resolve() == Path(q).resolve():
            raise CLIError(f"{option} {path!r} is also an input file")
    parent = p.parent
    if not parent.exists():
        raise CLIError(f"{option}: output folder {str(parent)!r} does not exist")
    if not parent.is_dir():
        raise CLIError(f"{option}: {str(parent)!r} is not a folder")
    _check_writable(parent, option)
    return p


def write_samples(path, array, meta=None):
    """Write .npy (array) or .npz (array + JSON metadata) atomically."""
    if path.suffix == ".npy":
        atomic_write(path, lambda f: np.save(f, array))
    else:
        meta = {k: np.array(json.dumps(v, default=float, ensure_ascii=False)) for k, v in (meta or {}).items()}
        atomic_write(path, lambda f: np.savez(f, samples=array, **meta))


def _num(v):
    return str(v) if v < 10**15 else (f"{float(v):.3g}" if v < 10**300 else "more than 1e300")


def check_memory(option, count, d, copies, what=None, hint="ask for fewer, in several runs if need be"):
    """Refuse, before allocating, a request whose ``count × d`` float64 values, times the
    working copies the computation holds, exceed the memory allowed
    (:func:`knorm._validate.check_memory`: half the physical memory)."""
    try:
        _check_memory(option, count if what is None else None, count * d * 8 * copies)
    except ValueError as exc:
        raise CLIError(f"{exc}: {what or 'the output'}, {_num(count)} × {_num(d)} values in {copies} working "
                       f"copies; {hint}") from None


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

        if self.bar is None or self.bar.unit != "draw" or self.bar.total != target or done < self.bar.n:
            if self.bar is not None:
                self.bar.close()
            self.runs += 1
            self.bar = tqdm(total=target, desc=f"{self.desc} (run {self.runs})", unit="draw", file=sys.stderr,
                            leave=False, dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def rounding(self, it, total):
        """The body's rounding (before the first draw): iterations done of at most ``total``."""
        if not self.enabled:
            return
        from tqdm import tqdm

        if self.bar is None or self.bar.unit != "iteration":
            self.close()
            self.bar = tqdm(total=total, desc=f"{self.desc} (rounding K)", unit="iteration", file=sys.stderr,
                            leave=False, dynamic_ncols=True)
        self.bar.update(it - self.bar.n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _warn(message):
    sys.stderr.write(f"knorm: warning: {message}\n")


def _require_dask():
    """Fail before any work when the Dask extra is missing."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        raise CLIError("--scheduler needs dask.distributed, which is not installed: "
                       "pip install 'knorm[dask]'") from None


def _dask_executor(address):
    from ..distributed import DaskExecutor

    try:
        return DaskExecutor(address)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CLIError(f"--scheduler: cannot reach the Dask scheduler at {address!r}: {exc}".splitlines()[0]) from None


# ---- knorm sample -----------------------------------------------------------------------------

def _checkpoint(args, F, x):
    """``--checkpoint``: the run's :class:`~knorm.walks.checkpoint.Checkpoint`, bound to the
    whole command (F, the data's hash or "no data", mechanism, ε, δ, count, walk, options,
    seed). A new run refuses a folder that holds a checkpoint; ``--resume`` refuses unless
    the folder holds an unfinished run of the identical command (exit 2, nothing written)."""
    context = {"knorm": __version__, "command": "sample", "matrix": F, "data": "no data" if x is None else x,
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


def build_mechanism(name, F, args, rng, sampler_options):
    from ..mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism

    extra = {"accept_uncertified": True} if args.accept_uncertified else {}
    try:
        if name == "laplace":
            return LaplaceMechanism(F, epsilon=args.epsilon, rng=rng)
        if name == "gaussian":
            return GaussianMechanism(F, epsilon=args.epsilon, delta=args.delta, rng=rng)
        if name == "knorm":
            return KNormMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=rng,
                                  bank_size=1000, sampler_options=sampler_options, **extra)
        return NIMechanism(F, epsilon=args.epsilon, walk=args.walk, rng=rng, sampler_options=sampler_options,
                           **extra)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _auto_mechanism(F, args, rng, sampler_options):
    """``--mechanism auto``: :func:`knorm.recommend`'s least-error mechanism (from F alone), built
    with the run's rng; returns (its choice as JSON-ready data, the mechanism)."""
    from ..recommend import recommend

    options = {"walk": args.walk, "sampler_options": sampler_options, "accept_uncertified": args.accept_uncertified}
    try:
        rec = recommend(F, epsilon=args.epsilon, delta=args.delta, rng=rng, mechanism_options=options)
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
    }


def _estimate_dict(e):
    return {"value": e.value, "stderr": e.stderr, "exact": e.exact, "method": e.method}


def _laplace_draws(d):
    """Draws for the Laplace Monte Carlo: 50 000, fewer where d is so large that they would pass the
    cap on values drawn (‖noise‖ concentrates as d grows: its relative SD is O(1/√d))."""
    from ..mechanisms._base import MAX_MC_VALUES

    return max(2, min(50_000, MAX_MC_VALUES // d))


def _expected_error(mech, norms):
    """E‖noise‖₂, data-independent.

    Laplace / Gaussian: the mechanism's own estimate (exact formula or Monte Carlo over
    fresh draws). K-norm / NIM: with ``norms`` (noise-only runs) the mean ℓ₂ norm of the
    released noise vectors ± its SE; without (runs on data) ``mech.expected_error`` over
    1000 fresh draws made after the release and never released.
    """
    from ..mechanisms import GaussianMechanism, LaplaceMechanism

    if isinstance(mech, GaussianMechanism):
        return _estimate_dict(mech.expected_error())
    if isinstance(mech, LaplaceMechanism):
        return _estimate_dict(mech.expected_error(n_samples=_laplace_draws(mech.d)))
    if norms is None:
        try:
            e = mech.expected_error(n_samples=1000)
        except Exception as exc:  # e.g. a sampler run that did not certify: never lose the answers for it
            return {"value": None, "stderr": None, "exact": False,
                    "method": f"not estimated: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"}
        d = _estimate_dict(e)
        d["method"] += " (draws made after the release, never released)"
        return d
    from ..mechanisms._base import mean_stderr

    value, se = mean_stderr(norms)
    return {"value": value, "stderr": se, "exact": False,
            "method": f"mean ℓ₂ norm of the {len(norms)} noise vectors"}


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
    if args.data and not args.out and not args.json:
        raise UsageError("--data needs --out FILE or --json: otherwise the answers (and the budget spent on "
                         "them) would be lost")
    if args.scheduler and args.workers:
        raise UsageError("--workers and --scheduler cannot be combined")
    mcmc_only = [o for o, v in (("--checkpoint", args.checkpoint), ("--scheduler", args.scheduler),
                                ("--workers", args.workers), ("--accept-uncertified", args.accept_uncertified))
                 if v]
    if mcmc_only and args.mechanism not in ("knorm", "nim", "auto"):
        raise UsageError(f"{mcmc_only[0]} applies only to the MCMC mechanisms (knorm, nim, or auto choosing one), "
                         f"not to --mechanism {args.mechanism}")


def cmd_sample(args):
    _check_sample_args(args)
    out = check_output(args.out, args.force, inputs=(args.data, args.matrix))
    if args.checkpoint and Path(args.checkpoint).exists() and not Path(args.checkpoint).is_dir():
        raise CLIError(f"--checkpoint {args.checkpoint!r} is a file, not a folder")
    if args.scheduler:
        _require_dask()
    F, label = load_workload(args)
    d = F.shape[0]
    x = load_data(args.data, F.shape[1]) if args.data else None
    answers_in_json = x is not None and args.json and out is None
    copies = (4 if args.mechanism in ("laplace", "gaussian") else 8) + (8 if answers_in_json else 0)
    check_memory("--count", args.count, d, copies)

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
    t0 = time.perf_counter()
    try:
        if args.scheduler:
            executor = _dask_executor(args.scheduler)
        opts = {**sampler_options, "progress": progress, **({"workers": executor} if executor else {})}
        choice = None
        if args.mechanism == "auto":
            choice, mech = _auto_mechanism(F, args, rng, opts)
        else:
            mech = build_mechanism(args.mechanism, F, args, rng, opts)
        t0 = time.perf_counter()
        if x is not None:
            samples = np.atleast_2d(mech.release(x, size=args.count))
        else:
            samples = mech.sample_noise(size=args.count)
    except CheckpointConflict as exc:  # the saved run is not this one: refused before anything is released
        raise UsageError(f"--resume: {exc}") from None
    except BaseException:
        if checkpoint is not None and not checkpoint.resumable:
            checkpoint.retire()  # no snapshot to continue: the saved entropy alone is a useless secret
        raise
    finally:
        progress.close()
        if executor is not None:
            executor.close()
    seconds = time.perf_counter() - t0
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
        "output": "answers Fx + noise" if x is not None else "noise",
        "data_touched": x is not None,
        "private": total["private"],
        "noise_source": total["noise_source"],
        "privacy": total,
        "privacy_per_answer": per_answer,
        "mechanism_choice": choice,
        "seconds": seconds,
        "samples_per_second": args.count / seconds if seconds > 0 else None,
    }
    if x is None:  # noise alone touches no data: its statistics are safe to print
        from ..mechanisms._base import mean_stderr, row_norms

        norms = row_norms(samples)  # F at 1e±300: no square over- or underflows
        summary["mean_l2_noise"], summary["mean_l2_noise_stderr"] = mean_stderr(norms)
        summary["expected_error"] = _expected_error(mech, norms)
    else:  # nothing computed from Fx or the answers: the expected error comes from separate draws
        summary["expected_error"] = _expected_error(mech, None)
    summary["diagnostics"] = diagnostics
    summary["resumed_from_checkpoint"] = bool(checkpoint is not None and checkpoint.loaded)
    summary["checkpoint_deleted"] = checkpoint is not None  # the finished run's snapshots and entropy
    summary["out"] = str(out) if out else None
    if out is not None:
        write_samples(out, samples, {"privacy": total, "privacy_per_answer": per_answer, "summary": summary})
    if args.json:
        if answers_in_json:
            summary["answers"] = samples.tolist()
        print(json.dumps(summary, indent=2, default=float, ensure_ascii=False))
    elif not args.quiet:
        _print_sample_summary(summary)
    return 0


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
    if s["data_touched"]:
        k = tot["answers"]
        lines.append(f"privacy (total, {k} answer{'s' if k != 1 else ''} on the same data, basic composition): "
                     + _claim_terms(tot))
        lines.append(f"privacy per answer: ε = {one['epsilon']:g}" + (f", δ = {one['delta']:g}" if one["delta"]
                                                                       else "")
                     + (f"; {one['composition']}" if one["composition"] else ""))
    else:
        lines.append("privacy: noise only, no data touched (nothing spent)")
        lines.append("per answer Fx + noise made from one of these vectors: " + _claim_terms(one)
                     + "; k such answers on the same data cost k·ε"
                     + (f"; {one['composition']}" if one["composition"] else ""))
    return lines


def _print_sample_summary(s):
    print(f"knorm {s['knorm']}: {s['workload']}; {s['count']} × {s['output']}")
    if s["mechanism_choice"]:
        print(f"--mechanism auto chose {s['mechanism_choice']['mechanism']}: {s['mechanism_choice']['reason']}")
    for line in _privacy_lines(s):
        print(line)
    if s["resumed_from_checkpoint"]:
        print("resumed from a checkpoint: the speed below counts the whole run, before and after the interrupt")
    print(f"speed: {s['count']} samples in {s['seconds']:.2f} s ({s['samples_per_second']:.1f} samples/s)")
    ee = s["expected_error"]
    ee_text = ("not estimated" if ee["value"] is None else f"{ee['value']:.4g}"
               + ("" if ee["exact"] or ee["stderr"] is None else f" ± {ee['stderr']:.2g}"))
    if s["data_touched"]:
        print(f"expected error E‖noise‖₂: {ee_text} ({ee['method']}); nothing computed from the data is shown")
    else:
        independent = not ee["method"].startswith("mean ℓ₂ norm of the")  # else it repeats the first number
        print(f"noise: mean ℓ₂ norm {s['mean_l2_noise']:.4g}"
              + (f" ± {s['mean_l2_noise_stderr']:.2g}" if s["mean_l2_noise_stderr"] else "")
              + (f"; expected error {ee_text} ({ee['method']})" if independent else ""))
    dg = s["diagnostics"]
    if dg:
        print(f"mixing: max R-hat {dg['max_rhat']:.4f}, min bulk ESS {dg['min_ess']:.0f} over {dg['draws']} draws "
              f"({dg['runs']} sampler run(s)), {'certified' if dg['converged'] else 'NOT certified'}")
    if s.get("checkpoint_deleted"):
        print("checkpoint: the finished run's snapshots and entropy (secrets) were deleted before the output was "
              "written")
    if s["out"]:
        print(f"wrote {s['out']}")
# ---- knorm info -------------------------------------------------------------------------------

def cmd_info(args):
    from .. import bounds
    from ..body import SymmetricHull
    from ..mechanisms import GaussianMechanism, KNormMechanism, LaplaceMechanism, NIMechanism
    from ..mechanisms._base import row_norms
    from ..mechanisms.additive import l1_sensitivity, l2_sensitivity
    from ..recommend import CANDIDATES, recommend

    F, label = load_workload(args)  # info never reads data: every number below depends on F only
    K = SymmetricHull(F)
    eps = args.epsilon
    facts = {"workload": label, "d": int(F.shape[0]), "n": int(F.shape[1]), "rank": K.dim,
             "l1_sensitivity": l1_sensitivity(F), "l2_sensitivity": l2_sensitivity(F),
             "exact_structure": K.exact_structure.kind if K.exact_structure is not None else None,
             "epsilon": eps, "delta": args.delta, "mc_seed": args.mc_seed}
    km = KNormMechanism(F, epsilon=eps, rng=args.mc_seed, body=K)
    z = km.sample_uniform(2000)
    nz = row_norms(z)
    facts["mean_l2_uniform_K"] = float(nz.mean())
    errs = {
        "laplace": LaplaceMechanism(F, epsilon=eps, rng=args.mc_seed).expected_error(
            n_samples=_laplace_draws(F.shape[0])),
        "knorm": km.expected_error(n_samples=2000),
    }
    if args.delta is not None:
        errs["gaussian"] = GaussianMechanism(F, epsilon=eps, delta=args.delta).expected_error()
    if not args.no_nim:
        nim = NIMechanism(F, epsilon=eps, rng=args.mc_seed)
        errs["nim"] = nim.expected_error(n_samples=1000)
    facts["expected_l2_error"] = {k: {"value": e.value, "stderr": e.stderr, "exact": e.exact, "method": e.method}
                                  for k, e in errs.items()}
    if K.dim <= args.vollb_max_dim:
        lb = bounds.vol_lower_bound(F, eps, rel_error=0.5, rng=args.mc_seed)
        facts["vol_lower_bound"] = {"value": lb.value, "stderr": lb.stderr, "note": lb.note}
    else:
        facts["vol_lower_bound"] = None
    candidates = [c for c in CANDIDATES if not (c == "nim" and args.no_nim or c == "gaussian" and args.delta is None)]
    table = recommend(F, epsilon=eps, delta=args.delta, rng=args.mc_seed, candidates=candidates, mc_seed=args.mc_seed)
    rec = {"mechanism": table.best, "reason": table.reason}
    facts["recommendation"] = rec
    facts["recommend"] = table.as_dict()
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
    print(table)
    return 0




# ---- knorm uniform / bench ---------------------------------------------------------------------

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
    rnd = rounding_of(K)
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


# Defaults of the scripts the README's tables come from (scripts/compare_oracles.py,
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
                E.compare_oracles(di, args.n, seed=seed, highs_steps=args.highs_steps)
        elif part == "table3":
            def run(tmp, d=d, seed=seed):
                E.table3(tuple(d), args.n, tuple(args.eps), releases=args.releases, seed=seed, out_dir=tmp,
                         plot_path=not args.no_plot, out=_bench_print)
            written = _bench_atomically(folder, run)
        else:
            def run(tmp, d=d, seed=seed):
                E.scaling(tuple(d), tuple(args.factors), tuple(args.walks), seconds=args.seconds, seed=seed,
                          out_dir=tmp, plot_path=not args.no_plot, out=_bench_print)
            written = _bench_atomically(folder, run)
        for path in written:
            print(f"wrote {path}")
    return 0


# ---- knorm plot ---------------------------------------------------------------------------------

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
                                     rng=args.seed)
        for name, row in errs.items():
            if name != "epsilons":
                cells = (f"ε={e:g}: {r.value:.4g}" + ("" if r.exact else f" ± {r.stderr:.2g}")
                         for e, r in zip(eps, row))
                print(f"  {name:9s} " + "  ".join(cells))
        fig = plots.error_vs_epsilon(errors=errs)
    elif args.what == "nim-spectrum":
        from ..mechanisms import NIMechanism

        try:  # the levels' covariances depend on F only, not on ε
            mech = NIMechanism(F, epsilon=1.0, walk=args.walk, rng=args.seed)
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


# ---- parser -----------------------------------------------------------------------------------

def _add_workload(p):
    g = p.add_argument_group("workload")
    g.add_argument("--workload", choices=WORKLOADS, default=None, help="named workload (default: pm1, random ±1)")
    g.add_argument("--d", type=_positive_int, default=None, help="number of queries (default 20)")
    g.add_argument("--n", type=_positive_int, default=None, help="number of cells (default 100)")
    g.add_argument("--k", type=_positive_int, default=None, help="range width / marginal order")
    g.add_argument("--shape", type=_positive_int, nargs="+", help="attribute sizes for --workload marginals")
    g.add_argument("--matrix", help="load F (d × n) from a .npy file instead (not with the options above)")
    g.add_argument("--workload-seed", type=_seed, default=0, metavar="N",
                   help="seed of the random workloads pm1 and bernoulli only, never of noise (default 0)")


def _add_debug(p, default):
    p.add_argument("--debug", action="store_true", default=default,
                   help="on an error, show the Python traceback instead of one line")


def build_parser():
    p = _Parser(prog="knorm", description="K-norm and NIM differential privacy on an exact sampling engine.")
    p.add_argument("--version", action="version", version=f"knorm {__version__}")
    _add_debug(p, False)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

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
    s.add_argument("--count", type=_positive_int, default=1000,
                   help="number of draws (default 1000); with --data, count answers on the same data cost "
                        "count·ε in total")
    s.add_argument("--data", help="x as a .npy vector of length n: release Fx + noise (default: noise only); "
                                  "needs --out or --json")
    s.add_argument("--walk", choices=list(WALKS), default="billiard")
    s.add_argument("--nonprivate-seed", type=_seed, default=None, metavar="N",
                   help="seed the noise: a reproducible run that is NOT PRIVATE (for tests and debugging); "
                        "default: OS entropy")
    s.add_argument("--accept-uncertified", action="store_true",
                   help="release even if a sampler run does not certify (the claim then says UNCERTIFIED)")
    s.add_argument("--out", help="write the samples to FILE (.npy, or .npz with the privacy claim and summary)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--json", action="store_true",
                   help="print a machine-readable summary (with --data and no --out: including the answers)")
    s.add_argument("--quiet", action="store_true", help="no progress bar and no summary (unless --json)")
    s.add_argument("--checkpoint", metavar="DIR",
                   help="save snapshots of the unfinished run in DIR (created 0700; secret like the noise: they "
                        "hold its entropy and chain states); deleted when the run finishes; a new run refuses a "
                        "DIR that holds a checkpoint")
    s.add_argument("--checkpoint-every", type=_positive_float, default=30.0, metavar="SECONDS")
    s.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --checkpoint DIR: the identical command only (same F, "
                        "data, mechanism, ε, δ, count, walk, options), else refused")
    s.add_argument("--workers", type=_positive_int, default=None, help="local threads running chains")
    s.add_argument("--scheduler", metavar="ADDRESS", help="run chain batches on this Dask distributed scheduler")
    s.set_defaults(func=cmd_sample)

    i = sub.add_parser("info", help="facts about a workload's body and a recommended mechanism",
                       description="Facts about F alone (no data is read): rank, sensitivities, expected "
                                   "errors, VolLB and a recommendation. The Monte-Carlo estimates are seeded "
                                   "by --mc-seed (reproducible; they depend on F only, so this costs no privacy).")
    _add_workload(i)
    _add_debug(i, argparse.SUPPRESS)
    i.add_argument("--epsilon", type=_positive_float, default=1.0)
    i.add_argument("--delta", type=_probability, default=None, help="also report the Gaussian mechanism at this δ")
    i.add_argument("--mc-seed", type=_seed, default=0, metavar="N",
                   help="seed of the Monte-Carlo error and volume estimates (default 0)")
    i.add_argument("--no-nim", action="store_true", help="skip NIM's (slower) error estimate")
    i.add_argument("--vollb-max-dim", type=_nonneg_int, default=20,
                   help="estimate VolLB only up to this rank (default 20; 0 skips it)")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_info)

    u = sub.add_parser("uniform", help="uniform draws from K = F·B₁ⁿ with mixing diagnostics",
                       description="Uniform draws from K (the engine alone, no data). The draws come from OS "
                                   "entropy; --nonprivate-seed makes them reproducible (noise made from seeded "
                                   "draws is not private).")
    _add_workload(u)
    _add_debug(u, argparse.SUPPRESS)
    u.add_argument("--count", "--size", dest="count", type=_positive_int, default=2000,
                   help="number of draws (default 2000)")
    u.add_argument("--walk", choices=list(WALKS), default="billiard")
    u.add_argument("--chains", type=_positive_int, default=None)
    u.add_argument("--workers", type=_positive_int, default=None)
    u.add_argument("--nonprivate-seed", type=_seed, default=None, metavar="N",
                   help="seed the draws (reproducible; default: OS entropy)")
    u.add_argument("--out", help="save the draws (.npy or .npz)")
    u.add_argument("--force", action="store_true")
    u.set_defaults(func=cmd_uniform)

    b = sub.add_parser("bench", help="oracle comparison, Table-3 reproduction and scaling study",
                       description="Benchmarks on synthetic workloads and synthetic data (no real data); "
                                   "nothing bench prints is private. With no options each benchmark runs the "
                                   "settings and seeds of its script (scripts/compare_oracles.py: d 40, seed 0; "
                                   "scripts/reproduce_table3.py: d 40 20, seed 2019; scripts/scaling.py: d 10 20 "
                                   "40 80, seed 0), so it reproduces the README's tables. Files are written "
                                   "atomically and never overwritten without --force.")
    _add_debug(b, argparse.SUPPRESS)
    b.add_argument("what", nargs="?", choices=["oracles", "table3", "scaling", "all"], default="all",
                   help="all: oracles and table3 (default)")
    b.add_argument("--d", type=_positive_int, nargs="+", default=None,
                   help="query counts (default: the script's, see above)")
    b.add_argument("--n", type=_positive_int, default=200, help="records (oracles, table3; default 200)")
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
    b.add_argument("--no-plot", action="store_true")
    b.set_defaults(func=cmd_bench)

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
    pl.add_argument("--walk", choices=list(WALKS), default="billiard")
    pl.add_argument("--seed", type=_seed, default=0, metavar="N",
                    help="seed of the sampler and the Monte-Carlo estimates (default 0)")
    pl.add_argument("--count", type=_positive_int, default=None,
                    help="chain figures: draws fit for release asked of the run (default 1000)")
    pl.add_argument("--chains", type=_positive_int, default=None, help="chain figures: number of chains")
    pl.add_argument("--coord", type=_nonneg_int, default=None,
                    help="chains, trace, rank: the span coordinate shown (default 0)")
    pl.add_argument("--workers", type=_positive_int, default=None, help="local threads running chains")
    pl.add_argument("--eps", type=_positive_float, nargs="+", default=None,
                    help="error-vs-epsilon: the ε values (default 0.1 0.3 1 3)")
    pl.add_argument("--mechanisms", nargs="+", choices=MECHANISMS, default=None,
                    help="error-vs-epsilon: mechanisms (default laplace knorm nim)")
    pl.add_argument("--delta", type=_probability, default=None, help="error-vs-epsilon: δ for gaussian")
    pl.add_argument("--mc-samples", type=_positive_int, default=None,
                    help="error-vs-epsilon: Monte-Carlo draws per estimate (default 2000)")
    pl.set_defaults(func=cmd_plot)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None):
    _warn(_one_line(message))


def _one_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv=None):
    """Run the command line; returns the exit status (2: usage error, 1: any other error)."""
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            if not args.debug:  # warnings as one line each, without source lines
                warnings.showwarning = _show_warning
            return args.func(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        resumable = getattr(args, "checkpoint", None) and any(Path(args.checkpoint).glob(SNAPSHOTS))
        sys.stderr.write("knorm: interrupted" + (" (resume with --resume)\n" if resumable else "\n"))
        return 130
    except BrokenPipeError:  # the reader went away (`knorm ... | head`): stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except Exception as exc:  # the one top-level handler: one line, or the traceback with --debug
        if args.debug:
            traceback.print_exc()
            return 2 if isinstance(exc, UsageError) else 1
        prog = f"knorm {args.command}"
        if isinstance(exc, UsageError):
            sys.stderr.write(f"{prog}: error: {exc}\n")
            return 2
        if isinstance(exc, CLIError):
            sys.stderr.write(f"knorm: error: {exc}\n")
            return 1
        msg = _one_line(exc)
        if type(exc).__name__ == "ConvergenceError":
            msg += " (--accept-uncertified releases anyway, under an UNCERTIFIED claim)"
        elif isinstance(exc, MemoryError):
            msg = "out of memory" + (f": {msg}" if msg != "MemoryError" else "") + "; ask for fewer draws"
        elif not isinstance(exc, (ValueError, OSError)):
            msg = f"{type(exc).__name__}: {msg}"
        sys.stderr.write(f"knorm: error: {msg}\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
