"""``knorm synth``: synthetic records and consistent marginal tables from released marginals.

Post-processing of a release (:func:`knorm.synth.synthesize`, the ``synth`` extra): the
answers of a marginal workload F (a .npy vector, or the .npz ``knorm sample --data … --count 1
--out`` wrote, with its privacy claim) → private-pgm → records over the declared domain. No
data is read; the claim is the release's, unchanged, and the output says so.
"""

import argparse
import json
from pathlib import Path

import numpy as np

from ..privacy import PrivacyClaim
from ._common import (CLIError, UsageError, _add_debug, _add_workload, _load_npy, _positive_float, _positive_int,
                      _seed, check_output, load_workload)

OUT_SUFFIXES = (".npz", ".csv")


def _load_answers(path):
    """(answers, claim or None) from a .npy vector or a knorm sample .npz (one answer)."""
    p = Path(path)
    if p.suffix != ".npz":
        return _load_npy(path, "--answers"), None
    if not p.is_file():
        raise CLIError(f"--answers file {path!r} does not exist")
    try:
        with np.load(p, allow_pickle=False) as z:
            samples = np.asarray(z["samples"])
            claim = json.loads(str(z["privacy_per_answer"])) if "privacy_per_answer" in z.files else None
            total = json.loads(str(z["privacy"])) if "privacy" in z.files else None
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise CLIError(f"--answers {path!r}: not a knorm sample .npz with 'samples' ({exc})".splitlines()[0]) from None
    if samples.ndim == 2 and samples.shape[0] != 1:
        raise CLIError(f"--answers {path!r} holds {samples.shape[0]} answers; give one (knorm sample --count 1)")
    return samples.reshape(-1), (claim, total)


def _noise(args, F, claims):
    """The noise for synthesize: --noise-std, else the release's mechanism rebuilt from its claim (F only)."""
    if args.noise_std is not None:
        return args.noise_std
    if claims is None or claims[0] is None:
        raise UsageError("--noise-std is needed: --answers is a .npy without the release's privacy claim")
    claim = claims[0]
    name, eps, details = claim.get("mechanism"), claim.get("epsilon"), claim.get("details") or {}
    if name == "Laplace" and "scale" in details:
        return float(np.sqrt(2.0) * details["scale"])
    if name == "Gaussian" and "sigma" in details:
        return float(details["sigma"])
    from ..mechanisms import KNormMechanism, NIMechanism

    if name in ("K-norm", "NIM"):
        cls = KNormMechanism if name == "K-norm" else NIMechanism
        try:  # the same mechanism from F alone: its noise draws touch no data
            return cls(F, epsilon=eps, accept_uncertified=True)
        except ValueError as exc:
            raise CLIError(f"--answers: cannot rebuild the release's {name} mechanism: {exc}".splitlines()[0]) from None
    raise CLIError(f"--answers: the release's mechanism {name!r} has no noise scale known here; give --noise-std")


def cmd_synth(args):
    from ..synth import synthesize

    out = check_output(args.out, args.force, inputs=(args.answers, args.matrix), suffixes=OUT_SUFFIXES)
    F, label = load_workload(args, dense=True)  # private-pgm's marginals are read from F's entries
    answers, claims = _load_answers(args.answers)
    noise = _noise(args, F, claims)
    claim = None
    if claims is not None and claims[1] is not None:
        total = claims[1]
        claim = PrivacyClaim(total["mechanism"], total["epsilon"], total["delta"], total["notion"], total["sampling"],
                             total["neighbours"], total["composition"], total["details"], total["answers"],
                             total["noise_source"], total["certified"])
    try:
        s = synthesize(F, answers, noise=noise, shape=args.domain, names=args.names, rows=args.rows,
                       iters=args.iters, noise_draws=args.noise_draws, privacy=claim, rng=args.seed)
    except ImportError as exc:
        raise CLIError(str(exc)) from None
    except ValueError as exc:
        raise CLIError(str(exc).splitlines()[0]) from None
    summary = {"workload": label, "records": int(len(s.records)), "attributes": list(s.names),
               "shape": list(s.shape), "estimated_total": s.total,
               "noise_scales": {",".join(k): v for k, v in s.noise_scales.items()},
               "privacy": None if s.privacy is None else {**s.privacy.as_dict(), "text": str(s.privacy)},
               "note": s.note, "out": str(out) if out else None}
    if out is not None:
        from .._io import atomic_write

        if out.suffix == ".csv":
            def write(f):
                f.write((",".join(s.names) + "\n").encode())
                np.savetxt(f, s.records, fmt="%d", delimiter=",")
            atomic_write(out, write)
        else:
            tables = {"table:" + ",".join(k): v for k, v in s.tables.items()}
            atomic_write(out, lambda f: np.savez(f, records=s.records, answers=s.answers,
                                                 summary=np.array(json.dumps(summary, default=float)), **tables))
    if args.json:
        print(json.dumps(summary, indent=2, default=float, ensure_ascii=False))
    else:
        print(f"{len(s.records)} synthetic records over {dict(zip(s.names, s.shape))} from {len(s.tables)} "
              f"marginal tables" + (f", written to {out}" if out else ""))
        print(f"privacy: {s.note}" + (f" — {s.privacy}" if s.privacy is not None else ""))
    return 0


def add_parser(sub):
    s = sub.add_parser("synth", help="synthetic records from released marginals (post-processing, private-pgm)",
                       description=__doc__.splitlines()[0])
    _add_debug(s, argparse.SUPPRESS)
    _add_workload(s)
    s.add_argument("--answers", required=True,
                   help="the released answers: a .npy vector (d), or knorm sample's .npz (one answer, its claim)")
    s.add_argument("--domain", type=_positive_int, nargs="+", default=None, metavar="SIZE",
                   help="the declared attribute sizes (default: as found in F)")
    s.add_argument("--names", nargs="+", default=None, help="attribute names (default a0 a1 …)")
    s.add_argument("--noise-std", type=_positive_float, default=None,
                   help="the noise standard deviation of every answer (default: from the .npz's claim)")
    s.add_argument("--noise-draws", type=_positive_int, default=2000,
                   help="K-norm / NIM: noise draws (no data) for each answer's variance (default 2000)")
    s.add_argument("--rows", type=_positive_int, default=None, help="synthetic records (default: the estimated total)")
    s.add_argument("--iters", type=_positive_int, default=1000, help="private-pgm mirror-descent steps (default 1000)")
    s.add_argument("--seed", type=_seed, default=None, metavar="N",
                   help="seed of the records' rounding (post-processing: not a privacy matter; default OS entropy)")
    s.add_argument("--out", help="write the records (.csv) or records, tables and summary (.npz)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_synth)
    return s
